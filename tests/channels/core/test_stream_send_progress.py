"""A stream channel's send timeout bounds the time without progress, not the whole write.

Real TCP on loopback. The reading peer has a small receive buffer (and the channel's socket a
small send buffer), so that most of a large message waits in the channel, not in the kernel; the
peer then reads it at its own pace. The send timeout is lowered so that a few MiB show it within
seconds: a 2 MiB message read at about 1 MB/s takes longer than the timeout to write whole, while
each 64 KiB piece of it takes a small fraction of it.
"""

from __future__ import annotations

import json
import socket

import pytest
import trio

from channels import SendTimeout, StreamChannel

TIMEOUT = 20
SEND_TIMEOUT = 1.0  # seconds; the large message takes two or three to read
MESSAGE_BYTES = 2 * 1024 * 1024
BUFFER = 16 * 1024  # SO_RCVBUF of the reader, SO_SNDBUF of the channel's socket
PACED_READ = 16 * 1024  # bytes the reader takes at a time ...
PACED_PAUSE = 0.015  # ... then this pause: at most about 1 MB/s, every piece read well in time
STOP_AFTER = 256 * 1024  # the reader that stops: what it reads before it stops


async def slow_reader_pair() -> tuple[trio.SocketStream, trio.SocketStream]:
    """``(reader, writer)``: TCP on loopback, with small buffers on the reader's side."""
    listener = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    reader = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        await listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER)  # before connecting: the window
        await reader.connect(listener.getsockname())
        writer, _ = await listener.accept()
    finally:
        listener.close()
    writer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER)
    return trio.SocketStream(reader), trio.SocketStream(writer)


def large_message() -> dict[str, object]:
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "x" * MESSAGE_BYTES}}


async def read_paced(stream: trio.SocketStream, stop_after: float = float("inf")) -> bytes:
    """Read at a steady pace until a whole line came (or ``stop_after`` bytes: then stop reading)."""
    data = bytearray()
    while not data.endswith(b"\n") and len(data) < stop_after:
        chunk = await stream.receive_some(PACED_READ)
        assert chunk, "the connection ended before the message did"
        data += chunk
        await trio.sleep(PACED_PAUSE)  # the reader's pace, not a synchronisation
    return bytes(data)


async def test_a_peer_reading_a_large_message_slowly_but_steadily_gets_it_whole_past_the_send_timeout() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        reader, writer = await slow_reader_pair()
        channel = StreamChannel(writer, send_timeout=SEND_TIMEOUT)
        received: list[bytes] = []

        async def read() -> None:
            received.append(await read_paced(reader))

        async with channel, reader, trio.open_nursery() as nursery:
            nursery.start_soon(read)
            await channel.send(large_message())  # SendTimeout before the fix
    assert json.loads(received[0]) == large_message()


async def test_a_peer_that_stops_reading_part_way_through_a_large_message_is_still_cut_after_the_send_timeout() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        reader, writer = await slow_reader_pair()
        channel = StreamChannel(writer, send_timeout=SEND_TIMEOUT)
        async with channel, reader:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(read_paced, reader, STOP_AFTER)
                with pytest.raises(SendTimeout):
                    await channel.send(large_message())
            with pytest.raises(trio.BrokenResourceError):  # part of a line may be on the wire
                await channel.send({"jsonrpc": "2.0", "method": "notifications/message"})
