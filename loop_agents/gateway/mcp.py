"""The episode's tools over MCP: JSON-RPC messages of a program's MCP client -> answers (server.py's `POST /mcp`).

MCP's Streamable HTTP transport as its handshake-era revisions (2024-11-05 to 2025-11-25) define it, answering
every request with one `application/json` body, which the transport allows. The gateway keeps no MCP session
(no `Mcp-Session-Id`): the episode's key selects the episode, as on every route, and the server sends nothing of
its own (a GET of the endpoint answers 405). Methods:

    initialize                 the client's protocolVersion if the gateway speaks it, else its latest;
                               capabilities {tools: {}}, serverInfo
    notifications/*            accepted, no body (HTTP 202): notifications/initialized, notifications/cancelled
    ping                       {}
    tools/list                 the family's tools: name, description, inputSchema (their JSON schema)
    tools/call                 tool_calls.call_tool, as `POST /tools/{name}`: the same budget, counting and
                               environment step; a call the tools refuse is `isError: true` with its text
    anything else              JSON-RPC error -32601 (a newer client's `server/discover` probe too: the mcp
                               package's client then falls back to initialize)

A body that is not JSON is -32700, a message that is not a JSON-RPC request -32600, bad `tools/call` params
-32602; never an exception. An episode that is over or out of its tool budget answers a JSON-RPC error
(EPISODE_ERROR, the HTTP route's status in `data`), so the program stops as it would on HTTP 409 or 429.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from loop_agents.gateway.messages import RequestError
from loop_agents.gateway.session import EpisodeSession
from loop_agents.gateway.tool_calls import call_tool

PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_VERSION = PROTOCOL_VERSIONS[-1]
SERVER_INFO = {"name": "loop_agents-gateway", "version": "1"}

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
EPISODE_ERROR = (
    -32000
)  # implementation-defined server error: the episode refused the call (over, out of budget)


class JsonRpcError(Exception):
    """A JSON-RPC error answer: `code`, a message, optional `data`."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.data = code, data


def error_response(request_id: Any, err: JsonRpcError) -> dict[str, Any]:
    error: dict[str, Any] = {"code": err.code, "message": str(err)}
    if err.data is not None:
        error["data"] = err.data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def local_origin(origin: str | None) -> bool:
    """Whether a request's `Origin` header may reach the endpoint: absent, or a page of this machine (the
    transport's guard against DNS rebinding: a web page elsewhere cannot drive the episode's tools)."""
    if origin is None:
        return True
    try:
        host = urlsplit(origin).hostname
    except ValueError:
        return False
    return host in ("127.0.0.1", "localhost", "::1")


def mcp_tools(session: EpisodeSession) -> list[dict[str, Any]]:
    """The episode's tools in MCP's `tools/list` form."""
    return [
        {"name": tool.name, "description": tool.description, "inputSchema": tool.parameters}
        for tool in session.tools
    ]


async def _tool_call(session: EpisodeSession, params: dict[str, Any]) -> dict[str, Any]:
    name, arguments = params.get("name"), params.get("arguments")
    if not isinstance(name, str):
        raise JsonRpcError(INVALID_PARAMS, "tools/call needs params.name, a string")
    try:
        result = await call_tool(session, name, {} if arguments is None else arguments)
    except RequestError as err:
        raise JsonRpcError(EPISODE_ERROR, str(err), {"status": err.status, "code": err.code}) from None
    return {"content": [{"type": "text", "text": result["content"]}], "isError": result["is_error"]}


async def _result(session: EpisodeSession, method: str, params: dict[str, Any]) -> dict[str, Any]:
    if method == "initialize":
        asked = params.get("protocolVersion")
        return {
            "protocolVersion": asked if asked in PROTOCOL_VERSIONS else LATEST_VERSION,
            "capabilities": {"tools": {}},
            "serverInfo": SERVER_INFO,
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": mcp_tools(session)}
    if method == "tools/call":
        return await _tool_call(session, params)
    raise JsonRpcError(METHOD_NOT_FOUND, f"method not found: {method}")


async def handle_post(
    session: EpisodeSession, body: bytes, origin: str | None, protocol_version: str | None
) -> tuple[int, dict[str, Any] | None]:
    """(HTTP status, JSON-RPC answer or None for no body) of one POST to the endpoint. A foreign `Origin` is
    403; an `MCP-Protocol-Version` header the gateway does not speak, or a message with no id to answer, 400."""
    if not local_origin(origin):
        return 403, error_response(
            None, JsonRpcError(INVALID_REQUEST, "requests from other origins are refused")
        )
    if protocol_version is not None and protocol_version not in PROTOCOL_VERSIONS:
        supported = ", ".join(PROTOCOL_VERSIONS)
        message = f"unsupported MCP-Protocol-Version {protocol_version[:40]!r}; supported: {supported}"
        return 400, error_response(None, JsonRpcError(INVALID_REQUEST, message))
    reply = await answer(session, body)
    if reply is None:
        return 202, None
    return (400 if "error" in reply and reply["id"] is None else 200), reply


async def answer(session: EpisodeSession, body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC answer to one POSTed message; None for a notification or a response (HTTP 202, no body)."""
    try:
        message = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        return error_response(None, JsonRpcError(PARSE_ERROR, f"parse error: {err}"))
    if isinstance(message, list):
        return error_response(None, JsonRpcError(INVALID_REQUEST, "batches are not supported"))
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return error_response(
            None, JsonRpcError(INVALID_REQUEST, 'not a JSON-RPC 2.0 message ("jsonrpc": "2.0")')
        )
    method = message.get("method")
    if "id" not in message:
        if method is None and ("result" in message or "error" in message):
            return (
                None  # a response to a request of ours: the gateway sends none, so there is nothing to match
            )
        if isinstance(method, str):
            return None  # a notification: nothing is answered
        return error_response(None, JsonRpcError(INVALID_REQUEST, "a request needs a method and an id"))
    request_id = message["id"]
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return error_response(None, JsonRpcError(INVALID_REQUEST, "the id must be a string or an integer"))
    if not isinstance(method, str):
        return error_response(request_id, JsonRpcError(INVALID_REQUEST, "the method must be a string"))
    params = message.get("params", {})
    if not isinstance(params, dict):
        return error_response(request_id, JsonRpcError(INVALID_PARAMS, "params must be an object"))
    try:
        result = await _result(session, method, params)
    except JsonRpcError as err:
        return error_response(request_id, err)
    return {"jsonrpc": "2.0", "id": request_id, "result": result}
