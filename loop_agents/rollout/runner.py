"""Play one episode and return its token-exact Trajectory; failures become finish reasons.

Per turn (docs/reference-ml-loop.md §3.2-3.5, with the fixes of §8):
    prompt = all ids so far + generation prompt            (sent as ids; nothing is re-rendered)
    sampled ids + logprobs appended as sampled             (loss mask 1, stop token included)
    close: `<|im_end|>` unless sampled, then `\\n`          (loss mask 0; never a synthetic trained stop)
    action = agent.parse_action(decoded text)               (no action -> agent feedback, no env call; a
                                                            malformed tool call is counted per kind in
                                                            metadata["tool_errors"])
    observation = env.step(action), cut to a token budget, rendered in the template's turn format
Budgets: `max_tokens` of each request is reduced so that the episode never exceeds
`max_context_tokens` (the learner's max_seq_len, so every collected token is trainable); a turn with
less than `min_tokens_per_turn` of room, or an observation that does not fit, ends the episode with
CONTEXT_BUDGET. The last observation (after done, or at a budget) is kept as text in the Turn but not
appended as ids: nothing after the last sampled token is needed for training.
Failures: an environment error (EnvironmentFailure, a timeout or any exception from the env) ends the
episode with ENV_ERROR; generation is retried `inference_retries` times, then INFERENCE_ERROR. The
caller never sees an exception except asyncio.CancelledError (the env is closed first); even a bug
in this package fails only its episode (ENV_ERROR, logged with its traceback).
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import Awaitable
from typing import Any, TypeVar

from loop_agents.inference.protocol import Completion, InferenceFailure, SamplingParams, TokenGenerator
from loop_agents.rollout.agent import Agent
from loop_agents.rollout.chat import ChatFormat
from loop_agents.rollout.config import EpisodeConfig
from loop_agents.rollout.environment import Environment, EnvironmentFailure, ResetResult
from loop_agents.rollout.observation import truncate_observation
from loop_agents.rollout.trajectory import FinishReason, Trajectory, Turn

log = logging.getLogger(__name__)
T = TypeVar("T")


def chat_format(tokenizer: Any, cfg: EpisodeConfig) -> ChatFormat:
    """The turn builder for `tokenizer` with the template options of `cfg` (build once per worker)."""
    return ChatFormat(
        tokenizer,
        turn_end_token=cfg.turn_end_token,
        observation_role=cfg.observation_role,
        enable_thinking=cfg.enable_thinking,
        tools=cfg.tools,
    )


class _EpisodeEnd(Exception):
    def __init__(self, reason: FinishReason, error: str = "") -> None:
        super().__init__(error or reason.value)
        self.reason = reason
        self.error = error


async def _env_call(awaitable: Awaitable[T], timeout_s: float | None, what: str) -> T:
    try:
        if timeout_s is None:
            return await awaitable
        return await asyncio.wait_for(awaitable, timeout_s)
    except asyncio.CancelledError:
        raise
    except TimeoutError as err:
        raise _EpisodeEnd(FinishReason.ENV_ERROR, f"{what} timed out after {timeout_s} s") from err
    except EnvironmentFailure as err:
        raise _EpisodeEnd(FinishReason.ENV_ERROR, f"{what} failed: {err}") from err
    except Exception as err:  # an env implementation that leaked a raw error is still an env failure
        raise _EpisodeEnd(FinishReason.ENV_ERROR, f"{what} raised {type(err).__name__}: {err}") from err


def _check_completion(completion: Completion, params: SamplingParams) -> None:
    n = len(completion.token_ids)
    if n == 0 or n > params.max_tokens or len(completion.logprobs) != n:
        raise InferenceFailure(
            f"malformed completion: {n} ids, {len(completion.logprobs)} logprobs, max_tokens={params.max_tokens}"
        )


async def _generate(
    generator: TokenGenerator, prompt_ids: list[int], params: SamplingParams, cfg: EpisodeConfig
):
    errors: list[str] = []
    for attempt in range(cfg.inference_retries + 1):
        if attempt:
            await asyncio.sleep(cfg.inference_retry_backoff_s * 2 ** (attempt - 1))
        try:
            request = generator.generate(prompt_ids, params)
            if cfg.generation_timeout_s is None:
                completion = await request
            else:
                completion = await asyncio.wait_for(request, cfg.generation_timeout_s)
            _check_completion(completion, params)
            return completion, attempt
        except asyncio.CancelledError:
            raise
        except (InferenceFailure, TimeoutError) as err:
            errors.append(f"{type(err).__name__}: {err}")
        except Exception as err:  # a bad request (our bug or a server rejecting it): retrying will not help
            raise _EpisodeEnd(FinishReason.INFERENCE_ERROR, f"{type(err).__name__}: {err}") from err
    raise _EpisodeEnd(FinishReason.INFERENCE_ERROR, f"{len(errors)} attempts failed; last: {errors[-1]}")


def _request_seed(cfg: EpisodeConfig, task_id: str, sample_index: int, turn: int) -> int | None:
    if cfg.seed is None:
        return None
    return (
        cfg.seed * 1_000_003 + zlib.crc32(task_id.encode()) * 7_919 + sample_index * 104_729 + turn
    ) % 2**31


class _Episode:
    """State of one running episode (kept off the public API)."""

    def __init__(self, env, generator, agent, chat, cfg, traj: Trajectory) -> None:
        self.env: Environment = env
        self.generator: TokenGenerator = generator
        self.agent: Agent = agent
        self.chat: ChatFormat = chat
        self.cfg: EpisodeConfig = cfg
        cfg.validate()
        if chat.observation_role != cfg.observation_role:
            raise ValueError(
                f"the ChatFormat renders observations as {chat.observation_role!r} but the config says "
                f"{cfg.observation_role!r}; build it with chat_format(tokenizer, cfg)"
            )
        self.traj = traj
        self.stop_ids = chat.stop_token_ids(cfg.stop_tokens)
        # room kept for the ids that close a cut turn (`<|im_end|>` + `\n`)
        self.close_reserve = 1 + len(chat.after_turn_end_ids)
        self.reset: ResetResult | None = None
        self.timing = {"reset_s": 0.0, "generate_s": 0.0, "env_s": 0.0, "build_s": 0.0, "evaluate_s": 0.0}

    def fits_another_turn(self, extra: int) -> bool:
        need = len(self.chat.generation_prompt_ids) + self.cfg.min_tokens_per_turn + self.close_reserve
        return self.traj.num_tokens + extra + need <= self.cfg.max_context_tokens

    async def play(self, task_id: str) -> FinishReason:
        traj, cfg, chat = self.traj, self.cfg, self.chat
        t0 = time.perf_counter()
        self.reset = await _env_call(self.env.reset(task_id), cfg.env_reset_timeout_s, "reset")
        self.timing["reset_s"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        try:
            messages = self.agent.initial_messages(self.reset)
        except (KeyError, TypeError, ValueError) as err:  # the task's facts cannot fill the prompt
            raise _EpisodeEnd(FinishReason.ENV_ERROR, f"reset info unusable for the prompt: {err}") from err
        initial_ids = chat.initial_ids(messages)
        traj.messages = [dict(m) for m in messages]
        self.timing["build_s"] += time.perf_counter() - t0
        if not self.fits_another_turn(len(initial_ids)):
            traj.metadata["error"] = (
                f"the initial prompt ({len(initial_ids)} tokens) leaves no room for a turn"
            )
            return FinishReason.CONTEXT_BUDGET
        traj.append_context(initial_ids)

        for turn_index in range(cfg.max_turns):
            turn = await self.play_turn(turn_index)
            if turn.done:
                return FinishReason.DONE
            if turn_index + 1 == cfg.max_turns:
                return FinishReason.TURN_BUDGET
            t0 = time.perf_counter()
            fits = self.append_observation(turn.record, turn.observation)
            self.timing["build_s"] += time.perf_counter() - t0
            if not fits:
                return FinishReason.CONTEXT_BUDGET
        raise AssertionError("unreachable: the loop returns at the turn budget")

    async def play_turn(self, turn_index: int) -> _TurnOutcome:
        traj, cfg, chat = self.traj, self.cfg, self.chat
        traj.append_context(chat.generation_prompt_ids)
        room = cfg.max_context_tokens - traj.num_tokens - self.close_reserve
        params = SamplingParams(
            max_tokens=min(cfg.max_tokens_per_turn, room),
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            top_k=cfg.top_k,
            stop_token_ids=list(self.stop_ids),
            seed=_request_seed(cfg, traj.task_id, traj.sample_index, turn_index),
        )
        t0 = time.perf_counter()
        try:
            completion, retries = await _generate(self.generator, traj.token_ids, params, cfg)
        finally:
            generate_s = time.perf_counter() - t0
            self.timing["generate_s"] += generate_s
        traj.metadata["inference_retries"] = traj.metadata.get("inference_retries", 0) + retries
        if completion.adapter is not None:
            traj.metadata["adapter"] = completion.adapter

        t0 = time.perf_counter()
        start, end = traj.append_generation(completion.token_ids, completion.logprobs)
        traj.append_context(chat.close_turn_ids(completion.token_ids))
        text = chat.decode(completion.token_ids)
        traj.messages.append({"role": "assistant", "content": text})
        parsed = self.agent.parse_action(text)
        self.timing["build_s"] += time.perf_counter() - t0
        record = Turn(
            gen_start=start,
            gen_end=end,
            action_text=parsed.action or "",
            finish_reason=completion.finish_reason,
            action_error=None if parsed.action is not None else parsed.feedback,
            generate_s=generate_s,
            adapter=completion.adapter,
        )
        traj.turns.append(record)
        if parsed.action is None:
            traj.metadata["n_no_action"] = traj.metadata.get("n_no_action", 0) + 1
            if parsed.error_kind:  # a malformed tool call: counted per kind (tools/error/<kind>)
                errors = traj.metadata.setdefault("tool_errors", {})
                errors[parsed.error_kind] = errors.get(parsed.error_kind, 0) + 1
            record.observation_text = parsed.feedback
            return _TurnOutcome(record, parsed.feedback, done=False)

        t0 = time.perf_counter()
        try:
            step = await _env_call(self.env.step(parsed.action), cfg.env_timeout_s, "step")
        finally:
            record.env_s = time.perf_counter() - t0
            self.timing["env_s"] += record.env_s
        record.observation_text = step.observation
        if step.reward is not None:
            traj.reward_details.setdefault("step_rewards", []).append(step.reward)
        return _TurnOutcome(record, step.observation, done=step.done)

    def append_observation(self, record: Turn, observation: str) -> bool:
        """Cut, render and append an observation; False when it and a next turn do not fit."""
        assert self.reset is not None
        text, record.observation_truncated = truncate_observation(
            observation, self.chat.tokenizer, self.cfg.observation_max_tokens
        )
        content = self.agent.format_observation(text, self.reset)
        ids = self.chat.observation_ids(content)
        if not self.fits_another_turn(len(ids)):
            return False
        record.observation_start = self.traj.num_tokens
        self.traj.append_context(ids)
        record.observation_end = self.traj.num_tokens
        self.traj.messages.append({"role": self.chat.observation_role, "content": content})
        return True


class _TurnOutcome:
    __slots__ = ("record", "observation", "done")

    def __init__(self, record: Turn, observation: str, done: bool) -> None:
        self.record = record
        self.observation = observation
        self.done = done


async def run_episode(
    env: Environment,
    generator: TokenGenerator,
    agent: Agent,
    chat: ChatFormat,
    cfg: EpisodeConfig,
    *,
    task_id: str,
    group_id: str = "",
    sample_index: int = 0,
    evaluate: bool = True,
    close: bool = True,
) -> Trajectory:
    """Play `task_id` in `env` and return the trajectory; never raises except on task cancellation.

    `chat` is the turn builder of the policy's tokenizer (build it once per worker: ChatFormat(tok, ...)).
    The reward comes from `env.evaluate()` after a DONE, TURN_BUDGET or CONTEXT_BUDGET ending; failed
    episodes keep reward 0 and are meant to be retried or dropped by the caller (orchestration/collector).
    """
    traj = Trajectory(task_id=task_id, group_id=group_id or task_id, sample_index=sample_index)
    episode = _Episode(env, generator, agent, chat, cfg, traj)
    started = time.perf_counter()
    try:
        try:
            traj.finish_reason = await episode.play(task_id)
        except _EpisodeEnd as end:
            traj.finish_reason = end.reason
            traj.metadata["error"] = end.error
            log.warning("episode %s/%d ended: %s", task_id, sample_index, end.error)
        except Exception as err:  # a bug must not kill the whole collection: fail this episode loudly
            log.exception("episode %s/%d crashed", task_id, sample_index)
            traj.finish_reason = FinishReason.ENV_ERROR
            traj.metadata["error"] = f"internal error {type(err).__name__}: {err}"
        if evaluate and traj.finish_reason in (
            FinishReason.DONE,
            FinishReason.TURN_BUDGET,
            FinishReason.CONTEXT_BUDGET,
        ):
            t0 = time.perf_counter()
            try:
                result = await _env_call(env.evaluate(), cfg.env_timeout_s, "evaluate")
                traj.reward, traj.success = float(result.reward), bool(result.success)
                traj.reward_details.update(result.details)
            except _EpisodeEnd as end:
                traj.finish_reason = end.reason
                traj.metadata["error"] = end.error
            episode.timing["evaluate_s"] = time.perf_counter() - t0
    finally:
        if close:
            await _close_quietly(env, traj)
        traj.metadata["num_turns"] = len(traj.turns)
        traj.timings.update(episode.timing)
        traj.timings["total_s"] = time.perf_counter() - started
    traj.validate()
    return traj


async def _close_quietly(env: Environment, traj: Trajectory) -> None:
    try:
        await asyncio.shield(env.close())
    except asyncio.CancelledError:
        raise
    except Exception as err:  # a failed close must not lose a finished episode
        traj.metadata["close_error"] = f"{type(err).__name__}: {err}"
