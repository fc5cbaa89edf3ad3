"""Turn-by-turn ids vs the chat template applied to the whole conversation (Qwen2.5, Qwen3 on/off)."""

from __future__ import annotations

import re

import pytest
from transformers import AutoTokenizer

from loop_agents.rollout.chat import ChatFormat, ChatTemplateError

INITIAL = [
    {"role": "system", "content": "You solve tasks with code."},
    {"role": "user", "content": "Task: count  the playlists é\n"},
    {"role": "assistant", "content": "Demo step.\n```python\nprint(1)\n```"},
    {"role": "user", "content": "Output:\n```\n1\n```"},
]
# observations with the characters that break naive string handling: braces, Jinja syntax, quotes,
# backslashes, tabs, leading/trailing whitespace and newlines, non-ASCII, emoji, HTML, code fences
OBSERVATIONS = [
    'Output:\n```\n{"items": [1, 2], "name": "O\'Brien"}\n```',
    "  \n\n\tTraceback (most recent call last):\n  File \"<cell>\", line 1\nSyntaxError: '{{ x }}' {% if %} \\n",
    "naïve café 🙂 中文 <b>bold</b> &amp; ```python\nnot code\n```\n\n\n",
    "",
]
ANSWERS = [
    "I will list them.\n\n```python\nprint(apis.spotify.show_playlist_library(page_index=0))\n```",
    "  Leading spaces, {braces} and \\backslashes\\ 🙂\n\n```py\nx = {'a': 1}\n```\n",
    "\n\nDone ü.\n```python\napis.supervisor.complete_task(answer=3)\n```",
    "ok",
]
THINK_ANSWERS = [f"<think>\nstep {i}: plan ü {{x}}\n</think>\n\n{a.lstrip()}" for i, a in enumerate(ANSWERS)]


@pytest.fixture(scope="module")
def qwen25(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="module")
def qwen3(tiny_qwen3_model_dir):
    return AutoTokenizer.from_pretrained(tiny_qwen3_model_dir)


def build_turn_by_turn(fmt: ChatFormat, answers: list[str], observations: list[str]) -> list[int]:
    """What the runner does: initial ids once, then per turn gen prompt + sampled + close + observation."""
    ids = fmt.initial_ids(INITIAL)
    for answer, observation in zip(answers, observations, strict=True):
        ids += fmt.generation_prompt_ids
        sampled = fmt.encode(answer) + [fmt.turn_end_id]  # a turn that ended with the sampled stop token
        ids += sampled + fmt.close_turn_ids(sampled)
        ids += fmt.observation_ids(observation)
    return ids + fmt.generation_prompt_ids


def whole_conversation(fmt: ChatFormat, answers: list[str], observations: list[str]) -> list[dict[str, str]]:
    messages = [dict(m) for m in INITIAL]
    for answer, observation in zip(answers, observations, strict=True):
        messages += [
            {"role": "assistant", "content": answer},
            {"role": fmt.observation_role, "content": observation},
        ]
    return messages


def template_ids(tokenizer, fmt: ChatFormat, messages: list[dict[str, str]]) -> list[int]:
    return tokenizer.apply_chat_template(
        messages, tokenize=True, add_generation_prompt=True, **fmt.template_kwargs
    )["input_ids"]


def test_qwen2_5_turn_by_turn_equals_whole_template(qwen25):
    fmt = ChatFormat(qwen25)
    built = build_turn_by_turn(fmt, ANSWERS, OBSERVATIONS)
    assert built == template_ids(qwen25, fmt, whole_conversation(fmt, ANSWERS, OBSERVATIONS))
    assert fmt.generation_prompt_text == "<|im_start|>assistant\n"
    assert fmt.after_turn_end_text == "\n"


@pytest.mark.parametrize("role", ["user", "tool"])
def test_qwen2_5_each_prefix_is_the_template_of_the_conversation_so_far(qwen25, role):
    fmt = ChatFormat(qwen25, observation_role=role)
    full = build_turn_by_turn(fmt, ANSWERS, OBSERVATIONS)
    for n in range(len(ANSWERS) + 1):
        expected = template_ids(qwen25, fmt, whole_conversation(fmt, ANSWERS[:n], OBSERVATIONS[:n]))
        assert full[: len(expected)] == expected  # every turn's prompt is a prefix of the final sequence


