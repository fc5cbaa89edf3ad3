"""The gateway's HTTP server: OpenAI chat completions and the episode's tools, on 127.0.0.1, one key per episode.

    GET  /v1/models              the one model the gateway serves ("policy"; any `model` a request names is it)
    POST /v1/chat/completions    completions.py (with `stream: true`: server-sent events as the reply is sampled,
                                 streaming.py, then `data: [DONE]`)
    GET  /task                   the episode's task (task_id, sample_index, messages, prompt)
    GET  /tools                  the episode's tools, OpenAI function schemas
    POST /tools/{name}           one tool call; the body is the arguments object (tool_calls.py)
    POST /mcp                    the same tools over MCP (Streamable HTTP, JSON answers; mcp.py); GET: 405

Every route needs `Authorization: Bearer <key>` of a running episode; the key selects the episode's session and
nothing else is reachable with it (no listing, no other session's calls). A key is revoked when its episode ends.
One server per rollout worker, on the worker's event loop.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from aiohttp import web

from loop_agents.gateway import mcp
from loop_agents.gateway.completions import chat_completion
from loop_agents.gateway.messages import RequestError
from loop_agents.gateway.session import EpisodeSession
from loop_agents.gateway.tool_calls import call_tool, tool_schemas
from loop_agents.rollout.trajectory import FinishReason

log = logging.getLogger(__name__)
MAX_BODY_BYTES = 32 * 2**20  # a long episode's whole history comes back with every call
MODEL_NAME = "policy"
SESSION = web.RequestKey("session", EpisodeSession)


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _error_body(message: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


def _error(status: int, message: str, code: str) -> web.Response:
    return web.json_response(_error_body(message, code), status=status)


INTERNAL_ERROR = "internal error of the gateway; the episode is over"


def _end_on_internal_error(request: web.Request, err: Exception, when: str = "") -> None:
    """Our bug: the episode cannot be trusted any more; it is lost (retried), not scored."""
    log.exception("gateway request %s failed%s", request.path, when)
    request[SESSION].end(FinishReason.ENV_ERROR, f"gateway internal error {type(err).__name__}: {err}")


class GatewayServer:
    """The server and its sessions (by the SHA-256 of their keys)."""

    def __init__(self) -> None:
        self._sessions: dict[str, EpisodeSession] = {}
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> str:
        """Bind 127.0.0.1 on a free port (once); returns the root URL."""
        if self._runner is None:
            app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[self._authorize])
            app.router.add_get("/v1/models", self._models)
            app.router.add_post("/v1/chat/completions", self._completions)
            app.router.add_get("/task", self._task)
            app.router.add_get("/tools", self._tools)
            app.router.add_post("/tools/{name}", self._tool_call)
            app.router.add_post("/mcp", self._mcp)  # other methods: aiohttp's 405 (no server-sent stream)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            self._runner = runner
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def open(self, session: EpisodeSession) -> None:
        self._sessions[_digest(session.key)] = session

    def close(self, session: EpisodeSession) -> None:
        self._sessions.pop(_digest(session.key), None)

    @web.middleware
    async def _authorize(self, request: web.Request, handler: Any) -> web.StreamResponse:
        header = request.headers.get("Authorization", "")
        session = self._sessions.get(_digest(header[7:])) if header.startswith("Bearer ") else None
        if session is None:
            return _error(401, "no running episode has this key", "invalid_api_key")
        request[SESSION] = session
        try:
            return await handler(request)
        except RequestError as err:
            return _error(err.status, str(err), err.code)
        except web.HTTPException:
            raise
        except Exception as err:
            _end_on_internal_error(request, err)
            return _error(500, INTERNAL_ERROR, "internal_error")

    async def _body(self, request: web.Request) -> bytes:
        try:
            return await request.read()
        except ConnectionError:
            # the program hung up before its request was read (it crashed, was stopped at the episode's end, or
            # chose to): its side, not ours; the episode goes on and is scored when the program is gone
            raise RequestError(
                400, "the connection closed before the request was read", "client_closed"
            ) from None

    async def _json(self, request: web.Request) -> Any:
        body = await self._body(request)
        try:
            return json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise RequestError(400, f"the body is not JSON: {err}") from None

    async def _models(self, request: web.Request) -> web.Response:
        model = {"id": MODEL_NAME, "object": "model", "created": 0, "owned_by": "loop_agents"}
        return web.json_response({"object": "list", "data": [model]})

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = await self._json(request)
        if not isinstance(body, dict):
            raise RequestError(400, "the body must be a JSON object")
        if not body.get("stream"):
            return web.json_response(await chat_completion(request[SESSION], body))
        events = _EventStream(request)
        try:
            await chat_completion(request[SESSION], body, events.send)
        except RequestError as err:
            if events.response is None:  # refused before anything was sent: an ordinary error response
                raise
            await events.send(_error_body(str(err), err.code))
        except Exception as err:
            if events.response is None:
                raise
            _end_on_internal_error(request, err, " while streaming")
            await events.send({"error": {"message": INTERNAL_ERROR}})
        return await events.close()

    async def _task(self, request: web.Request) -> web.Response:
        return web.json_response(request[SESSION].task)

    async def _tools(self, request: web.Request) -> web.Response:
        return web.json_response({"tools": tool_schemas(request[SESSION])})

    async def _tool_call(self, request: web.Request) -> web.Response:
        arguments = await self._json(request)
        result = await call_tool(request[SESSION], request.match_info["name"], arguments)
        return web.json_response(result)

    async def _mcp(self, request: web.Request) -> web.Response:
        status, reply = await mcp.handle_post(
            request[SESSION],
            await self._body(request),
            request.headers.get("Origin"),
            request.headers.get("MCP-Protocol-Version"),
        )
        return web.Response(status=status) if reply is None else web.json_response(reply, status=status)


class _EventStream:
    """A streamed reply's server-sent events; the response starts with the first event, so a request refused
    before it gets an ordinary HTTP error."""

    def __init__(self, request: web.Request) -> None:
        self.request = request
        self.response: web.StreamResponse | None = None

    async def send(self, event: dict[str, Any]) -> None:
        if self.response is None:
            self.response = web.StreamResponse(
                headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
            )
            await self.response.prepare(self.request)
        await self.response.write(f"data: {json.dumps(event)}\n\n".encode())

    async def close(self) -> web.StreamResponse:
        assert self.response is not None  # a streamed reply always sends its finish chunk
        try:
            await self.response.write(b"data: [DONE]\n\n")
            await self.response.write_eof()
        except ConnectionError:  # the program went away; its call was recorded all the same
            pass
        return self.response
