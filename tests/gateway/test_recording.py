"""Recording, splicing and segments of gateway calls, on the real tiny tokenizer and its Qwen2.5 chat template.

The model's turns are played back as fixed ids (tests/rollout/scripted.py), spelled one character per token, so
that re-tokenizing their text gives other ids: a prompt that holds the sampled ids was spliced, not re-tokenized.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from transformers import AutoTokenizer

from loop_agents.envs.bundled.tools import GEM_HUNT_TOOLS
from loop_agents.gateway.completions import chat_completion
from loop_agents.gateway.messages import RequestError
from loop_agents.gateway.session import EpisodeSession
from loop_agents.rollout.config import EpisodeConfig
from loop_agents.rollout.trajectory import FinishReason
from tests.gateway.sessions import gem_hunt_session
from tests.rollout.scripted import ScriptedGenerator

TOOLS = [tool.openai_schema() for tool in GEM_HUNT_TOOLS]
OPEN_CALL = '<tool_call>\n{"name": "open", "arguments": {"container": "red box"}}\n</tool_call>'
OPENING = [
    {"role": "system", "content": "Find the gem."},
    {"role": "user", "content": "You see a red box and a blue bag."},
]


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def spelled(tokenizer, text: str, end: bool = True) -> list[int]:
    """`text` one character per token (not how the tokenizer would write it), then `<|im_end|>`."""
    ids = [i for ch in text for i in tokenizer(ch, add_special_tokens=False)["input_ids"]]
    assert ids != tokenizer(text, add_special_tokens=False)["input_ids"]  # re-tokenizing would differ
    return ids + ([tokenizer.convert_tokens_to_ids("<|im_end|>")] if end else [])


def session_for(tokenizer, turns: list[list[int]], **cfg) -> tuple[EpisodeSession, ScriptedGenerator]:
    generator = ScriptedGenerator(turns)
    settings = EpisodeConfig(max_tokens_per_turn=120, max_turns=6, max_context_tokens=4096, seed=0)
    for key, value in cfg.items():
        setattr(settings, key, value)
    session = gem_hunt_session(tokenizer, generator, settings)
    return session, generator


def call(session, messages, **body):
    return asyncio.run(chat_completion(session, {"messages": messages, "tools": TOOLS, **body}))


def test_first_prompt_is_the_templates_own_rendering(tokenizer):
    session, generator = session_for(tokenizer, [spelled(tokenizer, OPEN_CALL)])
    call(session, OPENING)
    expected = tokenizer.apply_chat_template(OPENING, tools=TOOLS, add_generation_prompt=True, tokenize=False)
    assert generator.prompts[0] == tokenizer(expected, add_special_tokens=False)["input_ids"]


def test_tool_call_reply_and_spliced_history(tokenizer):
    first = spelled(tokenizer, OPEN_CALL)
    second = spelled(tokenizer, "It is 4 7.")
    session, generator = session_for(tokenizer, [first, second])
    reply = call(session, OPENING)
    choice = reply["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (tool_call,) = choice["message"]["tool_calls"]
    assert tool_call["function"] == {"name": "open", "arguments": json.dumps({"container": "red box"})}
    # the program sends the message back as the openai client serializes it, and the tool's result
    history = [
        *OPENING,
        {**choice["message"], "refusal": None, "annotations": []},
        {"role": "tool", "tool_call_id": tool_call["id"], "content": "The box holds a note: 4 7."},
    ]
    call(session, history)
    prompt = generator.prompts[1]
    assert (
        prompt[: len(generator.prompts[0]) + len(first)] == generator.prompts[0] + first
    )  # sampled ids, as is
    traj = session.recorder.trajectory
    assert traj.segment_starts == [] and traj.token_ids == prompt + second
    assert traj.metadata["assistant_messages"] == {"spliced": 1, "as_text": 0}
    assert traj.loss_mask == [0] * len(generator.prompts[0]) + [1] * len(first) + [0] * (
        len(prompt) - len(generator.prompts[0]) - len(first)
    ) + [1] * len(second)
    assert (
        traj.sample_logprobs[traj.turns[1].gen_start : traj.turns[1].gen_end]
        == generator.completions[1].logprobs
    )
    # what came between the turns is the template's rendering of the tool message, never trained
    between = tokenizer.decode(traj.token_ids[traj.turns[0].gen_end : traj.turns[1].gen_start])
    assert (
        between
        == "\n<|im_start|>user\n<tool_response>\nThe box holds a note: 4 7.\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    assert traj.turns[0].observation_text == "The box holds a note: 4 7."


def test_arguments_rewritten_by_the_client_still_match(tokenizer):
    first = spelled(tokenizer, OPEN_CALL)
    session, generator = session_for(tokenizer, [first, spelled(tokenizer, "ok then")])
    reply = call(session, OPENING)
    message = reply["choices"][0]["message"]
    message["tool_calls"][0]["function"]["arguments"] = '{ "container" :  "red box" }'  # other spacing
    message["content"] = ""
    call(session, [*OPENING, message, {"role": "tool", "content": "empty"}])
    assert generator.prompts[1][: len(generator.prompts[0]) + len(first)] == generator.prompts[0] + first
    assert session.recorder.trajectory.segment_starts == []


def test_a_rewritten_history_opens_a_new_segment(tokenizer):
    first = spelled(tokenizer, OPEN_CALL)
    second = spelled(tokenizer, "once again")
    session, generator = session_for(tokenizer, [first, second])
    message = call(session, OPENING)["choices"][0]["message"]
    rewritten = [
        {"role": "system", "content": "Be brief."},
        OPENING[1],
        message,
        {"role": "tool", "content": "x"},
    ]
    call(session, rewritten)
    traj = session.recorder.trajectory
    start = len(generator.prompts[0]) + len(first)
    assert traj.segment_starts == [start]
    assert traj.token_ids[start:] == generator.prompts[1] + second
    # the model's message in the new segment is still its sampled ids, now as context
    assert first in [generator.prompts[1][i : i + len(first)] for i in range(len(generator.prompts[1]))]
    assert sum(traj.loss_mask[start:]) == len(second)
    assert session.recorder.segments == 2
    traj.validate()


def test_the_programs_own_assistant_text_is_rendered_as_context(tokenizer):
    session, generator = session_for(tokenizer, [spelled(tokenizer, "fine then")])
    own = [*OPENING, {"role": "assistant", "content": "I will look."}, {"role": "user", "content": "Go on."}]
    call(session, own)
    expected = tokenizer.apply_chat_template(own, tools=TOOLS, add_generation_prompt=True, tokenize=False)
    assert generator.prompts[0] == tokenizer(expected, add_special_tokens=False)["input_ids"]
    assert session.recorder.trajectory.metadata["assistant_messages"] == {"spliced": 0, "as_text": 1}


def test_a_turn_cut_by_max_tokens_keeps_the_end_token_as_context(tokenizer):
    long_turn = spelled(tokenizer, "a long answer that goes on", end=False)
    session, generator = session_for(tokenizer, [long_turn, spelled(tokenizer, "and more")])
    reply = call(session, OPENING, max_tokens=10)
    assert reply["choices"][0]["finish_reason"] == "length"
    cut = long_turn[:10]
    call(session, [*OPENING, reply["choices"][0]["message"], {"role": "user", "content": "more"}])
    end_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    after = len(generator.prompts[0]) + len(cut)
    assert generator.prompts[1][:after] == generator.prompts[0] + cut
    assert generator.prompts[1][after] == end_id  # closed by the template, with loss mask 0
    assert session.recorder.trajectory.loss_mask[after] == 0


def test_malformed_call_is_text_and_counted(tokenizer):
    session, _ = session_for(tokenizer, [spelled(tokenizer, '<tool_call>\n{"name": "open", "arguments": {')])
    reply = call(session, OPENING)
    assert reply["choices"][0]["finish_reason"] == "stop"
    assert "tool_calls" not in reply["choices"][0]["message"]
    assert session.recorder.trajectory.metadata["tool_errors"] == {"truncated": 1}


def test_call_and_context_budgets_end_the_episode(tokenizer):
    session, _ = session_for(tokenizer, [spelled(tokenizer, "next move")], max_turns=2)
    call(session, OPENING)
    call(session, OPENING)
    with pytest.raises(RequestError) as err:
        call(session, OPENING)
    assert err.value.status == 429 and session.ended == FinishReason.TURN_BUDGET
    tight, _ = session_for(
        tokenizer, [spelled(tokenizer, "next move")], max_context_tokens=300, min_tokens_per_turn=16
    )
    with pytest.raises(RequestError) as err:
        call(tight, OPENING)
    assert err.value.code == "context_length_exceeded" and tight.ended == FinishReason.CONTEXT_BUDGET
    assert tight.recorder.trajectory.token_ids == []  # nothing of a refused call is recorded


def test_n_above_one_and_prefill_are_refused(tokenizer):
    session, _ = session_for(tokenizer, [spelled(tokenizer, "next move")])
    with pytest.raises(RequestError):
        call(session, OPENING, n=2)
    with pytest.raises(RequestError):
        call(session, [*OPENING, {"role": "assistant", "content": "The gem is"}])
