"""LOOP's side of an OpenEnv server: a task source whose episodes are OpenEnv sessions (OpenEnv's own client).

Each episode opens its own WebSocket session (`GenericEnvClient`, one server-side environment per session, which is
how OpenEnv serves concurrent episodes) and closes it at the end. Every failure of the server (refused, timed out,
closed, an error reply, an answer without the expected fields) is an `EnvironmentFailure` naming the URL and what
was expected: the episode ends ENV_ERROR and the collector retries it (`rollout.episode_retries`) and counts it. A
refusal because every session is taken says "capacity" (OpenEnv sends it just before closing the socket). Before a
retry, `wait_until_healthy` waits for the server with a doubling backoff, bounded. A server started here
(`serve_family`, `app`) that died is started again by the next episode. An action the server's schema rejects
(OpenEnv's VALIDATION_ERROR) is not a server failure: the agent reads the rejection as the step's observation.

With `agent=tools` and a server whose `/mcp` lists tools, an action is one tool call (tool_calls.py), stepped as
OpenEnv's `call_tool` action; a failed call (OpenEnv's `error`, or a result marked `is_error`) is the model's to read,
counted in the evaluation's `details["tool_errors"]`. Splits come from OpenEnv's Task API when the server has one
(`reset(split=, index=)`), else from `GET /tasks/<split>` or seeds (settings.py).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from loop_agents.envs.openenv.catalogue import offers, server_url, shared_server
from loop_agents.envs.openenv.discovery import task_id_of, task_specs
from loop_agents.envs.openenv.episode import OpenEnvEpisode
from loop_agents.envs.openenv.settings import OpenEnvSettings
from loop_agents.errors import ConfigError
from loop_agents.rollout.environment import EnvironmentFailure
from loop_agents.tools.spec import ToolSpec


def probe(
    url: str, settings: OpenEnvSettings, timeout_s: float | None = None, tool_calls: bool = False
) -> dict[str, Any]:
    """Check that `url` is an OpenEnv server whose schema fits the settings (with `tool_calls`, the agent calls its
    MCP tools: no text action field is needed); returns its action schema's properties.

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
    if tool_calls:
        return action
    if settings.action_field not in action:
        tools = offers(settings).tools.tools if _started_here_or(url, settings) else ()
        hint = (f"; it offers tools over MCP ({', '.join(t['name'] for t in tools)}): agent=tools calls them"
                if tools else "")  # fmt: skip
        raise ConfigError(f"OpenEnv server {url}: its action has no field {settings.action_field!r} "
                          f"(env.options.action_field); its fields: {', '.join(action) or 'none'}{hint}")  # fmt: skip
    if settings.observation_field and settings.observation_field not in observation:
        raise ConfigError(f"OpenEnv server {url}: its observation has no field {settings.observation_field!r} "
                          f"(env.options.observation_field); its fields: {', '.join(observation)}")  # fmt: skip
    return action


def _started_here_or(url: str, settings: OpenEnvSettings) -> bool:
    """Whether `url` is the settings' server (its offers can be asked), not some other URL probed."""
    return not settings.url or settings.url.rstrip("/") == url


