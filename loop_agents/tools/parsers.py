"""Tool-call formats of model families: text a model wrote -> calls, and calls -> the text the template writes.

One parser per format, found by model family (`llm.chat_template`) in one registry, so no runner or gateway holds
string hacks for a format. Qwen2.5 and Qwen3 both use the Hermes format, which their chat templates render as

    <tool_call>\\n{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call>

one block per call, blocks separated by a newline. `parse` raises ToolCallError (truncated, invalid_json,
malformed_call, no_call) for output that is not such blocks; `render` writes calls exactly as the template renders
an assistant message's `tool_calls` (demonstrations in tool form are tokenized from it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from loop_agents.tools.errors import ToolCallError, ToolErrorKind


@dataclass(frozen=True)
class ToolCall:
    """One parsed call: the tool's name and its arguments object."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ParsedMessage:
    """A message's calls, in order, and its text outside them (stripped)."""

    calls: list[ToolCall]
    content: str


class ToolCallParser(Protocol):
    name: str

    def parse(self, text: str) -> ParsedMessage:
        """The calls in `text` (at least one), or ToolCallError naming the kind of malformed output."""
        ...

    def render(self, calls: Sequence[ToolCall]) -> str:
        """The assistant text that carries `calls`, as the model family's chat template writes it."""
        ...


class HermesParser:
    """`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks (Qwen2.5, Qwen3, Hermes models)."""

    name = "hermes"
    open_tag = "<tool_call>"
    close_tag = "</tool_call>"

    def __init__(self) -> None:
        self._block = re.compile(re.escape(self.open_tag) + r"(.*?)" + re.escape(self.close_tag), re.DOTALL)

    def parse(self, text: str) -> ParsedMessage:
        blocks = list(self._block.finditer(text))
        rest = text[blocks[-1].end() :] if blocks else text
        if self.open_tag in rest:  # an opened block that never closed: the turn was cut inside the call
            raise ToolCallError(
                ToolErrorKind.TRUNCATED,
                f"your tool call was cut off before {self.close_tag}; write the whole call, shorter.",
            )
        if not blocks:
            raise ToolCallError(
                ToolErrorKind.NO_CALL,
                f"no tool call found; call a tool with {self.open_tag}"
                '{"name": <tool name>, "arguments": {...}}' + f"{self.close_tag}.",
            )
        calls = [self._call(block.group(1)) for block in blocks]
        content = self._block.sub("", text).strip()
        return ParsedMessage(calls, content)

    def _call(self, body: str) -> ToolCall:
        body = body.strip()
        try:
            data = json.loads(body)
        except json.JSONDecodeError as err:
            if err.pos >= len(body):  # the JSON ran out before it closed
                raise ToolCallError(
                    ToolErrorKind.TRUNCATED, f"the JSON of your tool call is incomplete ({err.msg})."
                ) from None
            raise ToolCallError(
                ToolErrorKind.INVALID_JSON,
                f"the tool call is not valid JSON ({err.msg} at character {err.pos}).",
            ) from None
        shape = 'a tool call must be {"name": <tool name>, "arguments": {<argument>: <value>, ...}}'
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            raise ToolCallError(ToolErrorKind.MALFORMED_CALL, f"{shape}.")
        arguments = data.get("arguments", {})
        if isinstance(arguments, str):  # some models write the arguments object as a JSON string
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                pass
        if not isinstance(arguments, dict):
            raise ToolCallError(ToolErrorKind.MALFORMED_CALL, f"{shape}; the arguments were not an object.")
        return ToolCall(data["name"], arguments)

    def render(self, calls: Sequence[ToolCall]) -> str:
        # the templates' `tool_call.arguments | tojson` is json.dumps with its default separators
        return "\n".join(
            f'{self.open_tag}\n{{"name": "{call.name}", "arguments": '
            f"{json.dumps(call.arguments, ensure_ascii=False)}}}\n{self.close_tag}"
            for call in calls
        )


PARSERS: dict[str, ToolCallParser] = {"hermes": HermesParser()}
MODEL_FAMILY_FORMATS: dict[str, str] = {"qwen2_5": "hermes", "qwen3": "hermes"}  # llm.chat_template -> format


def parser_for(model_family: str) -> ToolCallParser:
    """The tool-call parser of a model family (`llm.chat_template`: qwen2_5, qwen3) or of a format name."""
    name = MODEL_FAMILY_FORMATS.get(model_family, model_family)
    if name not in PARSERS:
        known = sorted({*MODEL_FAMILY_FORMATS, *PARSERS})
        raise ValueError(f"no tool-call parser for {model_family!r}; known: {', '.join(known)}")
    return PARSERS[name]
