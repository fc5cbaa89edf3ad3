"""EnvClient: the AgentGym env-server protocol behind the project's async Environment protocol.

Any AgentGym-style server plugs in by URL (ours, or AgentGym's own BabyAI/TextCraft/SciWorld servers):
the client uses only the routes, bodies and reply fields AgentGym's own clients use (create, reset,
step; close where the server has it; docs/agentgym_conformance.md), plus our /info when the server has
it. Item ids are AgentGym's `<env>_<index>` (e.g. `babyai_123`); the index is sent as `data_idx`. As
AgentGym's SciWorld client, the first observation is `task_description` + "\n" + `observation` when the
reset reply carries a task description. With `action_format="react"` the model's reply is cut to its
action the way AgentGym's clients do it (the text after "Action:").
Every request has a timeout. create/reset are retried on connection errors (they are idempotent for
the episode: a failed reset is simply redone); step is never retried (an action must not be applied
twice). Any failure after which the server-side instance cannot be trusted (timeout, connection lost,
malformed reply) drops it: the next `reset` creates a fresh instance, so a restarted server is picked
up without rebuilding the client. Server-reported errors (unknown id, bad item) raise
`AgentGymRequestError` carrying the server's message.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx

from loop_agents.rollout.environment import EnvironmentFailure, Evaluation, ResetResult, StepResult

DEFAULT_SCORE_SCALE = {"sciworld": 100.0}  # AgentGym's `score` of a solved item, for servers without /info
ACTION_FORMATS = ("raw", "react")


def react_action(env_name: str, text: str) -> str | None:
    """The action AgentGym's client for `env_name` sends for a model reply (None: it sends nothing and
    answers with an error observation). TextCraft: the one line after "Action:" (more than one
    "Action:" is an error), characters other than letters, digits, ", " dropped, "look" -> "inventory";
    others: the text after the first "Action:" (else the whole reply), a trailing "</s>" removed."""
    if env_name == "textcraft":
        matches = re.findall(r"Action:\s*(.*?)(?=\n|$)", text, re.DOTALL)
        if len(matches) > 1:
            return None
        action = " ".join(re.sub(r"[^A-Za-z0-9, ]+", "", matches[-1] if matches else "").split()).strip()
        return "inventory" if action.lower() == "look" else action
    if text.endswith("</s>"):
        text = text[:-5]  # AgentGym cuts 5 characters for the 4-character "</s>"
    parts = text.split("Action:")
    return (parts[1] if len(parts) > 1 else parts[0]).strip()


class AgentGymRequestError(EnvironmentFailure):
    """The server answered with an error (bad item id, unknown env id, finished episode)."""


def parse_item_id(item_id: str, env_name: str) -> int:
    """`<env>_<index>` -> index; the env name must match the server's game."""
    prefix, _, number = item_id.rpartition("_")
    if not number.isdigit() or not prefix:
        raise ValueError(f"malformed item id {item_id!r}: expected '<env>_<index>', e.g. '{env_name}_0'")
    if prefix != env_name:
        raise ValueError(f"item id {item_id!r} is for env {prefix!r}, but this client serves {env_name!r}")
    return int(number)


