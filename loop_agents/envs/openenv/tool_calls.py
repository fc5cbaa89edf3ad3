"""An OpenEnv server's MCP tools as our `ToolSpec`s, and how one call travels as an episode's action.

Our environments step on one text action (`Environment.step(action: str)`, loop_agents/tools/spec.py), so a tool
call the agent made (already checked against the tool's schema by loop_agents/tools) is written as the action text
`{"tool": <name>, "arguments": {...}}` (`encode_call`; a tool lent by a family of ours keeps that family's text
action); the OpenEnv episode reads it back (`call_of_action`) and sends
OpenEnv's simulation-mode step `{"type": "call_tool", "tool_name": ..., "arguments": ...}`, whose reply carries the
reward. `reply_text` is what the model reads of the reply: the tool's text content, or `Error (<kind>): <message>`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from loop_agents.tools.demonstrations import call_for_action
from loop_agents.tools.spec import ToolSpec

EMPTY_SCHEMA = {"type": "object", "properties": {}}


def encode_call(name: str, arguments: dict[str, Any]) -> str:
    """The action text of one tool call."""
    return json.dumps({"tool": name, "arguments": arguments}, ensure_ascii=False)


def decode_call(action: str) -> tuple[str, dict[str, Any]] | None:
    """(tool, arguments) of an action written by `encode_call`, else None."""
    try:
        call = json.loads(action)
    except ValueError:
        return None
    if not (
        isinstance(call, dict)
        and isinstance(call.get("tool"), str)
        and isinstance(call.get("arguments"), dict)
    ):
        return None
    return call["tool"], call["arguments"]


def tool_specs(listed: Sequence[dict[str, Any]], lender_tools: Sequence[ToolSpec] = ()) -> list[ToolSpec]:
    """One ToolSpec per listed MCP tool (its name, description and `inputSchema`). A tool of the same name among
    `lender_tools` (the family `env.options.demonstrations_from` names) lends its `to_action` and `from_action`, so
    that family's text demonstrations become calls of the served tools in the warm start (tools/demonstrations.py
    needs the round trip action -> arguments -> action); the episode reads such an action back as the call
    (`call_of_action`)."""
    lent = {tool.name: tool for tool in lender_tools if tool.from_action is not None}
    specs = []
    for tool in listed:
        name = str(tool["name"])
        schema = tool.get("inputSchema") if isinstance(tool.get("inputSchema"), dict) else EMPTY_SCHEMA
        lender = lent.get(name)
        specs.append(
            ToolSpec(
                name=name,
                description=str(tool.get("description") or ""),
                parameters=schema or EMPTY_SCHEMA,
                to_action=lender.to_action
                if lender
                else (lambda arguments, name=name: encode_call(name, arguments)),
                from_action=lender.from_action if lender else None,
            )
        )
    return specs


def call_of_action(action: str, tools: Sequence[ToolSpec]) -> tuple[str, dict[str, Any]] | None:
    """(tool, arguments) of an action: one written by `encode_call`, or the text action of a lent tool (the
    first whose `from_action` takes it and whose `to_action` gives it back); None when it is neither."""
    call = decode_call(action)
    if call is not None:
        return call
    found = call_for_action(action, tools)
    return (found.name, found.arguments) if found is not None else None


def reply_text(observation: dict[str, Any]) -> tuple[str, bool]:
    """(what the model reads, whether the call failed) of an OpenEnv `CallToolObservation` (as a dict)."""
    error = observation.get("error")
    if isinstance(error, dict) and error:
        return f"Error ({error.get('error_type', 'error')}): {error.get('message', '')}", True
    result = observation.get("result")
    if isinstance(result, dict) and isinstance(result.get("content"), list):
        texts = [
            item.get("text", "") for item in result["content"] if isinstance(item, dict) and "text" in item
        ]
        text = "\n".join(texts) if texts else json.dumps(result.get("data"), default=str)
        failed = bool(result.get("is_error") or result.get("isError"))
        return (f"Error: {text}" if failed and not text.startswith("Error") else text), failed
    if isinstance(result, str):
        return result, False
    return json.dumps(result, default=str, sort_keys=True), False
