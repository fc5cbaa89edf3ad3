"""LOOP's side of an OpenEnv server: a task source whose episodes are OpenEnv sessions (OpenEnv's own client).

Each episode opens its own WebSocket session (`GenericEnvClient`, one server-side environment per session, which is
how OpenEnv serves concurrent episodes) and closes it at the end. Every failure of the server (refused, timed out,
closed, an error reply, an answer without the expected fields) is an `EnvironmentFailure` naming the URL and what
was expected: the episode ends ENV_ERROR and the collector retries it (`rollout.episode_retries`) and counts it. A
server started here (`serve_family`, `app`) that died is started again by the next episode.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx
from openenv.core.generic_client import GenericEnvClient

from loop_agents.envs.openenv.launcher import OpenEnvServerProcess
from loop_agents.envs.openenv.settings import OpenEnvSettings
from loop_agents.envs.protocol import EnvironmentFailure, Evaluation, ResetResult, StepResult
from loop_agents.errors import ConfigError


def probe(url: str, settings: OpenEnvSettings, timeout_s: float | None = None) -> dict[str, Any]:
    """Check that `url` is an OpenEnv server whose schema fits the settings; returns its action schema's properties.

    Raises ConfigError, one line naming the URL and what was expected."""
    timeout = timeout_s or settings.connect_timeout_s
    try:
        health = httpx.get(f"{url}/health", timeout=timeout)
        schema = httpx.get(f"{url}/schema", timeout=timeout)
    except httpx.TimeoutException:
        raise ConfigError(
            f"OpenEnv server {url}: no answer to GET /health or /schema within {timeout} s"
        ) from None
    except httpx.HTTPError as err:
        raise ConfigError(f"OpenEnv server {url} refused: {type(err).__name__}: {err} (expected an OpenEnv "
                          "server: GET /health, /schema, WebSocket /ws)") from None  # fmt: skip
    if health.status_code != 200 or schema.status_code != 200:
        raise ConfigError(f"OpenEnv server {url}: GET /health answered {health.status_code}, GET /schema "
                          f"{schema.status_code}; expected 200 from an OpenEnv server")  # fmt: skip
    try:
        body = schema.json()
        action = body["action"].get("properties", {})
        observation = body["observation"].get("properties", {})
    except (ValueError, KeyError, AttributeError, TypeError):
        raise ConfigError(f"OpenEnv server {url}: GET /schema is not OpenEnv's schema (expected JSON with "
                          f"'action' and 'observation' JSON schemas); got {schema.text[:200]!r}") from None  # fmt: skip
    if settings.action_field not in action:
        raise ConfigError(f"OpenEnv server {url}: its action has no field {settings.action_field!r} "
                          f"(env.options.action_field); its fields: {', '.join(action) or 'none'}")  # fmt: skip
    if settings.observation_field and settings.observation_field not in observation:
        raise ConfigError(f"OpenEnv server {url}: its observation has no field {settings.observation_field!r} "
                          f"(env.options.observation_field); its fields: {', '.join(observation)}")  # fmt: skip
    return action


class OpenEnvTaskSource:
    """Task ids per split (listed by the server, or seeds) and one OpenEnv session per episode."""

    def __init__(self, settings: OpenEnvSettings) -> None:
        self.settings = settings
        self.server = OpenEnvServerProcess(settings) if not settings.url else None
        self.url: str | None = settings.url.rstrip("/") if settings.url else None
        self.finish_supported: bool | None = None
        self.restarts = 0
        self._lock = threading.Lock()
        self._ids: dict[str, list[str]] = {}

    def _ensure_server(self) -> str:
        """The server's URL; a server of ours that is not running (yet, or any more) is started first."""
        with self._lock:
            if self.server is not None and not self.server.alive():
                if self.server.starts:
                    self.restarts += 1
                try:
                    self.url = self.server.start()
                except (RuntimeError, TimeoutError) as err:
                    raise EnvironmentFailure(str(err)) from None
                self.finish_supported = None
            if self.finish_supported is None:
                action = probe(self.url, self.settings)
                self.finish_supported = action.get(self.settings.finish_field, {}).get("type") == "boolean"
            return self.url

    def check(self) -> None:
        """Start-up check: the server answers and its schema fits (ConfigError, one line)."""
        try:
            self._ensure_server()
        except EnvironmentFailure as err:
            raise ConfigError(str(err)) from None

    async def start(self) -> None:
        await asyncio.to_thread(self.check) if self.server is None else self.check()

    def task_ids(self, split: str) -> list[str]:
        if split in self._ids:
            return self._ids[split]
        s = self.settings
        if s.tasks == "seeds":
            if split not in s.splits:
                raise ConfigError(f"env.options.splits has no split {split!r}; it has {', '.join(s.splits)}")
            first, count = s.splits[split]
            ids = [f"seed-{n}" for n in range(first, first + count)]
        else:
            url = self._ensure_server()
            try:
                response = httpx.get(f"{url}/tasks/{split}", timeout=s.message_timeout_s)
                body = response.json()
            except (httpx.HTTPError, ValueError) as err:
                body, response = {"error": f"{type(err).__name__}: {err}"}, None
            if (
                response is not None
                and response.status_code == 404
                and isinstance(body, dict)
                and "detail" in body
            ):
                raise ConfigError(f"OpenEnv server {url}: no split {split!r}: {body['detail']}")
            listed = body.get("task_ids") if isinstance(body, dict) else None
            if not isinstance(listed, list):
                raise ConfigError(f"OpenEnv server {url}: GET /tasks/{split} gave no task list ({str(body)[:200]}); "
                                  "expected {'task_ids': [...]} as our server answers, else set "
                                  "env.options.tasks=seeds")  # fmt: skip
            ids = [str(t) for t in listed]
        self._ids[split] = ids
        return ids

    def reset_kwargs(self, task_id: str) -> dict[str, Any]:
        kwargs = dict(self.settings.reset_kwargs)
        if self.settings.tasks == "seeds":
            kwargs["seed"] = int(task_id.removeprefix("seed-"))
        else:
            kwargs["task_id"] = task_id
        return kwargs

    async def make_env(self) -> OpenEnvEpisode:
        url = await asyncio.to_thread(self._ensure_server) if self.server is None else self._ensure_server()
        return OpenEnvEpisode(self, url)

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()


