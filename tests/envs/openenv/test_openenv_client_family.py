"""Our OpenEnv client (`env=openenv`) against an environment written with OpenEnv's own server code (guess_app.py)
and against our served gem hunt: field mapping, seeds as task ids, rewards and done from OpenEnv's step result,
concurrent episodes, the turn budget, a server started here restarted after it died."""

from __future__ import annotations

import asyncio

import pytest

from loop_agents.envs.bundled.env import BundledTaskSource
from loop_agents.envs.openenv.client import OpenEnvTaskSource
from loop_agents.envs.openenv.settings import OpenEnvSettings
from loop_agents.rollout.environment import EnvironmentFailure
from tests.envs.openenv.guess_app import secret_of

pytestmark = pytest.mark.slow


def guess_source(url: str, **options) -> OpenEnvTaskSource:
    defaults = {"tasks": "seeds", "action_field": "guess", "splits": {"train": [0, 20], "dev": [100, 5]}}
    return OpenEnvTaskSource(OpenEnvSettings(url=url, **{**defaults, **options}))


async def bisect(source: OpenEnvTaskSource, task_id: str):
    """Binary search through our client; returns (observations, evaluation)."""
    env = await source.make_env()
    seen = [(await env.reset(task_id)).observation]
    low, high, done = 0, 9, False
    while not done:
        guess = (low + high) // 2
        step = await env.step(str(guess))
        seen.append(step.observation)
        done = step.done
        low, high = (guess + 1, high) if "higher" in step.observation else (low, guess - 1)
    evaluation = await env.evaluate()
    await env.close()
    return seen, evaluation


def test_seeds_fields_rewards_and_done(guess_server):
    source = guess_source(guess_server.url)
    assert source.task_ids("dev") == [f"seed-{n}" for n in range(100, 105)]
    seen, evaluation = asyncio.run(bisect(source, "seed-7"))
    assert (
        seen[0] == "Guess my number from 0 to 9." and seen[-1] == "Right!"
    )  # the one string field, `prompt`
    assert evaluation.reward == 1.0 and evaluation.success and evaluation.details["done"]
    assert source.finish_supported is False  # its action has no `finish`


def test_concurrent_episodes_one_session_each(guess_server):
    source = guess_source(guess_server.url, observation_field="prompt")

    async def many():
        return await asyncio.gather(*(bisect(source, f"seed-{n}") for n in range(16)))

    results = asyncio.run(many())
    assert all(evaluation.success for _, evaluation in results)
    assert len({len(seen) for seen, _ in results}) > 1  # different secrets, different episodes
    assert {secret_of(n) for n in range(16)} != {0}


def test_turn_budget_scores_the_rewards_so_far(guess_server):
    async def two_guesses():
        source = guess_source(guess_server.url, observation_field="prompt", action_template="{action}")
        env = await source.make_env()
        await env.reset("seed-1")
        wrong = (secret_of(1) + 1) % 10
        await env.step(str(wrong))
        return await env.evaluate()

    evaluation = asyncio.run(two_guesses())
    assert (evaluation.reward, evaluation.success, evaluation.details["done"]) == (0.0, False, False)


def test_an_error_reply_is_an_environment_failure_naming_the_url(guess_server):
    async def crash():
        env = await guess_source(guess_server.url).make_env()
        await env.reset("seed-0")
        await env.step("crash")

    with pytest.raises(EnvironmentFailure, match=f"OpenEnv server {guess_server.url}: step failed.*crashed"):
        asyncio.run(crash())


def test_served_gem_hunt_through_our_client_matches_in_process(gem_hunt_server):
    async def compare():
        source = OpenEnvTaskSource(OpenEnvSettings(url=gem_hunt_server.url))
        assert source.task_ids("dev") == BundledTaskSource().task_ids("dev")
        task = source.task_ids("dev")[5]
        ours, local = await source.make_env(), await BundledTaskSource().make_env()
        a, b = await ours.reset(task), await local.reset(task)
        assert (a.observation, a.info["system_prompt"]) == (b.observation, b.info["system_prompt"])
        a, b = await ours.step("open red door"), await local.step("open red door")
        assert (a.observation, a.done) == (b.observation, b.done)
        return await ours.evaluate(), await local.evaluate()  # ours ends the episode with `finish`

    ours, local = asyncio.run(compare())
    assert (ours.reward, ours.success) == (local.reward, local.success)


def test_a_server_started_here_is_restarted_after_it_died():
    async def play_kill_play():
        source = OpenEnvTaskSource(OpenEnvSettings(app="tests.envs.openenv.guess_app:app", tasks="seeds",
                                                   action_field="guess", start_timeout_s=240))  # fmt: skip
        try:
            first = await bisect(source, "seed-3")
            env = await source.make_env()
            await env.reset("seed-4")
            source.server.kill()
            with pytest.raises(EnvironmentFailure, match="OpenEnv server http://127.0.0.1:"):
                await env.step("5")  # the episode in flight fails (the collector retries it)
            second = await bisect(source, "seed-3")  # the next episode starts the server again
            return first, second, source.restarts
        finally:
            source.close()

    first, second, restarts = asyncio.run(play_kill_play())
    assert first == second and restarts == 1
