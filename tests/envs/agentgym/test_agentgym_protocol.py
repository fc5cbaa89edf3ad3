"""The AgentGym env-server protocol against our real server (gem hunt game): raw HTTP conformance,
the async EnvClient, failure handling (server killed mid-episode) and clear errors for bad input."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import httpx
import pytest

from loop_agents.envs.agentgym import (
    AgentGymEnvClient,
    AgentGymEnvConfig,
    AgentGymRequestError,
    AgentGymTaskSource,
    EnvServerProcess,
)
from loop_agents.envs.agentgym.games import game_factory
from loop_agents.envs.bundled import GemHuntGame, generate_task
from loop_agents.ports import free_port
from loop_agents.rollout.environment import EnvironmentFailure


@pytest.mark.slow  # a gem hunt env server
def test_raw_protocol(gemhunt_server):
    url = gemhunt_server.url
    env_id = httpx.post(f"{url}/create").json()["id"]
    first = httpx.post(f"{url}/reset", json={"id": env_id, "data_idx": 10_000}).json()
    assert set(first) >= {"observation", "reward", "score", "done"} and first["done"] is False
    assert httpx.get(f"{url}/observation", params={"id": env_id}).json() == first["observation"]
    other = httpx.post(f"{url}/reset", json={"id": env_id, "data_idx": 10_001}).json()
    assert other["observation"] != first["observation"]
    actions = httpx.get(f"{url}/available_actions", params={"id": env_id}).json()
    assert actions[-1] == "answer <code>" and len(actions) == 7
    step = httpx.post(f"{url}/step", json={"id": env_id, "action": "fly away"}).json()
    assert step["observation"].startswith("Unknown action.") and step["done"] is False  # error observation
    assert httpx.post(f"{url}/close", json={"id": env_id}).json() == {"closed": True}
    gone = httpx.post(f"{url}/step", json={"id": env_id, "action": "open red box"})
    assert gone.status_code == 404 and "does not exist" in gone.json()["error"]
    bad = httpx.post(
        f"{url}/reset", json={"id": httpx.post(f"{url}/create").json()["id"], "data_idx": 123_456}
    )
    assert bad.status_code == 400 and "outside every split" in bad.json()["error"]


@pytest.mark.slow  # a gem hunt env server
def test_client_plays_optimal_and_bad_episodes(gemhunt_server):
    async def run() -> None:
        env = AgentGymEnvClient(gemhunt_server.url, "gemhunt", request_timeout_s=10)
        for item in (10_002, 10_003):  # two item ids on one client: reset reuses the server instance
            reset = await env.reset(f"gemhunt_{item}")
            assert reset.info["system_prompt"].startswith("Find the gem")
            solver = GemHuntGame(generate_task(item))
            step = None
            while not solver.done:
                action = solver.optimal_action()
                solver.step(action)
                step = await env.step(action)
            assert step.done and (await env.evaluate()).reward == 1.0 and (await env.evaluate()).success
        await env.reset("gemhunt_10004")
        while not (await env.step("answer 1 1")).done:
            pass
        evaluation = await env.evaluate()
        assert evaluation.reward == 0.0 and not evaluation.success
        with pytest.raises(AgentGymRequestError, match="finished"):
            await env.step("open red box")
        with pytest.raises(ValueError, match="for env 'babyai'"):
            await env.reset("babyai_3")
        with pytest.raises(ValueError, match="malformed item id"):
            await env.reset("gemhunt")
        await env.close()

    asyncio.run(run())


@pytest.mark.slow  # a gem hunt env server
def test_server_killed_mid_episode_then_env_recreated():
    server = EnvServerProcess("gemhunt", port=free_port())
    server.start()

    async def run() -> None:
        env = AgentGymEnvClient(server.url, "gemhunt", request_timeout_s=3, retries=3, retry_backoff_s=0.5)
        await env.reset("gemhunt_10010")
        await env.step("open red box")
        server.kill()
        t0 = time.monotonic()
        with pytest.raises(EnvironmentFailure, match="not reachable"):
            await env.step("open blue key")
        assert time.monotonic() - t0 < 3
        assert env.env_id is None  # the server-side instance is dropped
        server.start()  # same port: a restarted server
        reset = await env.reset("gemhunt_10010")  # recreates the instance on the new server
        assert reset.observation.startswith("Room:") and env.env_id == 0
        await env.close()

    try:
        asyncio.run(run())
    finally:
        server.stop()


def test_unreachable_server_and_unknown_env_are_named():
    async def run() -> None:
        env = AgentGymEnvClient(f"http://127.0.0.1:{free_port()}", "babyai", request_timeout_s=2, retries=1,
                                retry_backoff_s=0.1)  # fmt: skip
        with pytest.raises(EnvironmentFailure, match="babyai env server .* not reachable"):
            await env.reset("babyai_0")
        await env.close()

    asyncio.run(run())
    with pytest.raises(ValueError, match="unknown AgentGym env name 'webarena'"):
        game_factory("webarena")
    with pytest.raises(ValueError, match="not a game we can serve"):
        AgentGymEnvConfig(env="webarena")
    with pytest.raises(ValueError, match="must start with http"):
        AgentGymEnvConfig(url="127.0.0.1:36001")


@pytest.mark.slow  # a gem hunt env server
def test_task_source_lists_splits_from_the_server(gemhunt_server):
    source = AgentGymTaskSource(AgentGymEnvConfig(env="gemhunt", url=gemhunt_server.url))
    assert len(source.task_ids("dev")) == 500 and source.task_ids("test")[0] == "gemhunt_10500"
    with pytest.raises(ValueError, match="unknown split 'valid'"):
        source.task_ids("valid")


def test_closed_instances_are_reused_and_warm_ones_prestarted(gemhunt_server):
    url = gemhunt_server.url
    env_id = httpx.post(f"{url}/create").json()["id"]
    idle_before = httpx.get(f"{url}/health").json()["idle"]
    httpx.post(f"{url}/reset", json={"id": env_id, "data_idx": 10_000})
    httpx.post(f"{url}/close", json={"id": env_id})
    assert httpx.get(f"{url}/health").json()["idle"] == idle_before + 1
    reused = httpx.post(f"{url}/create").json()["id"]
    assert reused != env_id and httpx.get(f"{url}/health").json()["idle"] == idle_before
    early = httpx.post(f"{url}/step", json={"id": reused, "action": "open red box"})
    assert early.status_code == 409  # a reused instance is a new episode: reset first
    first = httpx.post(f"{url}/reset", json={"id": reused, "data_idx": 10_001}).json()
    assert first["done"] is False and first["score"] == 0.0

    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "loop_agents.envs.agentgym.server",
        "--env",
        "gemhunt",
        "--port",
        str(port),
        "--warm",
        "2",
    ]
    with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as warm:
        try:
            deadline, health = time.monotonic() + 60, {}
            while time.monotonic() < deadline and health.get("idle") != 2:
                time.sleep(0.3)
                try:
                    health = httpx.get(f"http://127.0.0.1:{port}/health").json()
                except httpx.HTTPError:
                    pass
            assert health.get("idle") == 2
        finally:
            warm.terminate()
