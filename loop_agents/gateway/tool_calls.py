"""One tool call of the program -> the environment's step, or an error result the program gets back.

The program reaches the environment only here, and only through the family's declared tools: the name is looked
up, the arguments are checked against the tool's schema, `ToolSpec.to_action` makes the text action and
`Environment.step` runs it. A call the tools refuse (unknown tool, missing or unexpected argument, wrong type) is an
error *result*, `Error (<kind>): ...` as `agent=tools` shows the model, counted under `tools/error/<kind>`; the
episode goes on. An environment that fails ends the episode as ENV_ERROR (the environment's failure, not the
program's: the episode is retried as any lost one). The environment saying done ends the episode after the result
is returned, as in the in-process loop.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from loop_agents.gateway.messages import RequestError
from loop_agents.gateway.session import EpisodeSession
from loop_agents.rollout.observation import truncate_observation
from loop_agents.rollout.trajectory import FinishReason
from loop_agents.tools.dispatch import validated_action
from loop_agents.tools.errors import ToolCallError, ToolErrorKind
from loop_agents.tools.parsers import ToolCall


def tool_schemas(session: EpisodeSession) -> list[dict[str, Any]]:
    """The episode's tools in the OpenAI form (`GET /tools`)."""
    return [tool.openai_schema() for tool in session.tools]


def _action(session: EpisodeSession, name: str, arguments: Any) -> str:
    if not isinstance(arguments, dict):
        raise ToolCallError(
            ToolErrorKind.MALFORMED_CALL, "the arguments of a tool call must be a JSON object."
        )
    try:
        return validated_action(ToolCall(name, arguments), session.tools)
    except ToolCallError:
        raise
    except Exception as err:  # a to_action that cannot take values its schema allows
        raise ToolCallError(
            ToolErrorKind.WRONG_TYPE, f"{name}: the arguments were refused ({err})."
        ) from None


async def call_tool(session: EpisodeSession, name: str, arguments: Any) -> dict[str, Any]:
    """`{"content", "is_error", "done"}` of one call (RequestError when the episode is over or out of budget)."""
    async with session.env_lock:
        session.check_open()
        session.tool_calls += 1
        if session.tool_calls > session.call_budget:
            session.end(FinishReason.TURN_BUDGET, f"more than {session.call_budget} tool calls")
            raise RequestError(
                429, f"the episode's budget of {session.call_budget} tool calls is spent", "call_budget"
            )
        try:
            action = _action(session, name, arguments)
        except ToolCallError as err:
            session.count("tool_errors", err.kind.value)
            return {"content": err.feedback(), "is_error": True, "done": False}
        traj, cfg = session.recorder.trajectory, session.cfg
        started = time.perf_counter()
        try:
            step = session.env.step(action)
            step = await (step if cfg.env_timeout_s is None else asyncio.wait_for(step, cfg.env_timeout_s))
        except asyncio.CancelledError:
            raise
        except Exception as err:  # EnvironmentFailure, a timeout, or a raw error an environment leaked
            reason = "timed out" if isinstance(err, TimeoutError) else f"failed: {type(err).__name__}: {err}"
            session.end(FinishReason.ENV_ERROR, f"step {reason}")
            raise RequestError(
                502, "the environment failed; the episode is over", "environment_error"
            ) from None
        finally:
            traj.timings["env_s"] = traj.timings.get("env_s", 0.0) + time.perf_counter() - started
        traj.metadata["env_steps"] = traj.metadata.get("env_steps", 0) + 1
        if step.reward is not None:
            traj.reward_details.setdefault("step_rewards", []).append(step.reward)
        text, _ = truncate_observation(
            step.observation, session.renderer.chat.tokenizer, cfg.observation_max_tokens
        )
        content = session.agent.format_observation(text, session.reset)
        if step.done:
            session.end(FinishReason.DONE)
        return {"content": content, "is_error": False, "done": bool(step.done)}
