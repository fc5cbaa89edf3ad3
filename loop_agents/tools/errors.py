"""The kinds of malformed tool-calling output, and the error that carries one.

A tool-calling agent answers each of these with ONE tool error message the model sees (its observation for the
turn) and counts it under `tools/error/<kind>`; none of them ends an episode. The gateway reports the same kinds.
"""

from __future__ import annotations

from enum import StrEnum


class ToolErrorKind(StrEnum):
    """Why a model message did not become exactly one valid tool call."""

    NO_CALL = "no_call"  # text with no tool call where one is needed
    # a call that never closed (cut by max_tokens): `<tool_call>{"name": ...` and no end
    TRUNCATED = "truncated"
    INVALID_JSON = "invalid_json"  # a closed call whose body is not JSON
    MALFORMED_CALL = "malformed_call"  # JSON, but not {"name": <string>, "arguments": <object>}
    UNKNOWN_TOOL = "unknown_tool"  # a name the family does not declare
    MISSING_ARGUMENT = "missing_argument"  # a required argument is absent
    UNEXPECTED_ARGUMENT = "unexpected_argument"  # an argument the schema does not declare
    WRONG_TYPE = "wrong_type"  # an argument of the wrong JSON type (or outside its enum)
    # more calls in one message than the environment takes (one action a turn)
    TOO_MANY_CALLS = "too_many_calls"
    THINKING_NOT_CLOSED = "thinking_not_closed"  # the message ended inside <think> ... </think>


class ToolCallError(ValueError):
    """A message that is not a usable tool call: `kind` for the metrics, the message for the model."""

    def __init__(self, kind: ToolErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind

    def feedback(self) -> str:
        """The tool error message the model sees (its observation for this turn)."""
        return f"Error ({self.kind.value}): {self}"
