"""Length-prefixed JSON messages over a socket: 4-byte big-endian length, then UTF-8 JSON.

The parent reads what a sandboxed child sends, so reading is defensive: a deadline, a size cap,
and JSON only (never pickle). Every failure is a ChannelError subclass naming what went wrong.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import time
from typing import Any

_HEADER = struct.Struct("!I")


class ChannelError(RuntimeError):
    """The peer closed, timed out, sent too much or sent garbage."""


class ChannelClosed(ChannelError):
    pass


class ChannelTimeout(ChannelError):
    pass


class ChannelTooLarge(ChannelError):
    def __init__(self, size: int) -> None:
        super().__init__(f"message of {size} bytes")
        self.size = size


def send(sock: socket.socket, message: Any) -> None:
    data = json.dumps(message).encode()
    sock.sendall(_HEADER.pack(len(data)) + data)


def _clock() -> float:
    """CLOCK_MONOTONIC, read so that freezegun (which an open AppWorld world starts) cannot stop it."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def _read_exactly(sock: socket.socket, size: int, deadline: float | None) -> bytes:
    chunks, remaining = [], size
    while remaining:
        if deadline is not None:
            left = deadline - _clock()
            if left <= 0 or not select.select([sock], [], [], left)[0]:
                raise ChannelTimeout("no reply before the deadline")
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            raise ChannelClosed("the peer closed the channel")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def receive(sock: socket.socket, max_bytes: int, deadline: float | None = None) -> Any:
    """The next message; `deadline` is a CLOCK_MONOTONIC value (`time.monotonic()` where no world froze it;
    None = wait for ever)."""
    (size,) = _HEADER.unpack(_read_exactly(sock, _HEADER.size, deadline))
    if size > max_bytes:
        raise ChannelTooLarge(size)
    try:
        return json.loads(_read_exactly(sock, size, deadline))
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        raise ChannelError(f"garbage on the channel: {error}") from error
