"""The tool-calling agent on real rendered ids: the tiny model's tokenizer with its real Qwen chat template, the
real gem hunt, model turns injected as token ids. Each kind of malformed call is one tool error message the
model sees, counted per kind, and the episode goes on to solve the task; no token of a tool response (or of any
observation) carries loss weight; the ids equal the chat template applied to the whole conversation."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from loop_agents.envs.bundled.demonstrations import demonstration
from loop_agents.envs.bundled.env import BundledEnvironment
from loop_agents.envs.bundled.tasks import generate_task, parse_task_id
from loop_agents.envs.bundled.tools import GEM_HUNT_TOOLS
from loop_agents.orchestration.components import rollout_metrics
from loop_agents.rollout.chat import ChatFormat, ChatTemplateError
from loop_agents.rollout.config import EpisodeConfig
from loop_agents.rollout.demonstration import demonstration_trajectory
from loop_agents.rollout.runner import chat_format, run_episode
from loop_agents.rollout.text_agent import TextActionAgent
from loop_agents.rollout.tool_agent import ToolCallingAgent, tool_schemas
from loop_agents.rollout.trajectory import FinishReason
from loop_agents.tools.demonstrations import tool_form
from loop_agents.tools.errors import ToolErrorKind
from loop_agents.tools.parsers import HermesParser, ToolCall

from .scripted import ScriptedGenerator, assert_token_exact

ROOT = Path(__file__).resolve().parents[2]
PARSER = HermesParser()
SCHEMAS = tool_schemas(GEM_HUNT_TOOLS)
CFG = EpisodeConfig(
    max_tokens_per_turn=128, max_turns=30, max_context_tokens=16384, observation_role="tool", tools=SCHEMAS
)
AGENT = ToolCallingAgent(TextActionAgent(), tuple(GEM_HUNT_TOOLS), PARSER)
TASK = "gemhunt_10007"

MALFORMED = {
    ToolErrorKind.NO_CALL: "I will open the box.",
    ToolErrorKind.TRUNCATED: '<tool_call>\n{"name": "open", "arguments": {"container": "re',
    ToolErrorKind.INVALID_JSON: '<tool_call>\n{"name": "open", "arguments": {container: red}}\n</tool_call>',
    ToolErrorKind.MALFORMED_CALL: '<tool_call>\n["open", "red box"]\n</tool_call>',
    ToolErrorKind.UNKNOWN_TOOL: '<tool_call>\n{"name": "close", "arguments": {"container": "red box"}}\n</tool_call>',
    ToolErrorKind.MISSING_ARGUMENT: '<tool_call>\n{"name": "open", "arguments": {}}\n</tool_call>',
    ToolErrorKind.UNEXPECTED_ARGUMENT: '<tool_call>\n{"name": "answer", "arguments": {"code": "1 2", "x": 1}}\n'
    "</tool_call>",
    ToolErrorKind.WRONG_TYPE: '<tool_call>\n{"name": "answer", "arguments": {"code": 12}}\n</tool_call>',
    ToolErrorKind.TOO_MANY_CALLS: PARSER.render([ToolCall("answer", {"code": "1 2"})] * 2),
    ToolErrorKind.THINKING_NOT_CLOSED: "<think>\nthe note says",
}


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def solving_calls() -> list[str]:
    task = generate_task(parse_task_id(TASK))
    calls = [ToolCall("open", {"container": name}) for name in task.chain] + [
        ToolCall("answer", {"code": task.code})
    ]
    return [PARSER.render([call]) for call in calls]


def response_positions(tokenizer, ids: list[int]) -> list[int]:
    """Every position from a <tool_response> token to its </tool_response>, both included."""
    start, end = tokenizer.convert_tokens_to_ids(["<tool_response>", "</tool_response>"])
    inside, positions = False, []
    for position, token in enumerate(ids):
        inside = inside or token == start
        if inside:
            positions.append(position)
        if token == end:
            inside = False
    return positions


def test_each_malformed_call_is_one_tool_error_and_the_episode_goes_on(tokenizer):
    chat = chat_format(tokenizer, CFG)
    texts = list(MALFORMED.values()) + solving_calls()
    generator = ScriptedGenerator([chat.encode(text) + [chat.turn_end_id] for text in texts])
    traj = asyncio.run(run_episode(BundledEnvironment(), generator, AGENT, chat, CFG, task_id=TASK))

    assert (traj.finish_reason, traj.success, traj.reward) == (FinishReason.DONE, True, 1.0)
    assert traj.metadata["tool_errors"] == {kind.value: 1 for kind in MALFORMED}
    errors = traj.turns[: len(MALFORMED)]
    assert [t.observation_text.split(")")[0] for t in errors] == [f"Error ({k.value}" for k in MALFORMED]
    assert all(t.action_text == "" and t.env_s == 0.0 for t in errors)  # the environment never saw them
    assert traj.reward_details["moves"] == len(solving_calls())  # no move spent on a malformed call
    roles = [m["role"] for m in traj.messages]
    assert roles == ["system", "user"] + ["assistant", "tool"] * (len(texts) - 1) + ["assistant"]
    metrics = rollout_metrics([traj, traj])
    assert {k: v for k, v in metrics.items() if k.startswith("tools/")} == {
        f"tools/error/{kind.value}": 2.0 for kind in MALFORMED
    }

    # real rendered ids: the template applied to the whole conversation, tools declared, is our sequence
    whole = tokenizer.apply_chat_template(traj.messages, tools=SCHEMAS, tokenize=True)["input_ids"]
    assert traj.token_ids == whole
    assert_token_exact(traj, generator)
    responses = response_positions(tokenizer, traj.token_ids)
    assert len(responses) > 10 * (len(texts) - 1)  # every observation is wrapped in <tool_response>
    assert all(traj.loss_mask[p] == 0 for p in responses)
    opening = tokenizer.convert_tokens_to_ids("<tool_response>")
    for turn in traj.turns[:-1]:  # each observation (and each error) is one tool response, all context
        assert traj.token_ids[turn.observation_start : turn.observation_end].count(opening) == 1
        assert sum(traj.loss_mask[turn.observation_start : turn.observation_end]) == 0


def test_tool_form_demonstration_is_the_template_of_its_tool_calls(tokenizer):
    chat = chat_format(tokenizer, CFG)
    chat.demonstration_form = lambda m: tool_form(m, AGENT.action_of, AGENT.tools, PARSER)
    import random

    messages = demonstration(10007, 0.5, random.Random(3))
    traj = demonstration_trajectory(chat, messages, TASK)
    structured = list(
        messages[:2]
    )  # the same conversation with structured tool_calls, as an API client sends it
    for message in messages[2:]:
        if message["role"] == "assistant":
            verb, argument = message["content"].split(" ", 1)
            key = "container" if verb == "open" else "code"
            call = {"type": "function", "function": {"name": verb, "arguments": {key: argument}}}
            structured.append({"role": "assistant", "content": "", "tool_calls": [call]})
        else:
            structured.append({"role": "tool", "content": message["content"]})
    whole = tokenizer.apply_chat_template(structured, tools=SCHEMAS, tokenize=True)["input_ids"]
    assert traj.token_ids == whole
    responses = response_positions(tokenizer, traj.token_ids)
    assert responses and all(traj.loss_mask[p] == 0 for p in responses)
    trained = tokenizer.decode([t for t, m in zip(traj.token_ids, traj.loss_mask, strict=True) if m])
    assert trained.count("<tool_call>") == sum(m["role"] == "assistant" for m in messages)
    assert "<tool_response>" not in trained and "Room:" not in trained


CHATML_WITHOUT_TOOLS = (  # a plain ChatML template, as older chat models ship: it never looks at `tools`
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def test_a_template_without_tools_is_refused(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.chat_template = CHATML_WITHOUT_TOOLS
    ChatFormat(tokenizer)  # fine for a text agent
    with pytest.raises(ChatTemplateError, match="does not render tools"):
        ChatFormat(tokenizer, observation_role="tool", tools=SCHEMAS)


def test_train_refuses_a_model_whose_template_has_no_tools(tmp_path, tiny_model_dir):
    """Bad input: `agent=tools` with a chat template that ignores tools is one line naming the model and its
    template, exit 2, before Ray or vLLM start."""
    model = tmp_path / "chatml_model"
    shutil.copytree(tiny_model_dir, model)
    config = json.loads((model / "tokenizer_config.json").read_text())
    (model / "chat_template.jinja").unlink(missing_ok=True)
    (model / "tokenizer_config.json").write_text(
        json.dumps({**config, "chat_template": CHATML_WITHOUT_TOOLS})
    )
    command = [sys.executable, "-m", "loop_agents.train", "experiment=demo", "agent=tools",
               f"llm.model_path={model}", f"run.dir={tmp_path / 'run'}"]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        f"config error: agent=tools: the chat template of {model} (its tokenizer_config.json)"
    )
    assert "does not render tools" in lines[0] and not (tmp_path / "run").exists()
