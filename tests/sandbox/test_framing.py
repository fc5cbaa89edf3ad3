"""The parent's reader of a sandboxed child's channel: every bad message is one ChannelError subclass."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from loop_agents.sandbox import framing


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def raw(sock: socket.socket, data: bytes) -> None:
    sock.sendall(struct.pack("!I", len(data)) + data)


def test_round_trip(pair):
    a, b = pair
    framing.send(a, {"output": "héllo", "n": [1, 2]})
    assert framing.receive(b, 1000) == {"output": "héllo", "n": [1, 2]}


def test_oversized_message_is_refused_before_reading_it(pair):
    a, b = pair
    raw(a, b"x" * 2000)
    with pytest.raises(framing.ChannelTooLarge) as error:
        framing.receive(b, 1000)
    assert error.value.size == 2000


@pytest.mark.parametrize(
    "data", [b"{not json", b"\xff\xfe", b"[" * 100_000], ids=["garbage", "bad_utf8", "deep"]
)
def test_garbage_is_a_channel_error(pair, data):
    a, b = pair
    raw(a, data)
    with pytest.raises(framing.ChannelError, match="garbage"):
        framing.receive(b, 10**6)


def test_deadline_and_close(pair):
    a, b = pair
    began = time.monotonic()
    with pytest.raises(framing.ChannelTimeout):
        framing.receive(b, 1000, time.monotonic() + 0.2)
    assert 0.15 < time.monotonic() - began < 2
    a.sendall(struct.pack("!I", 10) + b"12")  # a partial message, then the peer dies
    a.close()
    with pytest.raises(framing.ChannelClosed):
        framing.receive(b, 1000, time.monotonic() + 2)
