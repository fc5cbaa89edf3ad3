"""A tool a family declares: name, description, JSON schema of its arguments, and the action it becomes.

Every environment in this project steps on a text action (`Environment.step(action: str)`); a tool is a typed
front for that action. `to_action(arguments)` turns a validated call into the text the environment steps on, so a
tool-calling agent (our own loop, `agent=tools`) and an outside agent program (the gateway) reach the environment
through the same declarations and nothing else.

A family declares its tools with `EnvironmentFamily.tools(settings)`; a family that declares none gets
`generic_action_tool()`, one tool whose single string argument is the action itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolSpec:
    """One tool: what the model sees (name, description, parameters) and how a call becomes an action."""

    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object ({"type": "object", "properties": ...})
    to_action: Callable[[dict[str, Any]], str] = field(compare=False, repr=False)
    # the inverse, for demonstrations written as text actions: action -> arguments, or None when the action is not
    # this tool's (None: the tool takes no part in converting demonstrations to tool form)
    from_action: Callable[[str], dict[str, Any] | None] | None = field(
        default=None, compare=False, repr=False
    )

    def openai_schema(self) -> dict[str, Any]:
        """The OpenAI / chat-template form: {"type": "function", "function": {name, description, parameters}}."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def generic_action_tool(description: str = "Take one action in the environment.") -> ToolSpec:
    """The tool of a family that declares none: `act(action: str)`, whose argument is the text action."""
    return ToolSpec(
        name="act",
        description=description,
        parameters={
            "type": "object",
            "properties": {"action": {"type": "string", "description": "The action, as text."}},
            "required": ["action"],
        },
        to_action=lambda arguments: arguments["action"],
        from_action=lambda action: {"action": action},
    )


def tools_of(family: Any, settings: Any) -> list[ToolSpec]:
    """The tools `family` declares for `settings` (its `tools(settings)`), or the generic action tool."""
    declare = getattr(family, "tools", None)
    declared: Sequence[ToolSpec] | None = declare(settings) if callable(declare) else None
    if not declared:
        return [generic_action_tool()]
    names = [tool.name for tool in declared]
    if len(set(names)) != len(names):
        raise ValueError(f"family {getattr(family, 'name', family)!r} declares a tool name twice: {names}")
    return list(declared)
