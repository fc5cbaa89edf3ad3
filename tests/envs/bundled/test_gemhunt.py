"""The bundled gem hunt: hand-checked rewards, solver 100 %, random policy low, determinism, splits."""

from __future__ import annotations

import asyncio
import random

import pytest
from omegaconf import OmegaConf

from loop_agents.config.load import compose
from loop_agents.envs.bundled import (
    BundledEnvironment,
    BundledTaskSource,
    GemHuntGame,
    generate_task,
    task_ids,
)
from loop_agents.envs.bundled.config import BundledEnvConfig
from loop_agents.envs.bundled.demonstrations import generate_demonstrations
from loop_agents.envs.bundled.family import quoted_names
from loop_agents.envs.bundled.tasks import CONTAINERS, GemHuntTask
from loop_agents.envs.selected import selected_family
from loop_agents.envs.settings import env_settings

TASK = GemHuntTask(index=0, room=("red box", "blue key", "green ball", "grey door", "purple box", "yellow key"),
                   chain=("red box", "blue key", "green ball"), code="4 7")  # fmt: skip


def test_rewards_hand_checked():
    game = GemHuntGame(TASK, spare_moves=1)  # 4 optimal actions + 1 spare = 5 moves
    assert game.first_observation() == (
        "Room: red box, blue key, green ball, grey door, purple box, yellow key. Start at the red box."
    )
    assert game.step("open the Red box.") == ("red box: a note says blue key.", 1 / 4, False)
    assert game.step("open grey door") == ("grey door: nothing. The note says blue key.", 1 / 4, False)
    assert game.step("open blue key") == ("blue key: a note says green ball.", 2 / 4, False)
    assert game.step("open green ball") == ("green ball: the gem! Its code is 4 7.", 3 / 4, False)
    assert game.step("answer 47") == ("Correct! You got the gem.", 1.0, True)
    assert game.solved


def test_out_of_order_open_earns_nothing_and_moves_run_out():
    game = GemHuntGame(TASK, spare_moves=0)
    assert game.step("open green ball") == ("green ball: the gem! Its code is 4 7.", 0.0, False)
    assert game.step("dance")[0].startswith("Unknown action.")
    assert game.step("open pink box")[0] == "There is no pink box here. Start at the red box."
    observation, reward, done = game.step("open red box")
    assert (observation, reward, done) == ("red box: a note says blue key. Out of moves.", 0.25, True)
    with pytest.raises(ValueError, match="over"):
        game.step("open blue key")


def test_wrong_answer_ends_with_partial_credit():
    game = GemHuntGame(TASK)
    for action in ("open red box", "open blue key", "open green ball"):
        game.step(action)
    assert game.step("answer 4 8") == ("Wrong code.", 3 / 4, True)
    assert not game.solved


def test_generation_is_deterministic_and_splits_are_disjoint():
    assert generate_task(123) == generate_task(123)
    assert generate_task(123) != generate_task(124)
    splits = {name: set(task_ids(name)) for name in ("train", "dev", "test")}
    assert [len(s) for s in splits.values()] == [10_000, 500, 500]
    assert not (
        splits["train"] & splits["dev"] or splits["train"] & splits["test"] or splits["dev"] & splits["test"]
    )
    task = generate_task(10_001)
    assert 2 <= len(task.chain) <= 5 and set(task.chain) <= set(task.room) <= set(CONTAINERS)
    with pytest.raises(ValueError, match="unknown bundled split"):
        task_ids("validation")


def _play(policy, split: str = "dev", n: int = 300) -> tuple[float, float]:
    games = []
    for index in range(n):
        game = GemHuntGame(generate_task(int(task_ids(split)[index].split("_")[1])))
        while not game.done:
            game.step(policy(game))
        games.append(game)
    return sum(g.solved for g in games) / n, sum(g.reward for g in games) / n


def test_scripted_solver_gets_everything_and_random_gets_little():
    assert _play(GemHuntGame.optimal_action) == (1.0, 1.0)
    rng = random.Random(0)
    actions = [f"open {c}" for c in CONTAINERS] + [f"answer {a} {b}" for a in range(1, 10) for b in range(10)]
    success, reward = _play(lambda game: rng.choice(actions))
    assert success < 0.03 and reward < 0.15, (success, reward)


