"""Our gem hunt served as OpenEnv (`python -m loop_agents.envs.openenv serve bundled`), driven by OpenEnv's own
client (`GenericEnvClient` and its sync wrapper): the texts are the in-process environment's, the solver's episodes
are scored 1 with success, sessions are concurrent and isolated, and an unfinished episode is scored on `finish`."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys

import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient

from loop_agents.envs.bundled.demonstrations import noisy_action
from loop_agents.envs.bundled.env import BundledEnvironment, BundledTaskSource

pytestmark = pytest.mark.slow


async def solve(url: str, task_id: str) -> tuple[list[float], dict, bool]:
    """Play the scripted solver's actions (computed on an in-process mirror) through OpenEnv; rewards, last obs."""
    mirror = BundledEnvironment()
    local = await mirror.reset(task_id)
    async with GenericEnvClient(base_url=url) as env:
        result = await env.reset(task_id=task_id)
        assert result.observation["text"] == local.observation
        assert result.observation["info"]["system_prompt"] == local.info["system_prompt"]
        rewards, done = [], False
        while not done:
            action = noisy_action(mirror.game, 0.0, random.Random(0))
            expected = await mirror.step(action)
            result = await env.step({"text": action})
            assert result.observation["text"] == expected.observation and result.done == expected.done
            rewards.append(result.reward)
            done = result.done
        return rewards, result.observation, (await mirror.evaluate()).success


def test_openenv_client_plays_the_solver_to_success(gem_hunt_server):
    url = gem_hunt_server.url
    for task_id in BundledTaskSource().task_ids("dev")[:3]:
        rewards, last, mirror_success = asyncio.run(solve(url, task_id))
        assert mirror_success and last["success"] is True
        assert rewards[-1] == 1.0 and sum(rewards) == 1.0  # 0 until done, then the family's score


def test_concurrent_sessions_are_isolated(gem_hunt_server):
    ids = BundledTaskSource().task_ids("dev")[10:22]

    async def all_at_once():
        return await asyncio.gather(*(solve(gem_hunt_server.url, t) for t in ids))

    results = asyncio.run(all_at_once())
    assert [last["task_id"] for _, last, _ in results] == ids
    assert all(last["success"] for _, last, _ in results)


def test_sync_client_split_seed_reset_finish_and_state(gem_hunt_server):
    """OpenEnv's sync wrapper (what TRL's environments use); reset by split and seed; `finish` scores the episode."""
    dev = BundledTaskSource().task_ids("dev")
    with GenericEnvClient(base_url=gem_hunt_server.url).sync() as env:
        first = env.reset(split="dev", seed=3)
        assert first.observation["task_id"] == dev[3] and first.done is False and first.reward == 0.0
        assert env.step({"text": "look around"}).reward == 0.0
        final = env.step({"finish": True})
        assert final.done is True and final.reward == 0.0 and final.observation["success"] is False
        assert final.observation["details"]["moves"] == 1
        state = env.state()
        assert state["task_id"] == dev[3] and state["done"] is True and state["step_count"] == 2
        with pytest.raises(
            RuntimeError, match="has ended"
        ):  # OpenEnv's client raises the server's error reply
            env.step({"text": "look"})


def test_tasks_schema_and_metadata_routes(gem_hunt_server):
    url = gem_hunt_server.url
    assert httpx.get(f"{url}/tasks/dev").json()["task_ids"] == BundledTaskSource().task_ids("dev")
    unknown = httpx.get(f"{url}/tasks/nosuch")
    assert unknown.status_code == 404 and "unknown bundled split 'nosuch'" in unknown.json()["detail"]
    schema = httpx.get(f"{url}/schema").json()
    assert {"text", "finish"} <= set(schema["action"]["properties"])
    assert {"text", "info", "success"} <= set(schema["observation"]["properties"])
    assert httpx.get(f"{url}/metadata").json()["name"] == "loop_agents/bundled"


def test_serving_an_unknown_family_is_one_line_exit_2():
    run = subprocess.run([sys.executable, "-m", "loop_agents.envs.openenv", "serve", "no_such_family"],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 2
    assert len(run.stderr.strip().splitlines()) == 1 and "no_such_family" in run.stderr
