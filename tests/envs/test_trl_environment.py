"""Our families in TRL's `environment_factory` contract (`loop_agents.envs.trl`): the class TRL probes, the tools it
reads from signatures and docstrings, rewards equal to our own episode's for the same actions, and TRL's own
GRPOTrainer training on it with no `reward_funcs`, routing two families by the dataset's `environment` column."""

from __future__ import annotations

import asyncio
import inspect
import random

import pytest

from loop_agents.envs.bundled.demonstrations import demonstration
from loop_agents.envs.bundled.env import BundledEnvironment as InProcessGemHunt
from loop_agents.envs.bundled.tasks import parse_task_id
from loop_agents.envs.trl import trl_environment, trl_environments
from loop_agents.tools.spec import ToolSpec


@pytest.fixture(scope="module")
def gem_hunt() -> type:
    return trl_environment("bundled")


def tool_calls(task_id: str, noise: float, seed: int, tools: list[ToolSpec]) -> list[tuple[str, dict]]:
    """The scripted solver's actions on `task_id` as (tool name, arguments)."""
    messages = demonstration(parse_task_id(task_id), noise, random.Random(seed))
    calls = []
    for message in messages[2::2]:
        for tool in tools:
            arguments = tool.from_action(message["content"]) if tool.from_action else None
            if arguments is not None:
                calls.append((tool.name, arguments))
                break
    return calls


def test_the_class_is_what_trl_probes_no_argument_constructor_reset_get_reward_and_named_tools(gem_hunt):
    from transformers.utils import get_json_schema

    environment = gem_hunt()
    public = {
        name for name, _ in inspect.getmembers(environment, inspect.ismethod) if not name.startswith("_")
    }
    tools = gem_hunt._episodes.tools
    assert public == {"reset", "get_reward", *(tool.name for tool in tools)}
    for tool in tools:
        schema = get_json_schema(getattr(environment, tool.name))["function"]
        assert {k: schema[k] for k in ("name", "description", "parameters")} == tool.openai_schema()[
            "function"
        ]
    assert "Room:" in environment.reset(task_id="gemhunt_3", prompt="ignored column")


def test_rewards_equal_our_in_process_scores_for_the_same_actions(gem_hunt):
    tools = gem_hunt._episodes.tools
    for task_id, noise, seed in [("gemhunt_3", 0.0, 0), ("gemhunt_17", 0.5, 1), ("gemhunt_40", 1.0, 2)]:
        calls = tool_calls(task_id, noise, seed, tools)
        environment = gem_hunt()
        environment.reset(task_id=task_id)
        for name, arguments in calls:
            getattr(environment, name)(**arguments)
        ours = InProcessGemHunt()

        async def play(ours=ours, calls=calls, task_id=task_id):
            await ours.reset(task_id)
            for name, arguments in calls:
                await ours.step(next(t for t in tools if t.name == name).to_action(arguments))
            return (await ours.evaluate()).reward

        assert environment.get_reward() == asyncio.run(play())
    solved = gem_hunt()
    solved.reset(task_id="gemhunt_3")
    for name, arguments in tool_calls("gemhunt_3", 0.0, 0, tools):
        solved_text = getattr(solved, name)(**arguments)
    assert solved.get_reward() == 1.0 and solved_text.endswith("The episode is over.")
    with pytest.raises(ValueError, match="episode is over"):
        solved.answer(code="1 2")  # TRL turns this into a tool error the model sees


def test_rows_without_a_task_id_play_the_split_in_order(gem_hunt):
    first, second = gem_hunt(), gem_hunt()
    assert first.reset() != second.reset()


def test_a_tool_named_like_trls_own_methods_is_refused(monkeypatch):
    from loop_agents.envs.bundled.family import GemHuntFamily

    clash = ToolSpec("reset", "x", {"type": "object", "properties": {}}, to_action=lambda a: "x")
    monkeypatch.setattr(GemHuntFamily, "tools", lambda self, settings: [clash])
    with pytest.raises(ValueError, match="shadow TRL's own method"):
        trl_environment("bundled")


@pytest.mark.slow
def test_trl_grpo_trains_on_two_families_routed_by_the_environment_column_with_no_reward_funcs(tmp_path):
    """TRL's own GRPOTrainer (the pinned release) takes {family: class}: two optimizer steps on the tiny model,
    the rewards come from each environment's `get_reward`, and both families' episodes were played."""
    from benchmarks.trl_environments import run_grpo

    result = run_grpo(trl_environments({"bundled": [], "textcraft": []}), tmp_path, steps=2)
    assert result["steps"] == 2
    assert result["episodes"]["bundled"] > 0 and result["episodes"]["textcraft"] > 0
    reward_keys = {key for entry in result["logs"] for key in entry if key.startswith("rewards/")}
    assert any("BundledEnvironment" in key for key in reward_keys), reward_keys
    assert any("TextcraftEnvironment" in key for key in reward_keys), reward_keys