class AgentGymEnvClient:
    """One episode at a time on one AgentGym env server (an `Environment`)."""

    def __init__(self, url: str, env_name: str, request_timeout_s: float = 60.0, retries: int = 2,
                 retry_backoff_s: float = 0.5, system_prompt: str | None = None,
                 reward_scale: float = 1.0) -> None:  # fmt: skip
        self.url = url.rstrip("/")
        self.env_name = env_name
        self.retries = retries
        self.retry_backoff_s = retry_backoff_s
        self.system_prompt = system_prompt
        self.reward_scale = reward_scale  # divides `reward` for servers that send no `score` (TextCraft: 1)
        self.score_scale: float | None = (
            None  # `score` of a solved item; None = the server's /info, else by env
        )
        self.create_options: dict[str, str] = {}  # our servers' per-instance options (action_set, task_set)
        self.action_format = "raw"  # raw: the reply is the action | react: AgentGym's client parsing
        self.http = httpx.AsyncClient(base_url=self.url, timeout=request_timeout_s)
        self.env_id: int | None = None
        self.last: dict[str, Any] | None = None
        self.item_id: str | None = None

    async def _request(self, method: str, path: str, body: dict[str, Any] | None = None,
                       params: dict[str, Any] | None = None, retry: bool = False) -> Any:  # fmt: skip
        attempts = self.retries + 1 if retry else 1
        for attempt in range(attempts):
            try:
                response = await self.http.request(method, path, json=body, params=params)
            except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as err:
                if attempt + 1 < attempts:
                    await asyncio.sleep(self.retry_backoff_s * 2**attempt)
                    continue
                self.env_id = None
                raise EnvironmentFailure(
                    f"{self.env_name} env server {self.url} not reachable ({path}): {err!r}"
                ) from err
            except httpx.TimeoutException as err:
                self.env_id = None
                raise EnvironmentFailure(f"{self.env_name} env server {self.url}: {path} timed out") from err
            try:
                data = response.json()
            except ValueError as err:
                self.env_id = None
                raise EnvironmentFailure(
                    f"{self.env_name} env server {self.url}: {path} returned non-JSON (HTTP {response.status_code}): "
                    f"{response.text[:200]!r}"
                ) from err
            if isinstance(data, dict) and "error" in data:  # AgentGym servers report errors with HTTP 200 too
                raise AgentGymRequestError(f"{self.env_name} env server: {path}: {data['error']}")
            if response.status_code != 200:
                raise AgentGymRequestError(
                    f"{self.env_name} env server: {path}: HTTP {response.status_code}: {data!r}"
                )
            return data
        raise AssertionError("unreachable")

    async def _server_info(self) -> None:
        """System prompt and score scale from our servers' /info (AgentGym's servers have none)."""
        if self.system_prompt is not None and self.score_scale is not None:
            return
        try:
            info = await self._request("GET", "/info", retry=True)
        except AgentGymRequestError:
            info = {}
        if self.system_prompt is None:
            self.system_prompt = info.get("system_prompt") or ""
        if self.score_scale is None:
            self.score_scale = float(info.get("score_scale") or DEFAULT_SCORE_SCALE.get(self.env_name, 1.0))

    async def _create(self) -> int:
        body = dict(self.create_options) or None  # AgentGym's BabyAI/SciWorld clients send no body
        return int((await self._request("POST", "/create", body, retry=True))["id"])

    async def reset(self, task_id: str) -> ResetResult:
        data_idx = parse_item_id(task_id, self.env_name)
        if self.env_id is None:
            self.env_id = await self._create()
        self.last = _checked(await self._request("POST", "/reset", {"id": self.env_id, "data_idx": data_idx},
                                                 retry=True), "/reset")  # fmt: skip
        self.item_id = task_id
        observation = self.last["observation"]
        if self.last.get("task_description") is not None:
            observation = f"{self.last['task_description']}\n{observation}"
        info: dict[str, Any] = {"item_id": task_id, "data_idx": data_idx, "env_id": self.env_id}
        await self._server_info()
        if self.system_prompt:
            info["system_prompt"] = self.system_prompt
        return ResetResult(observation, info)

    async def step(self, action: str) -> StepResult:
        if self.env_id is None or self.last is None:
            raise RuntimeError(f"{self.env_name} client: call reset(item_id) before step")
        if self.action_format == "react":
            parsed = react_action(self.env_name, action)
            if parsed is None:  # AgentGym's TextCraft client answers this itself, reward 0, not done
                message = "Error: Only one 'Action' is allowed per response. Please adjust your response."
                return StepResult(message, False, 0.0, {"score": self.last.get("score")})
            action = parsed
        self.last = _checked(
            await self._request("POST", "/step", {"id": self.env_id, "action": action}), "/step"
        )
        return StepResult(self.last["observation"], bool(self.last["done"]), float(self.last["reward"]),
                          {"score": self.last.get("score")})  # fmt: skip

    async def available_actions(self) -> list[str]:
        if self.env_id is None:
            raise RuntimeError(f"{self.env_name} client: call reset(item_id) first")
        return list(await self._request("GET", "/available_actions", params={"id": self.env_id}))

    async def evaluate(self) -> Evaluation:
        """Partial credit = the last `score` / score_scale (SciWorld: its 0-100 score / 100; servers that
        send no `score`, as AgentGym's TextCraft: `reward` / reward_scale), clipped to [0, 1]. Success =
        the server's `success` flag; AgentGym's servers send none: BabyAI: done with a positive score
        (its server ends an episode only on success), else partial credit 1."""
        if self.last is None:
            raise RuntimeError(f"{self.env_name} client: nothing to evaluate before reset")
        await self._server_info()
        reward = float(self.last.get("reward", 0.0))
        score = self.last.get("score")
        scaled = float(score) / (self.score_scale or 1.0) if score is not None else reward / self.reward_scale
        partial = min(max(scaled, 0.0), 1.0)
        fallback = bool(self.last["done"]) and partial > 0 if self.env_name == "babyai" else partial >= 1.0
        success = bool(self.last.get("success", fallback))
        details = {"env_reward": reward, "env_score": score, "item_id": self.item_id}
        return Evaluation(partial, success, details)

    async def close(self) -> None:
        if self.env_id is not None:
            try:
                await self._request("POST", "/close", {"id": self.env_id})
            except EnvironmentFailure:
                pass  # the server is gone or already forgot the instance: nothing left to free
            self.env_id = None
        await self.http.aclose()


def _checked(data: Any, path: str) -> dict[str, Any]:
    if not isinstance(data, dict) or "observation" not in data or "done" not in data:
        raise EnvironmentFailure(f"malformed {path} reply (needs observation and done): {str(data)[:200]!r}")
    data.setdefault("reward", 0.0)
    return data
