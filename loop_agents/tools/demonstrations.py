"""Demonstrations written as text actions, rewritten in tool form for a tool-calling agent's warm start.

Each assistant action becomes the call of the first declared tool whose `from_action` takes it, written by the
model family's parser exactly as the chat template renders a `tool_calls` message; each observation after it
becomes a `tool` message. The opening messages (system, task) stay as they are: the template adds the tools to the
system turn. A message whose action no tool takes (or that held no action) stays text, as the rollout would see it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from loop_agents.tools.parsers import ToolCall, ToolCallParser
from loop_agents.tools.spec import ToolSpec


def call_for_action(action: str, tools: Sequence[ToolSpec]) -> ToolCall | None:
    """The call that `to_action`s to `action`, by the first tool whose `from_action` takes it; None if none does."""
    for tool in tools:
        arguments = tool.from_action(action) if tool.from_action is not None else None
        if arguments is not None and tool.to_action(arguments) == action:
            return ToolCall(tool.name, arguments)
    return None


def tool_form(
    messages: Sequence[dict[str, str]],
    action_of: Callable[[str], str | None],
    tools: Sequence[ToolSpec],
    parser: ToolCallParser,
) -> list[dict[str, str]]:
    """`messages` (opening, then assistant actions and user observations) with actions as calls and observations
    as tool responses. `action_of` reads the action out of an assistant message (the family's text agent)."""
    if any(m["role"] == "tool" for m in messages):  # already in tool form
        return [dict(m) for m in messages]
    first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    out = [dict(m) for m in messages[:first]]
    for message in messages[first:]:
        if message["role"] != "assistant":
            out.append({"role": "tool", "content": message["content"]})
            continue
        action = action_of(message["content"])
        call = call_for_action(action, tools) if action is not None else None
        content = parser.render([call]) if call is not None else message["content"]
        out.append({"role": "assistant", "content": content})
    return out
