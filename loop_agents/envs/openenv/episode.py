"""One OpenEnv episode: a WebSocket session of its own (OpenEnv's `GenericEnvClient`), stepped by text actions or
by tool calls, its observations rendered for the agent and its rewards kept for the score (client.py has the task
source that opens these, and the failure rules they follow)."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Protocol

from openenv.core.generic_client import GenericEnvClient

from loop_agents.envs.openenv.session import OpenEnvSession, ServerReply, capacity_text, rejection_text
from loop_agents.envs.openenv.settings import OpenEnvSettings
from loop_agents.envs.openenv.tool_calls import call_of_action, reply_text
from loop_agents.rollout.environment import EnvironmentFailure, Evaluation, ResetResult, StepResult
from loop_agents.tools.spec import ToolSpec


class EpisodeSource(Protocol):
    """What an episode takes from the task source that opened it (client.py's `OpenEnvTaskSource`)."""

    settings: OpenEnvSettings
    tool_calls: bool
    finish_supported: bool | None

    def reset_kwargs(self, task_id: str) -> dict[str, Any]: ...

    def tools(self) -> list[ToolSpec]: ...


class OpenEnvEpisode:
    """One episode = one OpenEnv session (the `Environment` protocol of rollout/environment.py)."""

    def __init__(self, source: EpisodeSource, url: str) -> None:
        self.source, self.settings, self.url = source, source.settings, url
        self.client: GenericEnvClient | None = None
        self.rewards: list[float] = []
        self.done = False
        self.last: dict[str, Any] = {}
        self.rejected = 0  # actions the server's schema rejected (shown to the agent)
        self.tool_errors = 0  # tool calls the server answered with an error (shown to the agent)

    async def _call(self, awaitable, what: str):
        try:
            return await awaitable
        except asyncio.CancelledError:
            raise
        except ServerReply as reply:
            if reply.code == "VALIDATION_ERROR" and what == "step":
                raise
            if reply.code == "CAPACITY_REACHED":
                raise EnvironmentFailure(capacity_text(self.url, reply)) from None
            raise EnvironmentFailure(f"OpenEnv server {self.url}: {what} failed: {reply}") from None
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
        field = self.settings.observation_field if not self.source.tool_calls else ""
        if field and not isinstance(observation.get(field), str):
            raise EnvironmentFailure(f"OpenEnv server {self.url}: the {what} observation has no text field {field!r} "
                                     f"(env.options.observation_field); its fields: {', '.join(observation)}")  # fmt: skip
        if result.reward is not None and not isinstance(result.reward, int | float):
            raise EnvironmentFailure(f"OpenEnv server {self.url}: the {what} reward is {result.reward!r}; "
                                     "expected a number or null")  # fmt: skip
        return observation

    def render(self, observation: dict[str, Any]) -> str:
        """The text the agent reads: the configured field, else the one string field, else the observation as JSON."""
        if self.settings.observation_field and not self.source.tool_calls:
            return observation[self.settings.observation_field]
        strings = [k for k, v in observation.items() if isinstance(v, str) and k != "task_id"]
        if len(strings) == 1:
            return observation[strings[0]]
        shown = {k: v for k, v in observation.items() if k != self.settings.info_field}
        return json.dumps(shown, sort_keys=True, default=str)

    async def reset(self, task_id: str) -> ResetResult:
        await self.close()
        self.rewards, self.done, self.rejected, self.tool_errors = [], False, 0, 0
        s = self.settings
        self.client = OpenEnvSession(
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
        if self.source.tool_calls:
            return await self._tool_step(action)
        payload = {**s.action_extra, s.action_field: s.action_template.format(action=action)}
        try:
            result = await self._call(self.client.step(payload), "step")
        except ServerReply as reply:  # raised by _call only for a rejected action: the agent's to read
            self.rejected += 1
            return StepResult(rejection_text(reply), False, 0.0, {"rejected": True})
        observation = self._observation(result, "step")
        return self._record(result, observation)

    async def _tool_step(self, action: str) -> StepResult:
        """One tool call (an action written by tool_calls.encode_call) as OpenEnv's `call_tool` step."""
        call = call_of_action(action, self.source.tools())
        if call is None:  # not from the tool-calling agent: shown, never sent
            self.tool_errors += 1
            return StepResult(
                "Error (malformed_call): call one of the tools.", False, 0.0, {"tool_error": True}
            )
        name, arguments = call
        payload = {"type": "call_tool", "tool_name": name, "arguments": arguments}
        try:
            result = await self._call(self.client.step(payload), "step")
        except ServerReply as reply:  # the server's schema rejected the call: the agent's to read
            self.rejected += 1
            return StepResult(rejection_text(reply), False, 0.0, {"rejected": True})
        observation = self._observation(result, "step")
        text, failed = reply_text(observation)
        self.tool_errors += failed
        step = self._record(result, observation)
        return StepResult(text, step.done, step.reward, {"tool_error": True} if failed else {})

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
        details = {
            **details,
            "done": self.done,
            **({"rejected_actions": self.rejected} if self.rejected else {}),
            **({"tool_errors": self.tool_errors} if self.source.tool_calls else {}),
        }
        return Evaluation(reward=float(score), success=bool(success), details=details)

    async def close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            await client.close()