def test_qwen3_thinking_with_tool_observations_equals_whole_template(qwen3):
    """With observations as tool responses, Qwen3's template keeps the reasoning of earlier turns: equal ids."""
    fmt = ChatFormat(qwen3, enable_thinking=True, observation_role="tool")
    built = build_turn_by_turn(fmt, THINK_ANSWERS, OBSERVATIONS)
    assert built == template_ids(qwen3, fmt, whole_conversation(fmt, THINK_ANSWERS, OBSERVATIONS))


def _drop_earlier_think_blocks(text: str) -> str:
    # the template renders earlier assistant turns as content.split('</think>')[-1].lstrip('\n')
    return re.sub(r"(<\|im_start\|>assistant\n)<think>.*?</think>\n*", r"\1", text, flags=re.DOTALL)


def test_qwen3_thinking_with_user_observations_differs_only_by_earlier_think_blocks(qwen3):
    fmt = ChatFormat(qwen3, enable_thinking=True)
    assert fmt.generation_prompt_text == "<|im_start|>assistant\n"
    built = build_turn_by_turn(fmt, THINK_ANSWERS, OBSERVATIONS)
    expected = template_ids(qwen3, fmt, whole_conversation(fmt, THINK_ANSWERS, OBSERVATIONS))
    assert built != expected  # the template drops what the model saw; we keep it (training == sampling)
    built_text = qwen3.decode(built)
    assert built_text.count("<think>") == len(THINK_ANSWERS)
    assert _drop_earlier_think_blocks(built_text) == qwen3.decode(expected)
    assert fmt.encode(_drop_earlier_think_blocks(built_text)) == expected


def test_qwen3_thinking_off_differs_only_by_the_empty_think_of_earlier_generation_prompts(qwen3):
    fmt = ChatFormat(qwen3, enable_thinking=False)
    assert fmt.generation_prompt_text == "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    built = build_turn_by_turn(fmt, ANSWERS, OBSERVATIONS)
    expected = template_ids(qwen3, fmt, whole_conversation(fmt, ANSWERS, OBSERVATIONS))
    gen_prompt = len(fmt.generation_prompt_ids)
    assert built[-gen_prompt:] == expected[-gen_prompt:] == fmt.generation_prompt_ids
    earlier = qwen3.decode(built[:-gen_prompt])
    assert earlier.count("<think>\n\n</think>\n\n") == len(ANSWERS)
    assert earlier.replace("<think>\n\n</think>\n\n", "") == qwen3.decode(expected[:-gen_prompt])


def test_a_turn_cut_by_max_tokens_is_closed_with_an_unsampled_end_token(qwen25):
    fmt = ChatFormat(qwen25)
    newline = fmt.encode("\n")
    assert fmt.close_turn_ids([5, 6, fmt.turn_end_id]) == newline
    assert fmt.close_turn_ids([5, 6]) == [fmt.turn_end_id, *newline]
    endoftext = qwen25.convert_tokens_to_ids("<|endoftext|>")
    assert fmt.close_turn_ids([5, endoftext]) == [fmt.turn_end_id, *newline]
    assert fmt.stop_token_ids(["<|im_end|>", "<|endoftext|>"]) == [fmt.turn_end_id, endoftext]


def test_observation_ids_cost_is_independent_of_history(qwen25):
    fmt = ChatFormat(qwen25)
    ids = fmt.observation_ids("hello")
    assert ids[0] == qwen25.convert_tokens_to_ids("<|im_start|>") and ids[-2] == fmt.turn_end_id
    assert qwen25.decode(ids) == "<|im_start|>user\nhello<|im_end|>\n"


def test_bad_template_setups_fail_with_a_clear_message(qwen25):
    with pytest.raises(ChatTemplateError, match="observation_role"):
        ChatFormat(qwen25, observation_role="assistant")
    with pytest.raises(ChatTemplateError, match="not in the tokenizer"):
        ChatFormat(qwen25, turn_end_token="<|eot_id|>")
    with pytest.raises(ChatTemplateError, match="empty"):
        ChatFormat(qwen25).initial_ids([])
