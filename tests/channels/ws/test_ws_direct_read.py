"""A WebSocket channel's reads of frames (channels/_ws/receiver.py) never come back empty-handed.

As for the newline channels (tests/channels/core/test_direct_read.py): a read that returned less than
it asked for emptied the kernel's buffer, so the next one waits for bytes before reading.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import trio
import trio.testing
from test_websocket import TEXT, client_frame
from websockets.protocol import State
from websockets.server import ServerProtocol

from channels._core.channel import PeerInfo
from channels._ws.channel import WebSocketChannel

TIMEOUT = 10  # seconds for one test over a socket pair


def message(number: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": number, "method": "echo"}).encode()


@contextmanager
def counted_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[bool]]]:
    """Record each os.read and os.readv the channel makes: True for one that failed with EAGAIN."""
    calls: dict[str, list[bool]] = {"read": [], "readv": []}

    def counted(name: str, real: Callable[[int, Any], Any]) -> Callable[[int, Any], Any]:
        def call(fd: int, arg: Any) -> Any:
            try:
                result = real(fd, arg)
            except BlockingIOError:
                calls[name].append(True)
                raise
            calls[name].append(False)
            return result

        return call

    monkeypatch.setattr(os, "read", counted("read", os.read))
    monkeypatch.setattr(os, "readv", counted("readv", os.readv))
    yield calls
    monkeypatch.undo()


def server_channel(sock: socket.socket) -> WebSocketChannel:
    """A server-side channel past its opening handshake, over one end of a socket pair."""
    protocol = ServerProtocol()
    protocol.state = State.OPEN
    return WebSocketChannel(trio.SocketStream(trio.socket.from_stdlib_socket(sock)), protocol, PeerInfo("ws"))


async def send_once_blocked(theirs: socket.socket, data: bytes) -> None:
    await trio.testing.wait_all_tasks_blocked()  # the channel is waiting for bytes
    theirs.sendall(data)


async def test_a_websocket_channel_whose_last_read_was_short_waits_for_bytes_instead_of_reading_in_vain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ours, theirs = socket.socketpair()
    channel = server_channel(ours)
    with trio.fail_after(TIMEOUT), counted_reads(monkeypatch) as calls:
        theirs.sendall(client_frame(TEXT, message(1)))
        assert (await channel.receive())["id"] == 1
        async with trio.open_nursery() as nursery:
            nursery.start_soon(send_once_blocked, theirs, client_frame(TEXT, message(2)))
            assert (await channel.receive())["id"] == 2
        assert calls == {"read": [False, False], "readv": []}  # one read per message, none in vain
    theirs.close()
    with trio.fail_after(TIMEOUT):
        with pytest.raises(trio.BrokenResourceError):  # the end of the stream without a close frame
            await channel.receive()
        await channel.aclose()
