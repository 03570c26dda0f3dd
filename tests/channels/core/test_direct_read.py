"""channels._core.fdio.receive_some: the channels' direct read of a plain socket or pipe."""

from __future__ import annotations

import socket

import pytest
import trio
import trio.testing

from channels._core.fdio import receive_fd_getter, receive_some

TIMEOUT = 5  # seconds; loopback socket pairs only


async def test_a_direct_read_that_finds_bytes_waiting_still_lets_other_tasks_run() -> None:
    ours, theirs = socket.socketpair()  # theirs stays a plain socket: its sends never yield
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
    turns = 0

    async def other_task() -> None:
        nonlocal turns
        while True:
            await trio.lowlevel.checkpoint()
            turns += 1

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(other_task)
            for _ in range(100):  # each read finds its byte already there: it never waits
                theirs.send(b"x")
                assert await receive_some(stream, receive_fd_getter(stream)) == b"x"
            nursery.cancel_scope.cancel()
    assert turns > 0
    theirs.close()
    await stream.aclose()


async def test_closing_the_stream_wakes_a_direct_read_blocked_on_it() -> None:
    ours, theirs = trio.socket.socketpair()
    stream = trio.SocketStream(ours)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:

            async def read_expecting_closed() -> None:
                with pytest.raises(trio.ClosedResourceError):
                    await receive_some(stream, receive_fd_getter(stream))

            nursery.start_soon(read_expecting_closed)
            await trio.testing.wait_all_tasks_blocked()
            await stream.aclose()
    theirs.close()


async def test_a_direct_read_of_a_closed_stream_raises_closed_resource_error() -> None:
    ours, theirs = trio.socket.socketpair()
    stream = trio.SocketStream(ours)
    await stream.aclose()
    with trio.fail_after(TIMEOUT), pytest.raises(trio.ClosedResourceError):
        await receive_some(stream, receive_fd_getter(stream))
    theirs.close()


async def test_a_reset_connection_makes_a_direct_read_raise_broken_resource_error() -> None:
    with trio.fail_after(TIMEOUT):
        listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
        port = listener.socket.getsockname()[1]
        client = await trio.open_tcp_stream("127.0.0.1", port)
        server = await listener.accept()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        await client.aclose()  # linger 0: the close is a reset (RST)
        with pytest.raises(trio.BrokenResourceError):
            await receive_some(server, receive_fd_getter(server))
        await server.aclose()
        await listener.aclose()


async def test_a_stream_without_a_plain_fd_is_read_through_its_own_receive_some() -> None:
    left, right = trio.testing.memory_stream_pair()
    assert receive_fd_getter(left) is None
    with trio.fail_after(TIMEOUT):
        await right.send_all(b"hello")
        assert await receive_some(left, None) == b"hello"


async def test_a_read_told_to_wait_first_returns_bytes_already_there_and_those_sent_later() -> None:
    ours, theirs = socket.socketpair()
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
    fd = receive_fd_getter(stream)
    with trio.fail_after(TIMEOUT):
        theirs.send(b"already there")
        assert await receive_some(stream, fd, wait_first=True) == b"already there"
        async with trio.open_nursery() as nursery:

            async def send_later() -> None:
                await trio.testing.wait_all_tasks_blocked()
                theirs.send(b"sent later")

            nursery.start_soon(send_later)
            assert await receive_some(stream, fd, wait_first=True) == b"sent later"
        theirs.close()
        assert await receive_some(stream, fd, wait_first=True) == b""
    await stream.aclose()


async def test_a_channel_whose_last_read_was_short_waits_for_bytes_instead_of_reading_in_vain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A short read emptied the kernel's buffer: the next read waits for readability first, so a
    # relay that keeps up with its peer makes no read that fails with EAGAIN (docs/design.md §5.2).
    import os

    from channels import StreamChannel

    reads: list[int] = []
    read = os.read

    def counted_read(fd: int, size: int) -> bytes:
        reads.append(fd)
        return read(fd, size)

    ours, theirs = socket.socketpair()
    channel = StreamChannel(trio.SocketStream(trio.socket.from_stdlib_socket(ours)))
    monkeypatch.setattr(os, "read", counted_read)
    with trio.fail_after(TIMEOUT):
        theirs.send(b'{"jsonrpc":"2.0","method":"first"}\n')
        assert (await channel.receive())["method"] == "first"
        assert len(reads) == 1
        async with trio.open_nursery() as nursery:

            async def send_later() -> None:
                await trio.testing.wait_all_tasks_blocked()
                theirs.send(b'{"jsonrpc":"2.0","method":"second"}\n')

            nursery.start_soon(send_later)
            assert (await channel.receive())["method"] == "second"
        assert len(reads) == 2  # one read per message: none came back empty-handed
        theirs.close()
        with pytest.raises(trio.EndOfChannel):
            await channel.receive()
    await channel.aclose()
