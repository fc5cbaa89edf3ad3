"""Our served gem hunt driven by OpenEnv's current client (openenv 0.10 in `.venv-openenv`, its own classes): the
Task API lists every split and task, 16 sessions play tool episodes at once and get the rewards our in-process
episodes get for the same actions, arguments off a tool's schema are counted tool errors, and production mode gives
no reward anywhere."""

from __future__ import annotations

import asyncio
import random

import pytest

from loop_agents.envs.bundled.demonstrations import noisy_action
from loop_agents.envs.bundled.env import BundledEnvironment, BundledTaskSource
from loop_agents.envs.bundled.tools import GEM_HUNT_TOOLS
from tests.envs.openenv.current_client import as_calls, current_openenv, play_in_process, started

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gem_hunt():
    with started("bundled") as server:
        yield server


@pytest.fixture(scope="module")
def gem_hunt_production():
    with started("bundled", mode="production") as server:
        yield server


def test_the_task_api_lists_every_split_and_its_tasks(gem_hunt):
    listing = current_openenv({"command": "tasks", "url": gem_hunt.url})
    source = BundledTaskSource()
    assert listing["env_name"] == "loop_agents_bundled"
    assert listing["splits"] == [{"name": "train", "type": "train", "num_tasks": 10000},
                                 {"name": "dev", "type": "validation", "num_tasks": 500},
                                 {"name": "test", "type": "test", "num_tasks": 500}]  # fmt: skip
    for split, found in listing["tasks"].items():
        ids = source.task_ids(split)
        assert found["num_tasks"] == found["listed"] == len(ids) and found["listed_ids"] == ids
        assert found["first"] == [{"id": ids[i], "index": i, "split": split} for i in range(3)]
        assert found["second"] == {"id": ids[1], "index": 1, "split": split}
    assert listing["outside_status"] == 400
    status, body = listing["unknown_split"]
    assert status == 404 and "unknown bundled split 'no_such_split'" in body["detail"]


def planned_episode(index: int, noise: float) -> tuple[list[str], list[str], object]:
    """The noisy solver's actions on dev task `index` (computed on a mirror), and our in-process play of them."""
    task_id = BundledTaskSource().task_ids("dev")[index]
    mirror, rng, actions = BundledEnvironment(), random.Random(index), []
    asyncio.run(mirror.reset(task_id))
    while not mirror.game.done:
        actions.append(noisy_action(mirror.game, noise, rng))
        asyncio.run(mirror.step(actions[-1]))
    texts, evaluation = asyncio.run(play_in_process(BundledTaskSource(), task_id, actions))
    return actions, texts, evaluation


def test_sixteen_sessions_at_once_get_the_rewards_of_our_in_process_episodes(gem_hunt):
    plans = {index: planned_episode(index, noise=[0.0, 0.4, 0.7, 1.0][index % 4]) for index in range(20, 36)}
    specs = [{"split": "dev", "index": index, "calls": as_calls(actions, GEM_HUNT_TOOLS)}
             for index, (actions, _, _) in plans.items()]  # fmt: skip
    played = current_openenv({"command": "episodes", "url": gem_hunt.url, "episodes": specs})
    rewards = []
    for (index, (actions, texts, evaluation)), episode in zip(plans.items(), played, strict=True):
        assert episode["task_id"] == BundledTaskSource().task_ids("dev")[index]
        assert episode["tools"] == ["open", "answer"] and episode["reset_reward"] == 0.0
        assert [episode["reset_text"], *(step["text"] for step in episode["steps"])] == texts
        *before, last = episode["steps"]
        assert all(step["reward"] == 0.0 and not step["done"] for step in before)
        assert last["done"] and last["reward"] == evaluation.reward and last["score"] == evaluation.reward
        assert last["success"] == evaluation.success and "tests" not in last["details"]
        assert episode["state"]["done"] and episode["state"]["step_count"] == len(actions)
        rewards.append(last["reward"])
    assert 1.0 in rewards and len(set(rewards)) > 1, rewards  # solved and unsolved episodes both checked


def test_arguments_off_a_tools_schema_are_counted_tool_errors(gem_hunt):
    calls = [["open", {}], ["open", {"container": "red box", "lid": "up"}], ["open", {"container": 3}],
             ["no_such_tool", {}], ["answer", {"code": "0 0"}]]  # fmt: skip
    (episode,) = current_openenv({"command": "episodes", "url": gem_hunt.url,
                                  "episodes": [{"split": "dev", "index": 7, "calls": calls}]})  # fmt: skip
    errors = [step["error"] for step in episode["steps"]]
    assert [e and e["error_type"] for e in errors] == ["invalid_args"] * 3 + ["tool_not_found", None]
    assert (
        episode["steps"][0]["text"]
        == "Error (missing_argument): open needs the argument 'container'; it was not given."
    )
    assert "has no argument 'lid'" in episode["steps"][1]["text"]
    assert "must be of type string, got integer" in episode["steps"][2]["text"]
    last = episode["steps"][-1]
    assert last["done"] and last["details"]["tool_errors"] == 3 and last["details"]["moves"] == 1
    assert episode["state"]["tool_errors"] == 3  # unknown tools are MCP's own error, not a schema mismatch


def test_production_mode_serves_tools_and_no_reward(gem_hunt_production):
    calls = [
        ["open", {"container": "red box"}],
        ["open", {}],
        ["answer", {"code": "0 0"}],
        ["open", {"container": "x"}],
    ]
    seen = current_openenv({"command": "production", "url": gem_hunt_production.url,
                            "episode": {"split": "dev", "index": 3, "calls": calls}})  # fmt: skip
    task_id = BundledTaskSource().task_ids("dev")[3]
    texts, _ = asyncio.run(play_in_process(BundledTaskSource(), task_id, ["open red box", "answer 0 0"]))
    assert seen["reset_observation"]["task_id"] == task_id  # the tools act on the episode the reset chose
    assert seen["reset_observation"]["text"] == texts[0] and seen["tools"] == ["open", "answer"]
    assert seen["calls"][0] == {"result": texts[1]} and seen["calls"][2] == {"result": texts[2]}
    assert "Error (missing_argument)" in seen["calls"][1]["error"]
    assert seen["calls"][3] == {"error": "Tool 'open' failed: The episode is over."}
    assert seen["routes"] == {
        "POST /reset": 404,
        "POST /step": 404,
        "GET /state": 404,
    }  # OpenEnv's production
    observation = seen["reset_observation"]
    assert (seen["reset_reward"], observation["score"], observation["success"]) == (None, None, None)
    finished = seen["finished"]  # a session ended through /ws: done, and still no reward
    assert finished["done"] and (finished["reward"], finished["score"], finished["success"]) == (
        None,
        None,
        None,
    )
