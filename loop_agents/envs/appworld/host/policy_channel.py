"""The API process's end of the policy's channel: it never waits on the policy and holds at most one request.

The policy process writes length-prefixed JSON requests (sandbox/framing.py's format) and reads the replies.
This end is non-blocking and bounded, so nothing the policy does with its end can stop the API process:

    reading   only while a cell runs, only while no reply is waiting to be flushed and no whole request is
              buffered (so at most one request plus one read chunk is held); a frame that announces more than
              `max_request` bytes gets an error reply and its bytes are skipped as they arrive (no resync
              needed); a frame that is not JSON gets an error reply
    writing   a reply goes out as far as the kernel takes it; the rest waits until the socket is writable,
              and meanwhile no further request is read (back-pressure: a policy that never reads its replies
              only stops itself)
    closing   end of file or a send error (the policy closed or shut down its end) closes this end for good,
              as does the API process once the episode is over (a budget spent): `closed` says why
    a cell's end  the requests the policy left (not read yet, or a partial frame) are dropped and counted, so no
              work of one cell is done after it, while the policy is stopped
"""

from __future__ import annotations

import errno
import json
import socket
import struct
from typing import Any

_HEADER = struct.Struct("!I")
_CHUNK = 64 * 1024


class Malformed:
    """A frame that was not a request: the error reply it gets."""

    def __init__(self, reply: dict[str, Any]) -> None:
        self.reply = reply


class PolicyChannel:
    def __init__(self, sock: socket.socket, max_request: int) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.max_request = max_request
        self.inbox = bytearray()
        self.outbox = bytearray()
        self.skip = 0  # bytes still to discard of an oversized frame
        self.closed = ""  # why this end is closed ("" while open)
        self.dropped_bytes = 0  # left by the policy at a cell's end

    def fileno(self) -> int:
        return self.sock.fileno()

    def wants_read(self) -> bool:
        return not self.closed and not self.outbox and self.next_frame() is None

    def wants_write(self) -> bool:
        return not self.closed and bool(self.outbox)

    def fill(self) -> None:
        """Reads what the socket holds now (one chunk), discarding the rest of an oversized frame."""
        try:
            data = self.sock.recv(_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:
            self.close(f"receive failed: {errno.errorcode.get(error.errno, error.errno)}")
            return
        if not data:
            self.close("the policy closed its end")
            return
        if self.skip:
            taken = min(self.skip, len(data))
            self.skip -= taken
            data = data[taken:]
        self.inbox += data

    def next_frame(self) -> Any:
        """The next whole request (a decoded message, or `Malformed`), still in the inbox; None if none yet."""
        if self.skip or len(self.inbox) < _HEADER.size:
            return None
        (size,) = _HEADER.unpack_from(self.inbox)
        if size > self.max_request:
            return Malformed(
                {"status": 413, "text": json.dumps({"message": f"Request of {size} bytes is too large."})}
            )
        if len(self.inbox) < _HEADER.size + size:
            return None
        try:
            return json.loads(bytes(self.inbox[_HEADER.size : _HEADER.size + size]))
        except (ValueError, RecursionError):
            return Malformed({"status": 400, "text": json.dumps({"message": "Malformed request."})})

    def take(self) -> Any:
        """Removes and returns the next whole request (see `next_frame`), or None."""
        frame = self.next_frame()
        if frame is None:
            return None
        (size,) = _HEADER.unpack_from(self.inbox)
        have = len(self.inbox) - _HEADER.size
        if have >= size:
            del self.inbox[: _HEADER.size + size]
        else:  # only an oversized frame can be taken before all of it arrived
            self.skip = size - have
            self.inbox.clear()
        return frame

    def reply(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode()
        self.outbox += _HEADER.pack(len(data)) + data
        self.flush()

    def flush(self) -> None:
        """Sends as much of the outbox as the kernel takes now."""
        while self.outbox and not self.closed:
            try:
                sent = self.sock.send(self.outbox)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:  # EPIPE, ECONNRESET: the policy shut down or closed its end
                self.close(f"send failed: {errno.errorcode.get(error.errno, error.errno)}")
                return
            del self.outbox[:sent]

    def end_cell(self) -> int:
        """Drops the requests the policy left on the channel at a cell's end; returns how many bytes that was.

        The one reply still waiting (the policy did not read its socket) stays, to be flushed when the next cell
        runs: dropping part of a frame would garble the stream; the policy's transport skips stale replies."""
        dropped = len(self.inbox) + self.skip
        self.inbox.clear()
        self.skip = 0
        while not self.closed:
            try:
                data = self.sock.recv(_CHUNK)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as error:
                self.close(f"receive failed: {errno.errorcode.get(error.errno, error.errno)}")
                break
            if not data:
                self.close("the policy closed its end")
                break
            dropped += len(data)
        self.dropped_bytes += dropped
        return dropped

    def close(self, why: str) -> None:
        if not self.closed:
            self.closed = why
            self.inbox.clear()
            self.outbox.clear()
            self.sock.close()
