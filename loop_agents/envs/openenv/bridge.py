"""The channel between OpenEnv's server (in `.venv-openenv`) and our family host (in the main venv).

One connected socket pair, made by `serve` before it starts OpenEnv's server as its child: no port, so nothing but
that child can reach the host. Messages are JSON lines. A request is `{"id", "op", "args"}`; its reply is
`{"id", "ok": true, "result"}` or `{"id", "ok": false, "error": "<one line>", "failure": bool}` (`failure`: the
environment itself broke, as `EnvironmentFailure` says; else the request was refused). Requests run concurrently
(one OpenEnv session's requests come one after another; sessions overlap).

Standard library only: both venvs import this module.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
from collections.abc import Awaitable, Callable
from typing import Any

LINE_LIMIT = 256 * 1024 * 1024  # one message (an AppWorld observation can be megabytes)


class BridgeError(RuntimeError):
    """The host refused a request (`failure` False) or its environment failed (`failure` True)."""

    def __init__(self, message: str, failure: bool) -> None:
        super().__init__(message)
        self.failure = failure


class BridgeClosed(ConnectionError):
    """The host is gone (its process ended or closed the channel)."""


async def open_channel(sock: socket.socket) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(sock=sock, limit=LINE_LIMIT)


def _encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":"), default=str).encode() + b"\n"


class BridgeClient:
    """OpenEnv's side: `await request(op, **args)` returns the host's result or raises BridgeError/BridgeClosed."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._closed: BaseException | None = None
        self._reading = asyncio.ensure_future(self._read_replies())

    async def request(self, op: str, **args: Any) -> Any:
        if self._closed is not None:
            raise BridgeClosed(f"the family host is gone ({self._closed})")
        request_id = next(self._ids)
        reply = asyncio.get_running_loop().create_future()
        self._pending[request_id] = reply
        try:
            self.writer.write(_encode({"id": request_id, "op": op, "args": args}))
            await self.writer.drain()
            return await reply
        finally:
            self._pending.pop(request_id, None)

    async def _read_replies(self) -> None:
        try:
            while line := await self.reader.readline():
                message = json.loads(line)
                reply = self._pending.get(message.get("id"))
                if reply is None or reply.done():
                    continue
                if message.get("ok"):
                    reply.set_result(message.get("result"))
                else:
                    reply.set_exception(BridgeError(str(message.get("error")), bool(message.get("failure"))))
            self._closed = EOFError("channel closed")
        except Exception as err:  # noqa: BLE001 - whatever ended the channel ends every request waiting on it
            self._closed = err
        for reply in self._pending.values():
            if not reply.done():
                reply.set_exception(BridgeClosed(f"the family host is gone ({self._closed})"))

    @property
    def closed(self) -> asyncio.Future:
        """Done when the channel has closed."""
        return self._reading


async def serve_requests(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    handle: Callable[[str, dict[str, Any]], Awaitable[Any]],
    is_failure: Callable[[BaseException], bool],
) -> None:
    """The host's side: answer every request with `handle(op, args)` until the channel closes."""
    lock = asyncio.Lock()
    tasks: set[asyncio.Task] = set()

    async def answer(request: dict[str, Any]) -> None:
        try:
            reply = {
                "id": request.get("id"),
                "ok": True,
                "result": await handle(request["op"], request["args"]),
            }
        except Exception as err:  # noqa: BLE001 - every error is a reply; the host goes on serving
            text = " ".join(str(err).split()) or type(err).__name__
            reply = {"id": request.get("id"), "ok": False, "error": text, "failure": is_failure(err)}
        async with lock:
            writer.write(_encode(reply))
            await writer.drain()

    while line := await reader.readline():
        task = asyncio.ensure_future(answer(json.loads(line)))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    for task in list(tasks):
        task.cancel()
