"""A large WebSocket frame, read into a buffer of its own (channels/_ws/receiver.py).

A frame the library reads (the start of a fragmented message) must be read to its end, and whatever
follows it in the same read must be judged with the library's view of it.
"""

from __future__ import annotations

import socket

import pytest
import trio
import trio.testing
from test_websocket import CLOSE, TEXT, client_frame
from websockets.protocol import State
from websockets.server import ServerProtocol

from channels._core.channel import PeerInfo
from channels._ws.channel import WebSocketChannel

TIMEOUT = 10  # seconds for one example over a socket pair


def server_channel(sock: socket.socket) -> tuple[WebSocketChannel, ServerProtocol]:
    """A server-side channel past its opening handshake over one end of a socket pair, and its
    library protocol, reading frames from the start (its parser restarted in the OPEN state)."""
    protocol = ServerProtocol()
    protocol.state = State.OPEN
    protocol.parser = protocol.parse()
    next(protocol.parser)
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
    return WebSocketChannel(stream, protocol, PeerInfo("ws")), protocol


async def test_a_text_frame_right_behind_a_large_frame_that_begins_a_fragmented_message_is_refused_with_1002() -> (
    None
):
    # The large frame's last read also brings the next frame: the library has just read the first
    # fragment, so a whole text frame now breaks RFC 6455 §5.4 and must not pass for a message.
    first_fragment = client_frame(TEXT, b'{"jsonrpc":"2.0","id":1,' + b" " * 100_000, fin=False)
    text_frame = client_frame(TEXT, b'{"jsonrpc":"2.0","id":2,"method":"smuggled"}')
    ours, theirs = socket.socketpair()
    channel, _ = server_channel(ours)
    with trio.fail_after(TIMEOUT):
        await trio.to_thread.run_sync(theirs.sendall, first_fragment + text_frame)
        with pytest.raises(trio.BrokenResourceError):
            await channel.receive()
        await channel.aclose()
        answer = await trio.to_thread.run_sync(theirs.recv, 1024)
    theirs.close()
    assert answer[0] & 0x0F == CLOSE
    assert int.from_bytes(answer[2:4], "big") == 1002