class OpenEnvEpisode:
    """One episode = one OpenEnv session (the `Environment` protocol of envs/protocol.py)."""

    def __init__(self, source: OpenEnvTaskSource, url: str) -> None:
        self.source, self.settings, self.url = source, source.settings, url
        self.client: GenericEnvClient | None = None
        self.rewards: list[float] = []
        self.done = False
        self.last: dict[str, Any] = {}

    async def _call(self, awaitable, what: str):
        try:
            return await awaitable
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            raise EnvironmentFailure(f"OpenEnv server {self.url}: no answer to {what} within "
                                     f"{self.settings.message_timeout_s} s") from None  # fmt: skip
        except Exception as err:  # refused, closed, an error reply: the server failed, not the agent
            raise EnvironmentFailure(
                f"OpenEnv server {self.url}: {what} failed: {type(err).__name__}: {err}"
            ) from None

    def _observation(self, result: Any, what: str) -> dict[str, Any]:
        """The observation dict of a result, checked against the settings (EnvironmentFailure when it does not fit)."""
        observation = result.observation
        if not isinstance(observation, dict):
            raise EnvironmentFailure(f"OpenEnv server {self.url}: the {what} answer's observation is "
                                     f"{type(observation).__name__}; expected an object")  # fmt: skip
        field = self.settings.observation_field
        if field and not isinstance(observation.get(field), str):
            raise EnvironmentFailure(f"OpenEnv server {self.url}: the {what} observation has no text field {field!r} "
                                     f"(env.options.observation_field); its fields: {', '.join(observation)}")  # fmt: skip
        if result.reward is not None and not isinstance(result.reward, int | float):
            raise EnvironmentFailure(f"OpenEnv server {self.url}: the {what} reward is {result.reward!r}; "
                                     "expected a number or null")  # fmt: skip
        return observation

    def render(self, observation: dict[str, Any]) -> str:
        """The text the agent reads: the configured field, else the one string field, else the observation as JSON."""
        if self.settings.observation_field:
            return observation[self.settings.observation_field]
        strings = [k for k, v in observation.items() if isinstance(v, str) and k != "task_id"]
        if len(strings) == 1:
            return observation[strings[0]]
        shown = {k: v for k, v in observation.items() if k != self.settings.info_field}
        return json.dumps(shown, sort_keys=True, default=str)

    async def reset(self, task_id: str) -> ResetResult:
        await self.close()
        self.rewards, self.done = [], False
        s = self.settings
        self.client = GenericEnvClient(
            base_url=self.url, connect_timeout_s=s.connect_timeout_s, message_timeout_s=s.message_timeout_s
        )
        await self._call(self.client.connect(), "the WebSocket connect to /ws")
        result = await self._call(self.client.reset(**self.source.reset_kwargs(task_id)), "reset")
        observation = self._observation(result, "reset")
        self.last = observation
        raw_info = observation.get(s.info_field)
        info = dict(raw_info) if isinstance(raw_info, dict) else {}
        if s.system_prompt and not info.get("system_prompt"):
            info["system_prompt"] = s.system_prompt
        info.setdefault("task_id", task_id)
        return ResetResult(self.render(observation), info)

    async def step(self, action: str) -> StepResult:
        if self.client is None:
            raise EnvironmentFailure(f"OpenEnv server {self.url}: step before reset")
        s = self.settings
        payload = {**s.action_extra, s.action_field: s.action_template.format(action=action)}
        result = await self._call(self.client.step(payload), "step")
        observation = self._observation(result, "step")
        return self._record(result, observation)

    def _record(self, result: Any, observation: dict[str, Any]) -> StepResult:
        reward = float(result.reward) if result.reward is not None else 0.0
        self.rewards.append(reward)
        self.done, self.last = bool(result.done), observation
        return StepResult(self.render(observation), self.done, reward)

    async def evaluate(self) -> Evaluation:
        """The episode's score from the rewards (ended early with `finish` where the server offers it)."""
        s = self.settings
        if not self.done and self.client is not None and self.source.finish_supported:
            result = await self._call(self.client.step({s.finish_field: True}), "step (finish)")
            self._record(result, self._observation(result, "finish"))
        score = (sum(self.rewards) if s.score == "sum" else self.rewards[-1]) if self.rewards else 0.0
        flag = self.last.get(s.success_field)
        success = flag if isinstance(flag, bool) else score >= s.success_threshold
        details = self.last.get("details") if isinstance(self.last.get("details"), dict) else {}
        return Evaluation(reward=float(score), success=bool(success), details={**details, "done": self.done})

    async def close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            await client.close()
