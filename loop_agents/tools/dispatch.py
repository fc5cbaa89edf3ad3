"""A model message -> the one environment action its tool call stands for (parse, look up, validate, convert).

The environments here take one text action per step, so a message must hold exactly one call; everything else is
a ToolCallError of one kind (errors.py) that the caller shows the model as one tool error message.
"""

from __future__ import annotations

from collections.abc import Sequence

from loop_agents.tools.errors import ToolCallError, ToolErrorKind
from loop_agents.tools.parsers import ToolCall, ToolCallParser
from loop_agents.tools.spec import ToolSpec
from loop_agents.tools.validate import check_arguments


def find_tool(call: ToolCall, tools: Sequence[ToolSpec]) -> ToolSpec:
    """The declared tool `call` names, or ToolCallError(unknown_tool) listing the declared ones."""
    for tool in tools:
        if tool.name == call.name:
            return tool
    names = ", ".join(tool.name for tool in tools)
    raise ToolCallError(
        ToolErrorKind.UNKNOWN_TOOL, f"there is no tool {call.name!r}; the tools are: {names}."
    )


def validated_action(call: ToolCall, tools: Sequence[ToolSpec]) -> str:
    """The text action of one call whose tool exists and whose arguments fit its schema."""
    tool = find_tool(call, tools)
    check_arguments(tool.name, call.arguments, tool.parameters)
    return tool.to_action(call.arguments)


def action_of_message(text: str, tools: Sequence[ToolSpec], parser: ToolCallParser) -> tuple[str, ToolCall]:
    """(action, call) of a message that holds exactly one valid call; ToolCallError otherwise."""
    calls = parser.parse(text).calls
    if len(calls) > 1:
        raise ToolCallError(
            ToolErrorKind.TOO_MANY_CALLS,
            f"{len(calls)} tool calls in one message, but the environment takes one action a turn; "
            "none was run. Call one tool per message.",
        )
    return validated_action(calls[0], tools), calls[0]
