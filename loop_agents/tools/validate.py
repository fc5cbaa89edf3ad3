"""Check a call's arguments against its tool's JSON schema: required keys, declared keys, types, enums.

The subset of JSON Schema that tool declarations use (an object of typed properties); anything the schema does
not constrain is accepted. JSON's types, not Python's: a bool is not an integer, an integer is a number.
"""

from __future__ import annotations

from typing import Any

from loop_agents.tools.errors import ToolCallError, ToolErrorKind

_TYPE_CHECKS = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def check_arguments(tool_name: str, arguments: dict[str, Any], schema: dict[str, Any]) -> None:
    """Raise ToolCallError (missing_argument, unexpected_argument or wrong_type) naming the first bad argument."""
    properties: dict[str, Any] = schema.get("properties", {})
    for key in schema.get("required", []):
        if key not in arguments:
            raise ToolCallError(
                ToolErrorKind.MISSING_ARGUMENT, f"{tool_name} needs the argument {key!r}; it was not given."
            )
    if schema.get("additionalProperties", False) is False:
        for key in arguments:
            if key not in properties:
                raise ToolCallError(
                    ToolErrorKind.UNEXPECTED_ARGUMENT,
                    f"{tool_name} has no argument {key!r}; its arguments are: {', '.join(properties) or 'none'}.",
                )
    for key, value in arguments.items():
        if key in properties:
            _check_value(tool_name, key, value, properties[key])


def _check_value(tool_name: str, key: str, value: Any, schema: dict[str, Any]) -> None:
    expected = schema.get("type")
    allowed = [expected] if isinstance(expected, str) else list(expected or [])
    if allowed and not any(_TYPE_CHECKS.get(kind, lambda v: True)(value) for kind in allowed):
        raise ToolCallError(
            ToolErrorKind.WRONG_TYPE,
            f"{tool_name}: argument {key!r} must be of type {' or '.join(allowed)}, got {_json_type(value)}.",
        )
    if "enum" in schema and value not in schema["enum"]:
        raise ToolCallError(
            ToolErrorKind.WRONG_TYPE,
            f"{tool_name}: argument {key!r} must be one of {schema['enum']}, got {value!r}.",
        )


def _json_type(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPE_CHECKS[name](value):
            return name
    return type(value).__name__
