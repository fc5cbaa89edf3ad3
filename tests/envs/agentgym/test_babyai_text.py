"""AgentGym's BabyAI text interface on our game object (no server): observation text, action listing,
macro actions, the reward/score rules of AgentGym's server, every level, and the action sets."""

from __future__ import annotations

import pytest

from loop_agents.envs.agentgym.games.babyai import ITEMS_PER_SEED, BabyAIGame, agentgym_goal, level_id
from loop_agents.envs.agentgym.games.babyai_text import FORWARD, PICKUP, TURN_LEFT, TURN_RIGHT


def test_every_level_resets_in_both_action_sets():
    for action_set in ("agentgym", "primitive"):
        game = BabyAIGame(action_set=action_set)
        for data_idx in range(ITEMS_PER_SEED):
            first = game.reset(data_idx)
            assert (
                first.observation.startswith("Your goal: ") and "\nAvailable actions: [" in first.observation
            )
            assert (first.reward, first.score, first.done) == (0.0, 0.0, False)
        game.close()
    assert level_id("GoToObjS6") == "BabyAI-GoToObjS6-v1"  # minigrid 3.2 dropped -v0
    assert level_id("GoToRedBall") == "BabyAI-GoToRedBall-v0"


def test_macro_action_expands_to_a_shortest_path_and_scores_as_agentgym():
    game = BabyAIGame()
    game.reset(1)  # GoToRedBall, seed 0: the red ball is 4 ahead and 3 to the right
    assert (
        "There is a red ball 1 4 steps in front of you and 3 steps to your right."
        in game.reset(1).observation
    )
    path = game.actions["go to red ball 1"]
    # The room (x right, y down): agent at (6, 5) facing left, red ball at (2, 2), grey ball at (2, 4),
    # green key at (2, 3). Going 4 left along y=5 then up is blocked by the grey ball at (2, 4); the
    # shortest way to face the ball from a neighbouring cell is up to (6, 2), then left to (3, 2):
    # turn right, 3 forward, turn left, 3 forward (8 steps).
    assert path == [TURN_RIGHT, FORWARD, FORWARD, FORWARD, TURN_LEFT, FORWARD, FORWARD, FORWARD]
    assert game.actions["pickup red ball 1"] == [*path, PICKUP]
    assert game.actions["turn left"] == [TURN_LEFT] and list(game.actions)[-1] == "check available actions"
    wrong = game.step("jump")
    assert wrong.observation.startswith("The action is not recognized.") and (wrong.reward, wrong.score) == (
        0.0,
        0.0,
    )
    steps_before = game.env.unwrapped.step_count
    done = game.step("Go To Red Ball 1 ")  # AgentGym lower-cases and strips
    assert game.env.unwrapped.step_count - steps_before == len(path)
    expected = 1 - 0.9 * len(path) / game.env.unwrapped.max_steps
    assert done.done and done.success and done.reward == pytest.approx(expected)
    assert (
        done.score == pytest.approx(expected)
        and "\n The task is completed.\nAvailable actions: [" in done.observation
    )


def test_unknown_action_set_lists_the_supported():
    with pytest.raises(ValueError, match=r"supported: \['agentgym', 'primitive'\]"):
        BabyAIGame(action_set="macro")
    assert agentgym_goal("open the door, then go to the ball after you pick up the key") == (
        "open the door, and go to the ball and pick up the key"
    )