class OpenEnvTaskSource:
    """Task ids per split (listed by the server, or seeds) and one OpenEnv session per episode. `use_tools`: the
    agent calls tools (`agent=tools`), so the server's MCP tools are used when it lists any."""

    def __init__(
        self,
        settings: OpenEnvSettings,
        use_tools: bool = False,
        tools: Callable[[], list[ToolSpec]] | None = None,
    ) -> None:
        self.settings = settings
        # the tools the agent calls (the family's tools()), asked once when needed
        self._declared = tools or list
        self._tools: list[ToolSpec] | None = None
        self.server = shared_server(settings) if not settings.url else None
        self.url: str | None = settings.url.rstrip("/") if settings.url else None
        self.use_tools = use_tools
        self.tool_calls = False  # the episodes' actions are MCP tool calls (known once the server answered)
        self._places: dict[str, tuple[str, int]] = {}  # Task API: task id -> (split, index)
        self.finish_supported: bool | None = None
        self.restarts = 0
        self._lock = threading.Lock()
        self._ids: dict[str, list[str]] = {}
        self._recovery: asyncio.Future | None = (
            None  # the one wait for the server that failing episodes share
        )

    def _ensure_server(self) -> str:
        """The server's URL; a server of ours that is not running (yet, or any more) is started first."""
        with self._lock:
            if self.server is not None and not self.server.alive():
                if self.server.starts:
                    self.restarts += 1
                self.url = server_url(self.settings)  # (re)started, shared with the family's tools()
                self.finish_supported = None
            elif self.server is not None:
                self.url = str(self.server.url)
            if self.finish_supported is None:
                self.tool_calls = self.use_tools and bool(offers(self.settings).tools.tools)
                action = probe(self.url, self.settings, tool_calls=self.tool_calls)
                self.finish_supported = action.get(self.settings.finish_field, {}).get("type") == "boolean"
            return self.url

    def tools(self) -> list[ToolSpec]:
        """The tools the agent calls (their actions are read back into calls by the episodes)."""
        if self._tools is None:
            self._tools = self._declared()
        return self._tools

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
        api = offers(s).tasks if s.tasks != "seeds" else None
        if api is not None and api.env_name:
            url = self._ensure_server()
            ids = []
            for spec in task_specs(url, api, split, s.message_timeout_s):
                ids.append(task_id_of(split, spec))
                self._places[ids[-1]] = (split, int(spec["index"]))
        elif s.tasks in ("seeds", "auto"):
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
        api = offers(self.settings).tasks if self.settings.tasks != "seeds" else None
        if api is not None and api.env_name:
            for split in api.splits:  # a worker plays ids the driver listed: its own listing, once per split
                if task_id in self._places:
                    break
                self.task_ids(split)
            if task_id not in self._places:
                raise EnvironmentFailure(f"OpenEnv server {self.url}: its Task API lists no task {task_id!r}")
            split, index = self._places[task_id]
            kwargs.update(split=split, index=index)
        elif self.settings.tasks in ("seeds", "auto"):
            kwargs["seed"] = int(task_id.removeprefix("seed-"))
        else:
            kwargs["task_id"] = task_id
        return kwargs

    async def make_env(self) -> OpenEnvEpisode:
        url = await asyncio.to_thread(self._ensure_server) if self.server is None else self._ensure_server()
        return OpenEnvEpisode(self, url)

    async def wait_until_healthy(self, timeout_s: float) -> bool:
        """Before a retry: wait until the server answers `GET /health` (one of ours that died is started again),
        polling after 1, 2, 4, ... s (at most 10 s apart: a check is one GET) for at most `timeout_s`; False when it
        did not come back.
        Concurrent callers share one wait (one line when it starts, one when it ends)."""
        if self._recovery is None or self._recovery.done():
            self._recovery = asyncio.ensure_future(self._await_health(timeout_s))
        return await asyncio.shield(self._recovery)

    async def _await_health(self, timeout_s: float) -> bool:
        began, delay = time.monotonic(), 1.0
        while True:
            try:
                url = await asyncio.to_thread(self._ensure_server) if self.server is not None else self.url
                async with httpx.AsyncClient(timeout=5.0) as http:
                    healthy = (await http.get(f"{url}/health")).status_code == 200
            except (httpx.HTTPError, EnvironmentFailure, ConfigError, OSError):
                healthy = False
            waited = time.monotonic() - began
            if healthy:
                if waited > 0.5:
                    print(
                        f"[openenv] server {self.url} answers again after {waited:.0f} s; retrying",
                        flush=True,
                    )
                return True
            if waited >= timeout_s:
                print(f"[openenv] server {self.url} did not answer for {waited:.0f} s "
                      "(rollout.server_recovery_timeout_s); its episodes are lost", flush=True)  # fmt: skip
                return False
            if delay == 1.0:
                print(f"[openenv] server {self.url} does not answer; waiting up to {timeout_s:.0f} s for it "
                      "(checks after 1, 2, 4, ... s)", flush=True)  # fmt: skip
            await asyncio.sleep(min(delay, timeout_s - waited))
            delay = min(delay * 2, 10.0)

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
