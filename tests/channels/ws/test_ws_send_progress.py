"""A WebSocket channel's send timeout bounds the time without progress, not the whole write.

A real WebSocket listener on loopback, and a hand-written client on a raw TCP socket with a small
receive buffer, so that most of a large frame waits in the server's channel, not in the kernel;
the client then reads it at its own pace. The send timeout is lowered so that a few MiB show it
within seconds: a 2 MiB frame read at about 1 MB/s takes longer than the timeout to write whole,
while each wait for room in the socket takes a small fraction of it.
"""

from __future__ import annotations

import base64
import json
import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

from channels import ListenOptions, MessageChannel, SendTimeout, parse_address

TIMEOUT = 20
SEND_TIMEOUT = 1.0  # seconds; the large message takes two or three to read
MESSAGE_BYTES = 2 * 1024 * 1024
BUFFER = 16 * 1024  # SO_RCVBUF of the client
PACED_READ = 16 * 1024  # bytes the client takes at a time ...
PACED_PAUSE = 0.015  # ... then this pause: at most about 1 MB/s, every piece read well in time
STOP_AFTER = 256 * 1024  # the client that stops: what it reads before it stops
MESSAGE = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "x" * MESSAGE_BYTES}}


@asynccontextmanager
async def slow_client() -> AsyncIterator[tuple[trio.SocketStream, MessageChannel]]:
    """``(client, server)``: a raw TCP client with a small receive buffer, past its upgrade, and
    the listener's channel for it with the lowered send timeout; both closed on exit."""
    listeners = await parse_address("ws://127.0.0.1:0/mcp").listen(ListenOptions())
    established = trio.Event()
    channels: list[MessageChannel] = []

    async def serve_one(incoming: object) -> None:
        async with incoming.establish() as channel:  # type: ignore[attr-defined]
            channel.send_timeout = SEND_TIMEOUT
            channels.append(channel)
            established.set()
            await trio.sleep_forever()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, serve_one, listeners)
            port = int(listeners[0].address.rsplit(":", 1)[1].split("/", 1)[0])
            raw = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER)  # before connecting: the window
            await raw.connect(("127.0.0.1", port))
            client = trio.SocketStream(raw)
            key = base64.b64encode(os.urandom(16)).decode()
            await client.send_all(
                (
                    f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                    f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
                ).encode()
            )
            head = bytearray()
            while not head.endswith(b"\r\n\r\n"):  # the 101, byte by byte: nothing of a frame yet
                head += await client.receive_some(1)
            assert head.startswith(b"HTTP/1.1 101"), head
            await established.wait()
            try:
                async with client:
                    yield client, channels[0]
            finally:
                nursery.cancel_scope.cancel()  # the listener, and the channel with it
    finally:
        for listener in listeners:
            await trio.aclose_forcefully(listener)


async def read_frame_paced(client: trio.SocketStream, stop_after: float = float("inf")) -> bytes:
    """Read one unmasked text frame at a steady pace; its payload (or stop after ``stop_after``
    bytes and return what came)."""
    data = bytearray()
    size = None
    while (size is None or len(data) < size) and len(data) < stop_after:
        chunk = await client.receive_some(PACED_READ)
        assert chunk, "the connection ended before the frame did"
        data += chunk
        if size is None and len(data) >= 10:
            assert data[1] == 127, "a frame of over 64 KiB has a 64-bit length"
            size = 10 + int.from_bytes(data[2:10], "big")
        await trio.sleep(PACED_PAUSE)  # the client's pace, not a synchronisation
    return bytes(data[10:])


async def test_a_client_reading_a_large_message_slowly_but_steadily_gets_it_whole_past_the_send_timeout() -> (
    None
):
    received: list[bytes] = []
    with trio.fail_after(TIMEOUT):
        async with slow_client() as (client, channel), trio.open_nursery() as nursery:

            async def read() -> None:
                received.append(await read_frame_paced(client))

            nursery.start_soon(read)
            await channel.send(MESSAGE)  # SendTimeout before the fix
    assert json.loads(received[0]) == MESSAGE


async def test_a_client_that_stops_reading_part_way_through_a_large_message_is_still_cut_after_the_send_timeout() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with slow_client() as (client, channel):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(read_frame_paced, client, STOP_AFTER)
                with pytest.raises(SendTimeout):
                    await channel.send(MESSAGE)
            with pytest.raises(trio.BrokenResourceError):  # part of a frame may be on the wire
                await channel.send({"jsonrpc": "2.0", "method": "notifications/message"})


def split_frames(data: bytes) -> list[bytes]:
    """The payloads of the unmasked frames in ``data``, which must end on a frame boundary."""
    payloads = []
    while data:
        size, start = data[1] & 0x7F, 2
        if size == 126:
            size, start = int.from_bytes(data[2:4], "big"), 4
        elif size == 127:
            size, start = int.from_bytes(data[2:10], "big"), 10
        assert data[0] == 0x81 and len(data) >= start + size  # final text frames, whole
        payloads.append(data[start : start + size])
        data = data[start + size :]
    return payloads


async def test_a_batch_mixing_large_and_small_messages_arrives_as_one_whole_frame_each_in_order() -> None:
    # Large payloads leave after the frames before them from where they lie (writev), small ones
    # are joined; the client reads at its pace, so most of it waits for room in the socket.
    batch = [
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"n": number, "t": "y" * size}}
        for number, size in enumerate([10, 300_000, 0, 70_000, 65_536, 20, 1_000_000])
    ]
    payload_sizes = [len(json.dumps(message, separators=(",", ":"))) for message in batch]
    expected = sum(size + (2 if size < 126 else 4 if size < 1 << 16 else 10) for size in payload_sizes)
    data = bytearray()
    with trio.fail_after(TIMEOUT):
        async with slow_client() as (client, channel), trio.open_nursery() as nursery:

            async def read() -> None:
                while len(data) < expected:
                    data.extend(await client.receive_some(PACED_READ))

            nursery.start_soon(read)
            await channel.send_many(batch)
    assert [json.loads(payload) for payload in split_frames(bytes(data))] == batch
