"""One episode played by an agent program through the gateway -> its Trajectory; never raises but on cancel.

    reset the environment; the family's agent writes the opening messages (the task the program is given)
    open a session (a new key) on the worker's gateway server
    run the program until it returns, fails, outlives agent.timeout_s, or the session ends it
        (the environment said done, a call budget or the context budget is spent, inference or the environment
        failed)
    revoke the key; wait for calls still in flight; score the environment (Environment.evaluate)

Endings (Trajectory.finish_reason): the program returned -> done; it raised or exited non-zero -> program_error;
it hung -> program_timeout; budgets -> turn_budget / context_budget. All of them are scored on the environment's
state: a failure the program causes is a counted episode, never a lost one. Only the environment's or the
inference server's failure (env_error, inference_error) is lost and retried, as in the in-process loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from loop_agents.gateway.forked_programs import ForkedPrograms
from loop_agents.gateway.launch import program_environment, run_program
from loop_agents.gateway.program import AgentProgram
from loop_agents.gateway.recorder import EpisodeRecorder
from loop_agents.gateway.render import ConversationRenderer
from loop_agents.gateway.server import GatewayServer
from loop_agents.gateway.session import EpisodeSession
from loop_agents.inference.protocol import TokenGenerator
from loop_agents.rollout.config import EpisodeConfig
from loop_agents.rollout.environment import Environment
from loop_agents.rollout.trajectory import FinishReason, Trajectory
from loop_agents.tools.parsers import ToolCallParser
from loop_agents.tools.spec import ToolSpec

log = logging.getLogger(__name__)
T = TypeVar("T")
LOST = (FinishReason.ENV_ERROR, FinishReason.INFERENCE_ERROR)


async def _bounded(awaitable: Awaitable[T], timeout_s: float | None) -> T:
    return await (awaitable if timeout_s is None else asyncio.wait_for(awaitable, timeout_s))


def _program_ending(
    exit_code: int | None, timed_out: bool, tail: str, timeout_s: float
) -> tuple[FinishReason, str]:
    """How an episode the gateway did not end itself ended, from its program's process."""
    if timed_out:
        return (
            FinishReason.PROGRAM_TIMEOUT,
            f"the program ran past agent.timeout_s={timeout_s} s and was stopped",
        )
    if exit_code:
        last = next((line for line in reversed(tail.strip().splitlines()) if line.strip()), "")
        return FinishReason.PROGRAM_ERROR, f"the program exited with {exit_code}: {last[:300]}"
    return FinishReason.DONE, ""


@dataclass
class ProgramEpisodes:
    """A rollout worker's means to play episodes through the gateway (one server, one renderer)."""

    program: AgentProgram
    renderer: ConversationRenderer
    parser: ToolCallParser
    tools: tuple[ToolSpec, ...]
    timeout_s: float
    forked: ForkedPrograms | None = None  # a callable's episodes forked from its fork server, not spawned
    server: GatewayServer = field(default_factory=GatewayServer)

    async def play(
        self,
        env: Environment,
        generator: TokenGenerator,
        agent: Any,
        chat: Any,
        cfg: EpisodeConfig,
        *,
        task_id: str,
        group_id: str = "",
        sample_index: int = 0,
        evaluate: bool = True,
    ) -> Trajectory:
        """Play `task_id` with the program; the environment is closed on return. The signature is `run_episode`'s
        (rollout/runner.py), so a worker plays either; `chat` is not used (the renderer holds the same tokenizer)."""
        traj = Trajectory(task_id=task_id, group_id=group_id or task_id, sample_index=sample_index)
        started = time.perf_counter()
        try:
            await self._play(traj, env, generator, agent, cfg, evaluate)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # our bug: fail this episode loudly, not the collection
            log.exception("gateway episode %s/%d crashed", task_id, sample_index)
            traj.finish_reason = FinishReason.ENV_ERROR
            traj.metadata["error"] = f"internal error {type(err).__name__}: {err}"
        finally:
            try:
                await asyncio.shield(env.close())
            except asyncio.CancelledError:
                raise
            except Exception as err:  # a failed close must not lose a finished episode
                log.warning("closing the environment of %s failed: %s", task_id, err)
            traj.metadata["num_turns"] = len(traj.turns)
            traj.timings["total_s"] = time.perf_counter() - started
        traj.validate()
        return traj

    async def _play(self, traj, env, generator, agent, cfg: EpisodeConfig, evaluate: bool) -> None:
        try:
            reset = await _bounded(env.reset(traj.task_id), cfg.env_reset_timeout_s)
        except Exception as err:  # EnvironmentFailure, a timeout, a raw error: the environment's failure
            traj.finish_reason, traj.metadata["error"] = FinishReason.ENV_ERROR, f"reset failed: {err!r}"
            return
        messages = agent.initial_messages(reset)
        prompt = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        task = {
            "task_id": traj.task_id,
            "sample_index": traj.sample_index,
            "messages": messages,
            "prompt": prompt,
        }
        traj.messages = [dict(m) for m in messages]
        session = EpisodeSession(
            task,
            EpisodeRecorder(traj),
            generator,
            self.renderer,
            self.parser,
            env,
            reset,
            agent,
            self.tools,
            cfg,
        )
        root = await self.server.start()
        self.server.open(session)
        program_env = program_environment(
            {
                "OPENAI_BASE_URL": f"{root}/v1",
                "OPENAI_API_KEY": session.key,
                "LOOP_AGENTS_TOOLS_URL": f"{root}/tools",
                "LOOP_AGENTS_MCP_URL": f"{root}/mcp",
                "LOOP_AGENTS_TASK_ID": traj.task_id,
            }
        )
        try:
            if self.forked is not None:
                outcome = await self.forked.run(program_env, self.timeout_s, session.ended_event)
            else:
                outcome = await run_program(
                    self.program.argv, program_env, self.timeout_s, session.ended_event
                )
        finally:
            self.server.close(session)
            async with (
                session.model_lock,
                session.env_lock,
            ):  # calls in flight finish before the record is read
                ended, error = session.ended, session.end_error
                session.end(FinishReason.CANCELLED, "the episode was closed")  # nothing else may land
        if ended is not None:
            reason = ended
        else:
            reason, error = _program_ending(
                outcome.exit_code, outcome.timed_out, outcome.output_tail, self.timeout_s
            )
        traj.finish_reason = reason
        if error:
            traj.metadata["error"] = error
        traj.metadata["program"] = {
            "exit_code": outcome.exit_code,
            "seconds": round(outcome.seconds, 3),
            "model_calls": session.model_calls,
            "tool_calls": session.tool_calls,
            "segments": session.recorder.segments,
        }
        if evaluate and reason not in LOST:
            t0 = time.perf_counter()
            try:
                result = await _bounded(env.evaluate(), cfg.env_timeout_s)
            except Exception as err:
                traj.finish_reason, traj.metadata["error"] = (
                    FinishReason.ENV_ERROR,
                    f"evaluate failed: {err!r}",
                )
                return
            traj.reward, traj.success = float(result.reward), bool(result.success)
            traj.reward_details.update(result.details)
            traj.timings["evaluate_s"] = time.perf_counter() - t0

    async def close(self) -> None:
        await self.server.stop()
        if self.forked is not None:
            await self.forked.close()
