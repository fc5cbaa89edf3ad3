"""OpenAI chat messages as a program sends them -> the messages the chat template renders, and message keys.

Programs send what their client library writes: `content` as a string, None or a list of text parts; assistant
`tool_calls` whose `arguments` are a JSON string; extra fields (`refusal`, `annotations`, `name`, ...). The template
takes plain strings and arguments objects. `assistant_key` names an assistant message by what the model wrote
(its text and its calls), so the gateway finds the recorded ids of a message it answered when the program sends it
back, whatever the client library did to the field layout.
"""

from __future__ import annotations

import json
from typing import Any

ROLES = ("system", "developer", "user", "assistant", "tool")


class RequestError(ValueError):
    """A request the gateway answers with an OpenAI-style error: `status`, a message, and an error `code`."""

    def __init__(self, status: int, message: str, code: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def content_text(content: Any, where: str) -> str:
    """The text of a message's `content`: a string, None (empty) or a list of `{"type": "text"}` parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if (
                not isinstance(part, dict)
                or part.get("type") != "text"
                or not isinstance(part.get("text"), str)
            ):
                raise RequestError(400, f"{where}: only text content parts are supported")
            texts.append(part["text"])
        return "".join(texts)
    raise RequestError(400, f"{where}: content must be a string, null or a list of text parts")


def arguments_object(arguments: Any) -> Any:
    """A call's arguments as an object: the JSON string OpenAI clients send, parsed (kept as text if not JSON)."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return arguments
    return {} if arguments is None else arguments


def _calls(message: dict[str, Any], where: str) -> list[tuple[str, Any]]:
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise RequestError(400, f"{where}: tool_calls must be a list")
    out = []
    for j, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise RequestError(400, f"{where}: tool_calls[{j}] needs function.name")
        out.append((function["name"], arguments_object(function.get("arguments"))))
    return out


def template_messages(messages: Any) -> list[dict[str, Any]]:
    """The request's messages in the form the chat template renders (RequestError on a malformed one)."""
    if not isinstance(messages, list) or not messages:
        raise RequestError(400, "messages must be a non-empty list")
    out: list[dict[str, Any]] = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise RequestError(400, f"{where}: role must be one of {', '.join(ROLES)}")
        role = "system" if message["role"] == "developer" else message["role"]
        rendered: dict[str, Any] = {"role": role, "content": content_text(message.get("content"), where)}
        if role == "assistant":
            calls = _calls(message, where)
            if calls:
                rendered["tool_calls"] = [
                    {"type": "function", "function": {"name": name, "arguments": arguments}}
                    for name, arguments in calls
                ]
        if role == "tool" and isinstance(message.get("tool_call_id"), str):
            rendered["tool_call_id"] = message["tool_call_id"]
        out.append(rendered)
    return out


def assistant_key(content: str, calls: list[tuple[str, Any]]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """What identifies an assistant message: its text (stripped) and its calls (name, canonical arguments)."""
    canonical = tuple((name, json.dumps(arguments, sort_keys=True)) for name, arguments in calls)
    return content.strip(), canonical


def key_of_template_message(message: dict[str, Any]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """`assistant_key` of an assistant message in template form (`template_messages`)."""
    calls = [
        (call["function"]["name"], call["function"]["arguments"]) for call in message.get("tool_calls", [])
    ]
    return assistant_key(message["content"], calls)
