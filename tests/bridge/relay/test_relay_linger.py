"""After a per-connection child dies, the bridge half-closes a client and lingers before closing.

Real child processes and real TCP sockets on loopback. The client pipelines requests to a child
that reads nothing, the child is killed with SIGKILL, and the client goes on writing requests
while it reads its replies slowly, as a busy MCP client does. Closing the socket while such a
client still sends makes Linux answer its bytes with a reset, which destroys the replies the
bridge had not delivered yet and shows the client ``ECONNRESET`` instead of the end: the bridge
must shut its write side first (the client reads every reply, then the end) and drop what the
client still sends until the client closes. Over TLS, shutting the write side is TLS's goodbye
(``close_notify``), after which the bridge reads on in the same way.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from conftest import TlsFiles, deaf_child, deaf_child_pid, request, running_bridge

TIMEOUT = 20

# Requests pipelined before the kill (fewer than the 256 a connection may have in flight, so
# that all are forwarded and answered as in flight); then written at once after the first reply
# (well within the bridge's 0.2 s of quiet, so read and answered); then, once the replies to the
# first ones have been read, written a few per read until the end. Reading FIRST replies of
# about 200 bytes READ_SIZE at a time with READ_PAUSE between reads takes at least 0.45 s, longer
# than the bridge's quiet, so those last requests reach a bridge that has ended the connection
# while the replies to the SECOND still wait in its send buffer (the client's receive buffer is
# small).
FIRST = 200
SECOND = 50
PER_READ = 3
READ_SIZE = 256
TLS_READ_SIZE = 2048  # a TLS read decrypts a record: fewer, larger reads keep within the linger
READ_PAUSE = 0.003
RECEIVE_BUFFER = 4096


def line(request_id: int) -> bytes:
    return json.dumps(request(request_id, "tools/call", {"name": "echo", "arguments": {}})).encode() + b"\n"


async def open_slow_reader(address: str) -> trio.SocketStream:
    host, _, port = address.partition(":")[2].rpartition(":")  # tcp:HOST:PORT or tls:HOST:PORT
    sock = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
    await sock.connect((host, int(port)))
    return trio.SocketStream(sock)


class Client:
    """Writes requests by increasing id and splits what it reads into replies."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.written = 0
        self.replies: list[dict[str, Any]] = []
        self._buffer = b""

    async def write(self, count: int) -> None:
        ids = range(self.written, self.written + count)
        await self.stream.send_all(b"".join(line(n) for n in ids))
        self.written += count

    async def read(self, size: int = READ_SIZE) -> bool:
        """Read once; False at the end of the stream (a reset raises BrokenResourceError)."""
        data = await self.stream.receive_some(size)
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        self.replies += [json.loads(text) for text in lines]
        return bool(data)


async def serve_a_client_still_writing(
    pid_file: Path,
    listen: str,
    open_stream: Callable[[str], Awaitable[trio.abc.Stream]],
    read_size: int = READ_SIZE,
    **options: Any,
) -> list[dict[str, Any]]:
    """Kill the child under a client that goes on writing while it reads slowly; its replies.

    A reset makes a read or a write raise BrokenResourceError, failing the test. The client must
    read the bridge's replies within the bridge's linger (2 s): over TLS, whose reads cost more on
    a loaded machine, it reads larger pieces (``read_size``), still writing after each.
    """
    with trio.fail_after(TIMEOUT):
        async with running_bridge(deaf_child(pid_file), [listen], **options) as daemon:
            client = Client(await open_stream(daemon.addresses[0]))
            pid = await deaf_child_pid(pid_file)
            await client.write(FIRST)
            os.kill(pid, signal.SIGKILL)
            while not client.replies:
                assert await client.read(), "the connection ended before any reply"
            await client.write(SECOND)
            while await client.read(read_size):
                if len(client.replies) >= FIRST:
                    await client.write(PER_READ)
                await trio.sleep(READ_PAUSE)
            await client.stream.aclose()
    return client.replies


def assert_every_reply_once_up_to_the_end(replies: list[dict[str, Any]]) -> None:
    counts = Counter(reply["id"] for reply in replies)
    assert set(counts.values()) == {1}, "a request was answered twice"
    answered = len(counts)
    assert answered >= FIRST + SECOND
    # Every request up to the last answered one was answered: only those written after the
    # bridge's end (its FIN, or TLS's close_notify) may go without a reply.
    assert sorted(counts) == list(range(answered))
    for reply in replies:
        assert reply["error"]["data"]["reason"] == "child-exited"


async def test_a_client_still_writing_when_its_child_dies_gets_every_reply_then_an_orderly_end(
    sock_dir: Path,
) -> None:
    replies = await serve_a_client_still_writing(sock_dir / "child.pid", "tcp:127.0.0.1:0", open_slow_reader)
    assert_every_reply_once_up_to_the_end(replies)


async def test_a_tls_client_still_writing_when_its_child_dies_gets_every_reply_then_close_notify(
    sock_dir: Path, tls_files: TlsFiles
) -> None:
    context = ssl.create_default_context(cafile=tls_files.ca)

    async def open_slow_tls_reader(address: str) -> trio.SSLStream[trio.SocketStream]:
        stream = trio.SSLStream(await open_slow_reader(address), context, server_hostname="127.0.0.1")
        await stream.do_handshake()
        return stream

    # Without https_compatible, a TLS client's read raises BrokenResourceError at an end that
    # comes without close_notify: only TLS's own goodbye counts as an orderly end.
    replies = await serve_a_client_still_writing(
        sock_dir / "child.pid",
        "tls:127.0.0.1:0",
        open_slow_tls_reader,
        TLS_READ_SIZE,
        listen_options=tls_files.listen_options(),
    )
    assert_every_reply_once_up_to_the_end(replies)
