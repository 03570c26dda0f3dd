"""TlsSocketStream: a TLS listener's connection, over ssl.SSLSocket, on real loopback sockets."""

from __future__ import annotations

import os
import socket
import ssl
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

from channels import ListenOptions
from channels._core.tlscontext import ServerTls
from channels._core.tlsstream import TlsSocketStream
from channels._sockets.tcp import accept_tcp

from conftest import TlsFiles

TIMEOUT = 10  # seconds; loopback only
RESET_ON_CLOSE = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends a reset (RST)


def server_context(tls_files: TlsFiles) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls_files.server_cert, tls_files.server_key)
    return context


def listener_tls(tls_files: TlsFiles) -> ServerTls:
    return ServerTls("tls:test", ListenOptions(), server_context(tls_files))


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@asynccontextmanager
async def tls_pair(tls_files: TlsFiles) -> AsyncIterator[tuple[TlsSocketStream, trio.SSLStream]]:
    """A handshaken server-side TlsSocketStream and its client, a trio.SSLStream."""
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    client_context = ssl.create_default_context(cafile=tls_files.ca)
    client = trio.SSLStream(
        await trio.open_tcp_stream("127.0.0.1", port), client_context, server_hostname="127.0.0.1"
    )
    server, _ = await accept_tcp(listener, "tls", listener_tls(tls_files))
    assert isinstance(server, TlsSocketStream)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(server.do_handshake)
        await client.do_handshake()
    try:
        yield server, client
    finally:
        await trio.aclose_forcefully(server)
        await trio.aclose_forcefully(client)
        await listener.aclose()


async def test_a_connection_its_peer_reset_before_tls_took_it_raises_and_leaks_nothing(
    tls_files: TlsFiles,
) -> None:
    with trio.fail_after(TIMEOUT):
        listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
        port = listener.socket.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted = await listener.accept()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET_ON_CLOSE)
        client.close()
        context = server_context(tls_files)
        before = open_fds()
        with pytest.raises(OSError):
            TlsSocketStream(accepted, context)
        assert open_fds() == before - 1  # gone with the exception: nothing else holds it
        await listener.aclose()


async def test_accepting_skips_connections_reset_by_their_peer_and_takes_the_next(
    tls_files: TlsFiles,
) -> None:
    with trio.fail_after(TIMEOUT):
        listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
        port = listener.socket.getsockname()[1]
        context = server_context(tls_files)
        before = open_fds()
        for _ in range(3):
            reset = socket.create_connection(("127.0.0.1", port))
            reset.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET_ON_CLOSE)
            reset.close()
        kept = socket.create_connection(("127.0.0.1", port))
        stream, peer = await accept_tcp(listener, "tls", ServerTls("tls:test", ListenOptions(), context))
        assert peer.address == f"127.0.0.1:{kept.getsockname()[1]}"
        await stream.aclose()
        kept.close()
        assert open_fds() == before  # the reset connections left nothing open
        await listener.aclose()


async def test_a_cancelled_write_breaks_the_writing_side_for_good(tls_files: TlsFiles) -> None:
    # OpenSSL keeps the part of the cancelled write it did not send, and would take the start of
    # any later, longer buffer as the rest of it: those bytes would be lost without an error.
    with trio.fail_after(TIMEOUT):
        async with tls_pair(tls_files) as (server, client):
            with trio.move_on_after(0.2) as waited:
                await server.send_all(b"A" * 4_000_000)  # the client reads nothing: it blocks
            assert waited.cancelled_caught

            async def drain() -> None:
                while await client.receive_some(1 << 16):
                    pass

            async with trio.open_nursery() as nursery:
                nursery.start_soon(drain)
                with pytest.raises(trio.BrokenResourceError):
                    server.send_nowait(b"B" * 8_000_000)
                with pytest.raises(trio.BrokenResourceError):
                    await server.send_all(b"B" * 8_000_000)
                nursery.cancel_scope.cancel()


async def test_sending_nothing_is_still_a_checkpoint(tls_files: TlsFiles) -> None:
    with trio.fail_after(TIMEOUT):
        async with tls_pair(tls_files) as (server, _):
            with trio.CancelScope() as scope:
                scope.cancel()
                with pytest.raises(trio.Cancelled):
                    await server.send_all(b"")


async def test_a_large_write_the_socket_cannot_take_at_once_arrives_whole(tls_files: TlsFiles) -> None:
    payload = os.urandom(1 << 20) * 8
    with trio.fail_after(TIMEOUT):
        async with tls_pair(tls_files) as (server, client):
            sent = server.send_nowait(payload)
            received = bytearray()

            async def read_all() -> None:
                while len(received) < len(payload):
                    received.extend(await client.receive_some(1 << 16))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(read_all)
                if sent == 0:  # OpenSSL holds part of it: the same bytes again, as the docs say
                    await server.send_all(payload)
    assert bytes(received) == payload


async def test_after_send_eof_the_peer_reads_the_end_and_what_it_sends_is_still_read_until_its_goodbye(
    tls_files: TlsFiles,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with tls_pair(tls_files) as (server, client):
            await server.send_all(b"last words")
            await server.send_eof()
            with pytest.raises(trio.ClosedResourceError):
                await server.send_all(b"more")
            received = b""
            while chunk := await client.receive_some():
                received += chunk
            assert received == b"last words"  # then the end: close_notify, not a broken stream
            await client.send_all(b"still sending")
            await client.aclose()  # with its own close_notify
            received = b""
            while chunk := await server.receive_some():
                received += chunk
            assert received == b"still sending"


async def test_send_eof_while_the_peer_is_still_sending_says_goodbye_and_reads_on_until_the_peer_closes(
    tls_files: TlsFiles,
) -> None:
    # What the peer sent before the goodbye is in the socket, unread: OpenSSL, looking for the
    # peer's close_notify after sending its own, meets application data instead and gives up
    # reading (APPLICATION_DATA_AFTER_CLOSE_NOTIFY). The goodbye is out by then; send_eof must
    # not fail, and reading must go on (for a lingering close, which drops what it reads).
    with trio.fail_after(TIMEOUT):
        async with tls_pair(tls_files) as (server, client):
            await client.send_all(b"a request the server has not read yet\n" * 1000)
            await server.send_all(b"last words")
            await trio.testing.wait_all_tasks_blocked()  # what the client sent has arrived
            await server.send_eof()
            received = b""
            while chunk := await client.receive_some():
                received += chunk
            assert received == b"last words"  # then the end: close_notify, not a broken stream
            await client.send_all(b"still sending")
            await client.aclose()
            while await server.receive_some():  # read on, to the client's end: no failure
                pass
