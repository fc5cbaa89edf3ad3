"""Real BabyAI (minigrid), TextCraft and ScienceWorld episodes through our servers and the EnvClient:
reset two item ids, a scripted optimal episode to success, a bad one to reward 0, close."""

from __future__ import annotations

import asyncio

import pytest
from textcraft_solver import plan

from loop_agents.envs.agentgym import AgentGymEnvClient

pytestmark = pytest.mark.slow  # BabyAI, TextCraft and ScienceWorld env servers


async def _play(env: AgentGymEnvClient, actions: list[str]):
    step = None
    for action in actions:
        step = await env.step(action)
        if step.done:
            break
    return step, await env.evaluate()


def test_babyai_episodes(babyai_server):
    import gymnasium as gym
    from minigrid.utils.baby_ai_bot import BabyAIBot

    from loop_agents.envs.agentgym.games.babyai import ACTIONS, LEVELS, level_id

    # the same level and seed locally: minigrid's BabyAI bot gives the optimal primitive actions
    names = {index: name for name, index in ACTIONS.items()}
    local = gym.make(level_id(LEVELS[1]))
    local.reset(seed=0)
    bot, actions = BabyAIBot(local.unwrapped), []
    for _ in range(64):
        action = int(bot.replan())
        actions.append(names[action])
        if any(local.step(action)[2:4]):
            break

    async def run() -> None:
        env = AgentGymEnvClient(babyai_server.url, "babyai", request_timeout_s=30)
        env.create_options = {"action_set": "primitive"}  # minigrid's own actions (the default is AgentGym's)
        other = await env.reset("babyai_0")
        reset = await env.reset("babyai_1")  # level GoToRedBall, seed 0
        assert reset.observation != other.observation
        assert (
            reset.observation.startswith("Your goal: go to the red ball")
            and "Available actions:" in reset.observation
        )
        step, evaluation = await _play(env, actions)
        assert step.done and evaluation.success and 0.5 < evaluation.reward <= 1.0
        assert abs(evaluation.reward - (1 - 0.9 * len(actions) / local.unwrapped.max_steps)) < 1e-9
        await env.reset("babyai_1")
        step, evaluation = await _play(env, ["turn left", "turn left", "jump"])
        assert "not recognized" in step.observation and evaluation.reward == 0.0 and not evaluation.success
        await env.close()

    asyncio.run(run())


def test_textcraft_episodes(textcraft_server):
    async def run() -> None:
        env = AgentGymEnvClient(textcraft_server.url, "textcraft", request_timeout_s=30)
        reset = await env.reset("textcraft_13")
        assert "Crafting commands:" in reset.observation and "Goal: craft" in reset.observation
        step, evaluation = await _play(env, plan(reset.observation))
        assert step.done and step.reward == 1.0 and evaluation.success and evaluation.reward == 1.0
        reset = await env.reset("textcraft_15")
        step, evaluation = await _play(
            env, ["inventory", "get 1 diamond block", "craft 1 nothing using 1 air"]
        )
        assert step.observation.startswith("Could not") and not step.done
        assert evaluation.reward == 0.0 and not evaluation.success
        await env.close()

    asyncio.run(run())


def test_sciworld_episodes(sciworld_server):
    from loop_agents.envs.agentgym.games.sciworld import SciWorldGame

    item = 3240  # find-non-living-thing, variation 4: a 5-action gold path
    local = SciWorldGame()
    try:
        assert local.items[item] == ("find-non-living-thing", 4)
        gold = local.gold_actions(item)
    finally:
        local.close()

    async def run() -> None:
        env = AgentGymEnvClient(sciworld_server.url, "sciworld", request_timeout_s=60)
        other = await env.reset("sciworld_0")
        assert other.observation.startswith("Your task is to boil water")
        reset = await env.reset(f"sciworld_{item}")
        assert "non-living thing" in reset.observation
        step, evaluation = await _play(env, gold)
        assert step.done and step.info["score"] == 100 and evaluation.success and evaluation.reward == 1.0
        await env.reset(f"sciworld_{item}")
        step, evaluation = await _play(env, ["look around", "fly to the moon", "wait1"])
        assert not step.done and evaluation.reward == 0.0 and not evaluation.success
        await env.close()

    asyncio.run(run())
