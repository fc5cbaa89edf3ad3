"""AppWorld with `agent=tools` scores exactly as the text agent on the same actions: the same code cells, written
once as the text agent's ```python blocks and once as `execute(code)` calls, played through the real episode
runner on real AppWorld hosts (the pool of this folder), give the same actions, the same outputs, the same tests
passed and the same reward: a solved task, a wrong answer with partial credit, and a cell that raises."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from loop_agents.envs.appworld.agent import AppWorldAgent
from loop_agents.envs.appworld.family import EXECUTE_TOOL
from loop_agents.rollout.config import EpisodeConfig
from loop_agents.rollout.runner import chat_format, run_episode
from loop_agents.rollout.tool_agent import ToolCallingAgent, tool_schemas
from loop_agents.rollout.trajectory import FinishReason
from loop_agents.tools.parsers import HermesParser, ToolCall
from tests.envs.appworld.test_environment import solution, template_tasks
from tests.rollout.scripted import ScriptedGenerator

pytestmark = pytest.mark.slow  # a pool of AppWorld servers

PARSER = HermesParser()
BASE = EpisodeConfig(
    max_tokens_per_turn=8192, max_turns=4, max_context_tokens=65536, observation_max_tokens=3000
)
TEXT_CFG = BASE
TOOLS_CFG = EpisodeConfig(
    **{**BASE.__dict__, "observation_role": "tool", "tools": tool_schemas([EXECUTE_TOOL])}
)


def as_text(cell: str) -> str:  # the block's content is the cell, its last newline included
    return f"I will run this.\n\n```python\n{cell}```"


def as_call(cell: str) -> str:
    return PARSER.render([ToolCall("execute", {"code": cell})])


def episode(task_source, run, tokenizer, agent, cfg, task_id: str, messages: list[str]):
    chat = chat_format(tokenizer, cfg)
    generator = ScriptedGenerator([chat.encode(m) + [chat.turn_end_id] for m in messages])

    async def play():
        env = await task_source.make_env()
        return await run_episode(env, generator, agent, chat, cfg, task_id=task_id)

    return run(play())


@pytest.mark.parametrize("case", ["solved", "wrong_answer", "raises"])
def test_tools_score_exactly_as_text_on_the_same_code(task_source, run, tiny_model_dir, case):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    delete_task = template_tasks(task_source, "note_delete_tagged")[2]
    count_task = template_tasks(task_source, "note_count_tag")[1]
    task_id, cells = {
        "solved": (delete_task, ["print(apis.api_docs.show_app_descriptions())", solution(task_source, delete_task)]),
        "wrong_answer": (count_task, ["apis.supervisor.complete_task(answer=999)"]),
        "raises": (count_task, ["print(not_defined_anywhere)", "x = 1 / 0", "apis.supervisor.complete_task(answer=3)"]),
    }[case]  # fmt: skip
    cells = [cell if cell.endswith("\n") else cell + "\n" for cell in cells]
    text_agent = AppWorldAgent(prompt="compact")
    tools_agent = ToolCallingAgent(text_agent, (EXECUTE_TOOL,), PARSER)
    text = episode(task_source, run, tokenizer, text_agent, TEXT_CFG, task_id, [as_text(c) for c in cells])
    tools = episode(task_source, run, tokenizer, tools_agent, TOOLS_CFG, task_id, [as_call(c) for c in cells])

    for traj in (text, tools):
        assert traj.finish_reason is FinishReason.DONE, traj.metadata
        assert [t.action_text for t in traj.turns] == cells
        assert "tool_errors" not in traj.metadata
    assert [t.observation_text for t in tools.turns] == [t.observation_text for t in text.turns]
    assert (tools.reward, tools.success) == (text.reward, text.success)
    passed = [(t["requirement"], t["passed"]) for t in text.reward_details["tests"]]
    assert [(t["requirement"], t["passed"]) for t in tools.reward_details["tests"]] == passed
    expected = {"solved": (1.0, True), "wrong_answer": (0.5, False), "raises": (0.5, False)}[case]
    assert (text.reward, text.success) == expected
    # the tool-calling episode's outputs reached the model as tool responses, the text one's as user turns
    assert [m["role"] for m in tools.messages[3::2]] == ["tool"] * (len(cells) - 1)
    assert [m["role"] for m in text.messages[3::2]] == ["user"] * (len(cells) - 1)
    assert [m["content"] for m in tools.messages[3::2]] == [m["content"] for m in text.messages[3::2]]
