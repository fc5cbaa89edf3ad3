"""Callable programs forked from their fork server (loop_agents/gateway/fork_server.py) rather than spawned: each
episode still a process of its own with the episode's environment and none of the run's secrets, its whole group
stopped with it, and a dead server the gateway's failure (lost and retried, its episodes' processes gone), started
again for the next episode. The real gem hunt, the tiny model sampling on CPU (HFTokenGenerator), the real gateway
server."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest

from loop_agents.envs.bundled.env import BundledTaskSource
from loop_agents.gateway.forked_programs import ForkedPrograms, ForkServerError
from loop_agents.rollout.config import EpisodeConfig
from loop_agents.rollout.text_agent import TextActionAgent
from loop_agents.rollout.trajectory import FinishReason
from tests.gateway.test_program_episodes import _one_episode, episodes_of, parts  # noqa: F401

CFG = EpisodeConfig(max_tokens_per_turn=12, max_turns=4, max_context_tokens=2048, seed=0)


def _alive(pid: int) -> bool:
    """Running (not gone, not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(") ", 1)[1][0] != "Z"


def _pids(path: Path, timeout_s: float = 30) -> tuple[int, int]:
    deadline = time.monotonic() + timeout_s
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline, "the program never wrote its pids"
        time.sleep(0.05)
    leader, grandchild = map(int, path.read_text().split())
    return leader, grandchild


def test_the_forked_episode_has_its_environment_and_no_secret(parts, monkeypatch):  # noqa: F811
    monkeypatch.setenv("VLLM_API_KEY", "sk-not-for-programs")
    monkeypatch.setenv("WANDB_API_KEY", "wandb-not-for-programs")
    renderer, generator = parts
    traj = asyncio.run(
        _one_episode(episodes_of(renderer, "shows_its_environment", forked=True), generator, CFG)
    )
    assert traj.finish_reason == FinishReason.PROGRAM_ERROR and traj.metadata["program"]["exit_code"] == 1
    seen = json.loads(traj.metadata["error"].split(": ", 1)[1])
    assert seen["LOOP_AGENTS_TASK_ID"] == "gemhunt_10000" and len(seen["OPENAI_API_KEY"]) > 20
    assert seen["VLLM_API_KEY"] is None and seen["WANDB_API_KEY"] is None
    assert seen["openai_imported"]  # preloaded by the server, not imported per episode
    assert traj.timings.get("evaluate_s") is not None  # scored


def test_a_hung_program_is_stopped_with_its_whole_group(parts, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("GRANDCHILD_PID_FILE", str(tmp_path / "pids"))
    renderer, generator = parts
    runner = episodes_of(renderer, "leaves_a_grandchild", forked=True)
    runner.timeout_s = 3.0
    started = time.monotonic()
    traj = asyncio.run(_one_episode(runner, generator, CFG))
    assert traj.finish_reason == FinishReason.PROGRAM_TIMEOUT and time.monotonic() - started < 30
    leader, grandchild = _pids(tmp_path / "pids")
    assert not _alive(leader) and not _alive(grandchild)


def test_a_dead_fork_server_loses_its_episodes_and_starts_again(parts, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("GRANDCHILD_PID_FILE", str(tmp_path / "pids"))
    renderer, generator = parts
    runner = episodes_of(renderer, "leaves_a_grandchild", forked=True)

    async def kill_the_server_during_an_episode():
        env = await BundledTaskSource().make_env()
        agent = TextActionAgent()
        episode = asyncio.ensure_future(
            runner.play(env, generator, agent, None, CFG, task_id="gemhunt_10000")
        )
        pids = await asyncio.to_thread(_pids, tmp_path / "pids")
        os.kill(runner.forked._process.pid, signal.SIGKILL)
        lost = await episode
        (tmp_path / "pids").unlink()
        again = asyncio.ensure_future(
            runner.play(
                await BundledTaskSource().make_env(), generator, agent, None, CFG, task_id="gemhunt_10001"
            )
        )
        await asyncio.to_thread(_pids, tmp_path / "pids")  # the next episode's program runs: a new server
        again.cancel()
        await asyncio.gather(again, return_exceptions=True)
        await runner.close()
        return pids, lost

    (leader, grandchild), lost = asyncio.run(kill_the_server_during_an_episode())
    assert lost.finish_reason == FinishReason.ENV_ERROR, lost.metadata  # the gateway's failure: lost, retried
    assert "fork server" in lost.metadata["error"]
    time.sleep(0.5)
    assert not _alive(leader) and not _alive(grandchild)


def test_a_program_that_does_not_import_is_one_error():
    async def start():
        forked = ForkedPrograms("tests.gateway.no_such_module:f")
        try:
            await forked.run({}, 5, asyncio.Event())
        finally:
            await forked.close()

    with pytest.raises(ForkServerError, match="no_such_module"):
        asyncio.run(start())