def test_async_environment_matches_the_game():
    async def episode() -> tuple[list[float], object]:
        env = await BundledTaskSource().make_env()
        reset = await env.reset("gemhunt_10005")
        assert reset.info["system_prompt"].startswith("Find the gem")
        game = GemHuntGame(generate_task(10_005))
        rewards = []
        while True:
            step = await env.step(game.optimal_action())
            game.step(game.optimal_action())
            rewards.append(step.reward)
            if step.done:
                evaluation = await env.evaluate()
                await env.close()
                return rewards, evaluation

    rewards, evaluation = asyncio.run(episode())
    n = len(generate_task(10_005).chain) + 1
    assert rewards == [i / n for i in range(1, n + 1)]
    assert evaluation.reward == 1.0 and evaluation.success


def test_bad_task_id_is_named():
    with pytest.raises(ValueError, match="unknown bundled task id 'babyai_3'"):
        asyncio.run(BundledEnvironment().reset("babyai_3"))


def test_demonstrations_are_deterministic_and_noisy():
    demos = generate_demonstrations(200, noise=0.3, seed=1)
    assert demos == generate_demonstrations(200, noise=0.3, seed=1)
    assert len({task_id for task_id, _ in demos}) == 200
    clean = generate_demonstrations(50, noise=0.0, seed=1)
    assert all(m[-1]["content"].startswith("answer") for _, m in clean)
    solved = 0
    for task_id, messages in demos:
        game = GemHuntGame(generate_task(int(task_id.split("_")[1])))
        for message in messages[2::2]:
            game.step(message["content"])
        solved += game.solved
    assert 0.2 < solved / len(demos) < 0.8  # imperfect demonstrator: some solved, some not


def test_quoted_observations_put_names_and_the_code_in_quotes_and_score_alike():
    """quoted=True (the tool-calling agent's form) changes the observations' text only: same rewards, same ending,
    and a name in a note is the same token sequence as the JSON argument that opens it."""
    game = GemHuntGame(TASK, spare_moves=2, quoted=True)
    assert game.first_observation() == (
        'Room: "red box", "blue key", "green ball", "grey door", "purple box", "yellow key". Start at the "red box".'
    )
    assert game.step("open red box") == ('"red box": a note says "blue key".', 1 / 4, False)
    assert game.step("open grey door") == ('"grey door": nothing. The note says "blue key".', 1 / 4, False)
    assert game.step("open pink box") == (
        'There is no "pink box" here. The note says "blue key".',
        1 / 4,
        False,
    )
    game.step("open blue key")
    assert game.step("open green ball") == ('"green ball": the gem! Its code is "4 7".', 3 / 4, False)
    assert game.step("answer 4 7") == ("Correct! You got the gem.", 1.0, True)


def test_the_family_quotes_names_exactly_when_the_agent_calls_its_tools():
    def quoted(*overrides: str) -> bool:
        cfg = compose(["experiment=demo", *overrides])
        return quoted_names(cfg, env_settings(cfg))

    assert not quoted() and quoted("agent=tools")
    assert quoted("env.options.quoted_names=true") and not quoted(
        "agent=tools", "env.options.quoted_names=false"
    )
    cfg = compose(["experiment=demo", "agent=tools"])
    source = selected_family(cfg).task_source(env_settings(cfg), cfg)
    env = asyncio.run(source.make_env())
    reset = asyncio.run(env.reset(task_ids("dev")[0]))
    assert reset.observation.startswith('Room: "')


def test_demonstrations_lent_to_a_served_gem_hunt_stay_unquoted():
    """env=openenv serving the gem hunt borrows its demonstrations: the served game writes unquoted observations,
    so the lent demonstrations are unquoted too, even with agent=tools."""
    cfg = compose(["experiment=demo_openenv", "agent=tools"])
    lent = BundledEnvConfig(**OmegaConf.to_container(cfg.env.options.demonstration_options))
    assert not quoted_names(cfg, lent)
