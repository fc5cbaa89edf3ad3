"""An OpenEnv WebSocket session as LOOP uses it: OpenEnv's generic client whose error replies keep their code
(`ServerReply`), the one-line texts made of such replies, and a probe of a server's session limit."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from openenv.core.generic_client import GenericEnvClient
from websockets.exceptions import ConnectionClosed

from loop_agents.envs.openenv.settings import OpenEnvSettings


class ServerReply(Exception):
    """An OpenEnv error reply (`{"type": "error", "data": {"code", "message", ...}}`), its code and details kept."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.code = str(data.get("code", "UNKNOWN"))
        super().__init__(f"{data.get('message', 'error')} (code: {self.code})")


class OpenEnvSession(GenericEnvClient):
    """OpenEnv's generic client, whose error replies raise `ServerReply` (OpenEnv's own raise a bare RuntimeError
    without the code), including the reply a server sends just before it closes the socket (a capacity refusal,
    which the plain client reports as `ConnectionClosedOK: received 1000 (OK)`)."""

    async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        try:
            await self._send(message)
            response = await self._receive()
        except ConnectionClosed:
            response = await self._last_words()
            if response is None:
                raise
        if response.get("type") == "error":
            raise ServerReply(response.get("data") or {})
        return response

    async def _last_words(self) -> dict[str, Any] | None:
        """The message the server sent before closing, if one is still buffered."""
        try:
            return json.loads(await asyncio.wait_for(self._ws.recv(), 1.0))
        except Exception:  # noqa: BLE001 - nothing buffered: the caller re-raises the close
            return None


def rejection_text(reply: ServerReply) -> str:
    """What the agent reads when the server's schema rejects its action: each field and why, in one line."""
    reasons = []
    for error in reply.data.get("errors") or []:
        where = ".".join(str(part) for part in error.get("loc", ()) if part not in ("data", "body"))
        reasons.append(
            f"{where}: {error.get('msg', 'invalid')}" if where else str(error.get("msg", "invalid"))
        )
    return f"Invalid action, rejected by the environment: {'; '.join(reasons) or reply.data.get('message')}"


def capacity_text(url: str, reply: ServerReply) -> str:
    data = reply.data
    return (
        f"OpenEnv server {url} is at capacity: {data.get('active_sessions', '?')} of {data.get('max_sessions', '?')} "
        "sessions in use (its max concurrent sessions); fewer episodes at once (env.concurrency) or a server with "
        "more sessions"
    )


async def session_limit(url: str, settings: OpenEnvSettings, sessions: int) -> int | None:
    """Open `sessions` WebSocket sessions at once; the server's session limit when it refuses one, else None."""

    async def one() -> int | None:
        client = OpenEnvSession(base_url=url, connect_timeout_s=settings.connect_timeout_s,
                                message_timeout_s=settings.message_timeout_s)  # fmt: skip
        try:
            await client.connect()
            await client._send_and_receive(
                {"type": "state"}
            )  # answered once the session's environment exists
            return None
        except ServerReply as reply:
            if reply.code == "CAPACITY_REACHED":
                return int(reply.data.get("max_sessions") or 0)
            return None  # an environment without `state` still gave this session one
        finally:
            await client.close()

    limits = [limit for limit in await asyncio.gather(*(one() for _ in range(sessions))) if limit is not None]
    return min(limits) if limits else None
