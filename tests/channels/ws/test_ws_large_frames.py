"""A large WebSocket frame, read into a buffer of its own and unmasked there (channels/_ws/receiver.py).

A simple text frame over one read's size is unmasked in place as each read brings it in, piece by
piece, whatever the reads' sizes: its text must come out exactly as sent. A frame the library reads
instead (the start of a fragmented message, or one that finishes arriving after this side began
closing) must be read to its end, and whatever follows it in the same read must be judged with the
library's view of it.
"""

from __future__ import annotations

import itertools
import json
import socket

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st
from test_websocket import CLOSE, TEXT, client_frame
from test_wsframes import masked_frame
from websockets.protocol import State
from websockets.server import ServerProtocol

from channels._core.channel import PeerInfo
from channels._ws.channel import WebSocketChannel

TIMEOUT = 10  # seconds for one example over a socket pair
# Sizes around one read (64 KiB) and well past it, and a mask key whose XOR with ASCII text is
# not UTF-8 (0x9a ^ "x" is a 3-byte sequence's lead byte): a frame left masked cannot pass for text.
SIZES = st.sampled_from([65_536 - 30, 65_536 + 7, 200_001, 700_003])
MASK = b"\x9a\x01\xfe\x42"


def server_channel(sock: socket.socket) -> tuple[WebSocketChannel, ServerProtocol]:
    """A server-side channel past its opening handshake over one end of a socket pair, and its
    library protocol, reading frames from the start (its parser restarted in the OPEN state)."""
    protocol = ServerProtocol()
    protocol.state = State.OPEN
    protocol.parser = protocol.parse()
    next(protocol.parser)
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
    return WebSocketChannel(stream, protocol, PeerInfo("ws")), protocol


def request_text(size: int, alphabet: str) -> bytes:
    """A JSON-RPC request over ``size`` bytes long, its text ``alphabet`` repeated (maybe not ASCII)."""
    text = alphabet * (size // len(alphabet.encode()) + 1)
    return json.dumps(
        {"jsonrpc": "2.0", "id": 7, "method": "echo", "params": {"t": text}}, ensure_ascii=False
    ).encode()


@settings(max_examples=25, deadline=None)
@given(
    size=SIZES,
    alphabet=st.sampled_from(["x", "abcdefg", "é", "日本語", "a😀"]),
    cuts=st.lists(st.integers(min_value=1, max_value=800_000), max_size=6),
)
def test_a_large_text_frame_is_delivered_exactly_as_sent_whatever_the_reads_that_bring_it_in(
    size: int, alphabet: str, cuts: list[int]
) -> None:
    payload = request_text(size, alphabet)
    data = masked_frame(payload, MASK) + client_frame(TEXT, b'{"jsonrpc":"2.0","id":8,"method":"after"}')
    bounds = [0, *sorted(cut for cut in cuts if cut < len(data)), len(data)]

    async def main() -> None:
        ours, theirs = socket.socketpair()
        channel, _ = server_channel(ours)

        async def write() -> None:
            for start, end in itertools.pairwise(bounds):
                await trio.testing.wait_all_tasks_blocked()  # the channel has read what it could
                await trio.to_thread.run_sync(theirs.sendall, data[start:end])

        with trio.fail_after(TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(write)
                first = await channel.receive()
                second = await channel.receive()
            theirs.close()
            await channel.aclose()
        assert first == json.loads(payload)
        assert second["id"] == 8

    trio.run(main)


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


async def test_a_large_frame_half_read_when_its_channel_is_closed_is_read_past_to_the_peers_close_frame() -> (
    None
):
    # The owner closes while the frame is half in (and half unmasked): the closing handshake reads
    # the rest, and the library must find the frame's end and the peer's close frame behind it.
    payload = request_text(300_000, "x")
    frame = masked_frame(payload, MASK)
    close = client_frame(CLOSE, (1000).to_bytes(2, "big"))
    ours, theirs = socket.socketpair()
    channel, protocol = server_channel(ours)
    with trio.fail_after(TIMEOUT):
        await trio.to_thread.run_sync(theirs.sendall, frame[:150_000])
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(channel.receive)
                await trio.testing.wait_all_tasks_blocked()  # the first half is read, and unmasked
                scope.cancel()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(channel.aclose)
            await trio.to_thread.run_sync(theirs.sendall, frame[150_000:] + close)
    theirs.close()
    assert protocol.parser_exc is None
    assert protocol.close_rcvd is not None and protocol.close_rcvd.code == 1000
