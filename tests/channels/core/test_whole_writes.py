"""A stream channel writes a batch without waiting only where it goes whole or not at all.

``StreamChannel.send_encoded_nowait`` (``fdio.write_whole_now``) lets a task that must not leave
part of a line behind if it is cancelled (a shared child's client, ``bridge/_shared/link.py``)
write without a trip through the scheduler: a pipe takes a write of up to ``PIPE_BUF`` bytes whole
or fails with ``EAGAIN`` (pipe(7)). Real pipes and a real socket pair.
"""

from __future__ import annotations

import os
import select
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from channels import StreamChannel

TIMEOUT = 10
CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {}}}


@asynccontextmanager
async def _pipe() -> AsyncIterator[tuple[int, StreamChannel]]:
    """``(read_fd, channel)``: a channel writing to a fresh pipe (non-blocking, as trio makes it)."""
    read_fd, write_fd = os.pipe()
    channel = StreamChannel(trio.lowlevel.FdStream(write_fd))
    try:
        yield read_fd, channel
    finally:
        await channel.aclose()
        os.close(read_fd)


def _fill(channel: StreamChannel) -> int:
    """Fill the channel's pipe to the last byte; how many bytes that took."""
    fd = channel.stream.fileno()  # type: ignore[attr-defined]  # an FdStream
    filled = 0
    while True:
        try:
            filled += os.write(fd, b"x" * 4096)
        except BlockingIOError:
            try:  # the last few bytes: a pipe takes a short write of what still fits
                filled += os.write(fd, b"x")
                continue
            except BlockingIOError:
                return filled


def _read_all(fd: int, size: int) -> bytes:
    data = b""
    while len(data) < size:
        data += os.read(fd, size - len(data))
    return data


async def test_a_batch_a_pipe_has_room_for_is_written_whole_at_once() -> None:
    with trio.fail_after(TIMEOUT):
        async with _pipe() as (read_fd, channel):
            data = channel.encode_batch([CALL, {**CALL, "id": 2}])
            assert channel.send_encoded_nowait(data)
            assert channel.bytes_sent == len(data)
            assert _read_all(read_fd, len(data)) == data


async def test_a_full_pipe_gets_none_of_a_batch_and_send_encoded_writes_it_whole_once_read() -> None:
    with trio.fail_after(TIMEOUT):
        async with _pipe() as (read_fd, channel):
            filled = _fill(channel)
            # At most a little room: a pipe takes a write this small whole or not at all.
            os.read(read_fd, 10)
            data = channel.encode_batch([CALL])
            assert len(data) > 10
            assert not channel.send_encoded_nowait(data)
            assert channel.bytes_sent == 0
            async with trio.open_nursery() as nursery:
                nursery.start_soon(channel.send_encoded, data)
                await trio.testing.wait_all_tasks_blocked()
                received = await trio.to_thread.run_sync(_read_all, read_fd, filled - 10 + len(data))
            assert received == b"x" * (filled - 10) + data
            assert channel.bytes_sent == len(data)


async def test_a_batch_over_pipe_buf_is_not_written_without_waiting_even_to_an_empty_pipe() -> None:
    with trio.fail_after(TIMEOUT):
        async with _pipe() as (read_fd, channel):
            text = "y" * select.PIPE_BUF
            data = channel.encode_batch([{**CALL, "params": {"name": "echo", "arguments": {"text": text}}}])
            assert not channel.send_encoded_nowait(data)
            await channel.send_encoded(data)
            assert _read_all(read_fd, len(data)) == data  # nothing before it: the first try wrote none


async def test_a_socket_is_not_written_without_waiting_since_it_may_take_part_of_a_batch() -> None:
    with trio.fail_after(TIMEOUT):
        ours, theirs = trio.socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        channel = StreamChannel(trio.SocketStream(ours))
        try:
            assert not channel.send_encoded_nowait(channel.encode_batch([CALL]))
            assert channel.bytes_sent == 0
        finally:
            await channel.aclose()
            theirs.close()


async def test_a_closed_channel_writes_nothing_without_waiting() -> None:
    with trio.fail_after(TIMEOUT):
        async with _pipe() as (_, channel):
            data = channel.encode_batch([CALL])
            await channel.aclose()
            assert not channel.send_encoded_nowait(data)
