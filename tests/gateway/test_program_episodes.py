"""Whole episodes through the gateway: real program processes, the real gem hunt, the tiny model sampling on CPU
(HFTokenGenerator), the real HTTP server. Programs that hang, crash, call a tool that does not exist, send 10,000
calls or never call the model are each a counted, scored episode; the collection finishes within its time limit
and loses nothing."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from loop_agents.envs.bundled.env import BundledTaskSource
from loop_agents.envs.bundled.tools import GEM_HUNT_TOOLS
from loop_agents.gateway.episode import ProgramEpisodes
from loop_agents.gateway.forked_programs import ForkedPrograms
from loop_agents.gateway.program import parse_program
from loop_agents.gateway.render import ConversationRenderer
from loop_agents.inference.hf_generator import HFTokenGenerator
from loop_agents.orchestration.collector import collect_groups
from loop_agents.rollout.config import EpisodeConfig
from loop_agents.rollout.text_agent import TextActionAgent
from loop_agents.rollout.trajectory import FinishReason
from loop_agents.tools.parsers import parser_for

PROGRAMS = ["openai_tool_loop", "hangs", "crashes", "calls_unknown_tool", "floods", "never_calls_the_model"]
# the flooding program makes its 4 model calls (openai imported, the tiny model sampling) within it: at load 12,
# 8 s were not enough
TIMEOUT_S = 15.0


@pytest.fixture(scope="module")
def parts(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    return ConversationRenderer(tokenizer), HFTokenGenerator(tiny_model_dir, max_model_len=2048, seed=0)


def episodes_of(renderer, name: str, forked: bool = False) -> ProgramEpisodes:
    spec = f"tests.gateway.programs:{name}"
    return ProgramEpisodes(
        program=parse_program(spec),
        renderer=renderer,
        parser=parser_for("qwen2_5"),
        tools=tuple(GEM_HUNT_TOOLS),
        timeout_s=TIMEOUT_S,
        forked=ForkedPrograms(spec, ["openai"]) if forked else None,
    )


@pytest.mark.parametrize("forked", [False, True], ids=["spawned", "forked"])
def test_every_misbehaving_program_is_a_counted_scored_episode(parts, forked):
    renderer, generator = parts
    cfg = EpisodeConfig(max_tokens_per_turn=12, max_turns=4, max_context_tokens=2048, seed=0)
    runners = {name: episodes_of(renderer, name, forked) for name in PROGRAMS}
    source = BundledTaskSource()
    task_ids = source.task_ids("dev")[:2]

    async def episode(task_id: str, group_id: str, sample_index: int):
        runner = runners[PROGRAMS[sample_index]]
        env = await source.make_env()
        return await runner.play(
            env,
            generator,
            TextActionAgent(),
            None,
            cfg,
            task_id=task_id,
            group_id=group_id,
            sample_index=sample_index,
        )

    async def collect():
        try:
            return await collect_groups(task_ids, len(PROGRAMS), episode, concurrency=len(PROGRAMS) * 2)
        finally:
            for runner in runners.values():
                await runner.close()

    started = time.monotonic()
    trajectories, stats = asyncio.run(collect())
    elapsed = time.monotonic() - started
    assert stats.failed == 0 and stats.retried == 0 and len(trajectories) == len(task_ids) * len(PROGRAMS)
    assert elapsed < TIMEOUT_S + 30, elapsed  # the hanging programs were stopped at their time limit
    by_program = {}
    for traj in trajectories:
        by_program.setdefault(PROGRAMS[traj.sample_index], []).append(traj)
        assert "reward" not in traj.metadata.get("error", "")
        assert traj.timings.get("evaluate_s") is not None  # scored on the environment's state
    for traj in by_program["hangs"]:
        assert traj.finish_reason == FinishReason.PROGRAM_TIMEOUT
        assert traj.metadata["program"]["seconds"] < TIMEOUT_S + 5
    for traj in by_program["crashes"]:
        assert traj.finish_reason == FinishReason.PROGRAM_ERROR
        assert "RuntimeError: boom" in traj.metadata["error"]
    for traj in by_program["calls_unknown_tool"]:
        assert traj.finish_reason == FinishReason.DONE, traj.metadata
        assert traj.metadata["tool_errors"] == {"unknown_tool": 1} and traj.metadata["env_steps"] == 1
    for traj in by_program["floods"]:
        assert traj.finish_reason == FinishReason.TURN_BUDGET
        assert (
            traj.metadata["program"]["model_calls"] == cfg.max_turns + 1
        )  # the budget, then the refused one
        assert len(traj.turns) == cfg.max_turns
    for traj in by_program["never_calls_the_model"]:
        assert (
            traj.finish_reason == FinishReason.DONE
            and traj.token_ids == []
            and traj.metadata["program"]["model_calls"] == 0
        )
    for traj in by_program["openai_tool_loop"]:
        assert traj.finish_reason in (FinishReason.DONE, FinishReason.TURN_BUDGET), traj.metadata
        assert traj.num_generated_tokens > 0
        for turn in traj.turns:  # loss mask 1 exactly on the sampled spans
            assert all(traj.loss_mask[turn.gen_start : turn.gen_end])
        assert sum(traj.loss_mask) == sum(t.gen_end - t.gen_start for t in traj.turns)


async def _one_episode(runner: ProgramEpisodes, generator, cfg: EpisodeConfig):
    """One gem-hunt episode (gemhunt_10000) played by `runner`'s program; the runner is closed after it."""
    try:
        env = await BundledTaskSource().make_env()
        return await runner.play(env, generator, TextActionAgent(), None, cfg, task_id="gemhunt_10000")
    finally:
        await runner.close()


def test_a_streamed_call_is_recorded_like_any_other(parts):
    renderer, generator = parts
    cfg = EpisodeConfig(max_tokens_per_turn=12, max_turns=4, max_context_tokens=2048, seed=0)
    runner = episodes_of(renderer, "openai_streaming_loop")

    traj = asyncio.run(_one_episode(runner, generator, cfg))
    assert traj.finish_reason == FinishReason.DONE, traj.metadata
    assert (
        len(traj.turns) == 1 and traj.num_generated_tokens == traj.turns[0].gen_end - traj.turns[0].gen_start
    )


def test_a_command_program_plays_from_its_environment(parts):
    """`agent.program` as a command line: the openai tool loop that knows only OPENAI_BASE_URL, OPENAI_API_KEY and
    LOOP_AGENTS_TOOLS_URL (tests/gateway/openai_command.py) plays a recorded, scored episode."""
    renderer, generator = parts
    cfg = EpisodeConfig(max_tokens_per_turn=12, max_turns=4, max_context_tokens=2048, seed=0)
    script = Path(__file__).with_name("openai_command.py")
    runner = ProgramEpisodes(
        program=parse_program(f"{sys.executable} {script}"),
        renderer=renderer,
        parser=parser_for("qwen2_5"),
        tools=tuple(GEM_HUNT_TOOLS),
        timeout_s=60,
    )
    assert runner.program.kind == "command"

    traj = asyncio.run(_one_episode(runner, generator, cfg))
    assert traj.finish_reason in (FinishReason.DONE, FinishReason.TURN_BUDGET), traj.metadata
    assert traj.metadata["program"]["exit_code"] == 0 and traj.metadata["program"]["model_calls"] == len(
        traj.turns
    )
    assert traj.num_generated_tokens > 0 and traj.timings.get("evaluate_s") is not None
    assert sum(traj.loss_mask) == sum(t.gen_end - t.gen_start for t in traj.turns)
