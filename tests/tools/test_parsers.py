"""The Hermes tool-call parser (Qwen2.5, Qwen3), argument validation and dispatch: valid calls, and each kind of
malformed output raised as its own ToolCallError kind; `render` is what the real chat templates write."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from loop_agents.envs.bundled.tools import GEM_HUNT_TOOLS
from loop_agents.tools.dispatch import action_of_message
from loop_agents.tools.errors import ToolCallError, ToolErrorKind
from loop_agents.tools.parsers import HermesParser, ToolCall, parser_for
from loop_agents.tools.spec import ToolSpec
from loop_agents.tools.validate import check_arguments

PARSER = HermesParser()
TYPED = ToolSpec(
    name="move",
    description="Move.",
    parameters={
        "type": "object",
        "properties": {
            "steps": {"type": "integer"},
            "speed": {"type": "number"},
            "run": {"type": "boolean"},
            "direction": {"type": "string", "enum": ["left", "right"]},
            "path": {"type": "array"},
        },
        "required": ["steps"],
    },
    to_action=lambda a: f"move {a['steps']}",
)


def call(body: str) -> str:
    return f"<tool_call>\n{body}\n</tool_call>"


def kind_of(text: str, tools=GEM_HUNT_TOOLS) -> ToolErrorKind:
    with pytest.raises(ToolCallError) as err:
        action_of_message(text, tools, PARSER)
    assert str(err.value) and err.value.feedback().startswith(f"Error ({err.value.kind.value}): ")
    return err.value.kind


def test_valid_calls_become_actions():
    assert action_of_message(call('{"name": "open", "arguments": {"container": "red box"}}'), GEM_HUNT_TOOLS,
                             PARSER) == ("open red box", ToolCall("open", {"container": "red box"}))  # fmt: skip
    # text around the call, no newlines inside the tags, arguments as a JSON string (some models write that)
    text = (
        'The note says 4 7.<tool_call>{"name": "answer", "arguments": "{\\"code\\": \\"4 7\\"}"}</tool_call>'
    )
    assert action_of_message(text, GEM_HUNT_TOOLS, PARSER)[0] == "answer 4 7"
    first, second = call('{"name": "a", "arguments": {}}'), call('{"name": "b"}')
    parsed = PARSER.parse(f"think first\n{first}\n{second}")
    assert parsed.calls == [ToolCall("a", {}), ToolCall("b", {})] and parsed.content == "think first"
    full = {"steps": 3, "speed": 1.5, "run": False, "direction": "left", "path": [1]}
    check_arguments("move", full, TYPED.parameters)
    check_arguments("move", {"steps": 3, "speed": 2}, TYPED.parameters)  # an integer is a JSON number


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("open red box", ToolErrorKind.NO_CALL),
        ("", ToolErrorKind.NO_CALL),
        ('<tool_call>\n{"name": "open", "arguments": {"container": "re', ToolErrorKind.TRUNCATED),
        (call('{"name": "open", "arguments": {"container": "red box"'), ToolErrorKind.TRUNCATED),
        (call('{"name": "open", "arguments": {"container": red box}}'), ToolErrorKind.INVALID_JSON),
        (call("open red box"), ToolErrorKind.INVALID_JSON),
        (call('["open", "red box"]'), ToolErrorKind.MALFORMED_CALL),
        (call('{"arguments": {"container": "red box"}}'), ToolErrorKind.MALFORMED_CALL),
        (call('{"name": "open", "arguments": ["red box"]}'), ToolErrorKind.MALFORMED_CALL),
        (call('{"name": "close", "arguments": {"container": "red box"}}'), ToolErrorKind.UNKNOWN_TOOL),
        (call('{"name": "open", "arguments": {}}'), ToolErrorKind.MISSING_ARGUMENT),
        (
            call('{"name": "open", "arguments": {"container": "red box", "x": 1}}'),
            ToolErrorKind.UNEXPECTED_ARGUMENT,
        ),
        (call('{"name": "answer", "arguments": {"code": 47}}'), ToolErrorKind.WRONG_TYPE),
        (call('{"name": "open", "arguments": {"container": null}}'), ToolErrorKind.WRONG_TYPE),
        (call('{"name": "open", "arguments": {"container": "red box"}}') * 2, ToolErrorKind.TOO_MANY_CALLS),
    ],
)
def test_each_malformed_kind(text, kind):
    assert kind_of(text) == kind


@pytest.mark.parametrize(
    "arguments",
    [{"steps": True}, {"steps": 1.5}, {"steps": "3"}, {"steps": 1, "speed": "fast"}, {"steps": 1, "run": 0},
     {"steps": 1, "direction": "up"}, {"steps": 1, "path": "a"}],
)  # fmt: skip
def test_wrong_types_are_json_types(arguments):
    with pytest.raises(ToolCallError) as err:
        check_arguments("move", arguments, TYPED.parameters)
    assert err.value.kind is ToolErrorKind.WRONG_TYPE


def test_registry_by_model_family():
    assert parser_for("qwen2_5") is parser_for("qwen3") is parser_for("hermes")
    with pytest.raises(ValueError, match="no tool-call parser for 'llama3'; known: hermes, qwen2_5, qwen3"):
        parser_for("llama3")


@pytest.mark.parametrize("model", ["tiny_model_dir", "tiny_qwen3_model_dir"])
def test_render_is_what_the_chat_template_writes(model, request):
    tokenizer = AutoTokenizer.from_pretrained(request.getfixturevalue(model))
    calls = [ToolCall("open", {"container": "red box"}), ToolCall("answer", {"code": "4 7", "note": "é"})]
    messages = [
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls]},
    ]  # fmt: skip
    rendered = tokenizer.apply_chat_template(messages, tools=[t.openai_schema() for t in GEM_HUNT_TOOLS],
                                             tokenize=False)  # fmt: skip
    text = PARSER.render(calls)
    turn = rendered.rsplit("<|im_start|>assistant\n", 1)[1]
    assert turn.removeprefix("<think>\n\n</think>\n\n") == f"{text}<|im_end|>\n"  # Qwen3 adds an empty think
    assert PARSER.parse(text).calls == calls
