"""The AgentGym task source restarts its own env server after the server process is SIGKILLed.

Real processes: our gem hunt env server, killed with `kill -9` on its pid mid-episode. The episode fails with
EnvironmentFailure (the collector would retry it); the retry's `make_env()` finds the server dead, starts it again
on the same port, and the episode is played to the gem on the new server.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from loop_agents.envs.agentgym import AgentGymEnvConfig, AgentGymTaskSource
from loop_agents.envs.bundled import GemHuntGame, generate_task
from loop_agents.rollout.environment import EnvironmentFailure

pytestmark = pytest.mark.slow


async def _play_optimally(source: AgentGymTaskSource, item: int) -> float:
    env = await source.make_env()
    try:
        await env.reset(f"gemhunt_{item}")
        solver = GemHuntGame(generate_task(item))
        while not solver.done:
            action = solver.optimal_action()
            solver.step(action)
            await env.step(action)
        return (await env.evaluate()).reward
    finally:
        await env.close()


def test_killed_env_server_is_restarted_by_the_next_episode(capfd):
    source = AgentGymTaskSource(AgentGymEnvConfig(env="gemhunt", request_timeout_s=5, retries=1))
    try:
        first_pid, url = source.server.process.pid, source.url

        async def run() -> None:
            env = await source.make_env()
            await env.reset("gemhunt_10010")
            os.kill(first_pid, signal.SIGKILL)  # the server process itself, as an OOM kill would
            source.server.process.wait(10)
            with pytest.raises(EnvironmentFailure, match="not reachable"):
                await env.step("open red box")
            await env.close()
            # the collector's retries: several episodes find the server dead at once; one restart serves all
            rewards = await asyncio.gather(*(_play_optimally(source, item) for item in (10010, 10011, 10012)))
            assert rewards == [1.0, 1.0, 1.0]

        asyncio.run(run())
        time.sleep(
            2
        )  # the restarted server must outlive the event loop's worker threads (parent-death signal)
        assert source.restarts == 1
        assert source.server.alive() and source.server.process.pid != first_pid and source.url == url
        assert f"gemhunt env server {url} died (exit code -9); starting it again" in capfd.readouterr().err
    finally:
        source.close()
    assert not source.server.alive()
