"""When the bridge closes a WebSocket, a client still writing reads every reply and the close frame.

Real child processes and real TCP sockets on loopback, with a WebSocket client written out by hand
(masked text frames, server frames parsed here) so that it writes after the bridge's close frame,
as a client does that has not read that far yet. The client pipelines requests to a child that
reads nothing, the child is killed with SIGKILL, and once the bridge has answered them, sent its
close frame and shut its write side (part of it still in the bridge's send buffer: the client has
read nothing), the client writes one more request. A socket closed while bytes arrive is reset by
Linux, and the reset destroys what was still to be delivered, the last replies and the close frame
among them: the bridge must finish the closing handshake (read and drop what the client still
sends until its close frame or its end, within bounds) before it closes the connection
(docs/design.md §5.1).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
from pathlib import Path
from typing import Any

import trio

from conftest import deaf_child, deaf_child_pid, poll, request, running_bridge

TIMEOUT = 20

# The client's receive buffer is kept small, so that what it has not read yet waits in the bridge's.
READ_SIZE = 4096
RECEIVE_BUFFER = 4096
TEXT, CLOSE = 0x1, 0x8
# Requests whose replies (about 200 bytes each) overflow the client's receive buffer, but fit in
# the bridge's send buffer (16 KiB at first: tcp_wmem), so that its writes complete unread.
UNREAD = 60
TCP_ESTABLISHED = "01"  # include/net/tcp_states.h, as /proc/net/tcp shows it
MASK = b"\x5a\x13\xc7\x2e"


def frame(opcode: int, payload: bytes) -> bytes:
    """One masked client frame (RFC 6455 §5.2; these payloads are under 64 KiB)."""
    size = len(payload)
    length = bytes([0x80 | size]) if size < 126 else bytes([0x80 | 126]) + size.to_bytes(2, "big")
    return bytes([0x80 | opcode]) + length + MASK + bytes(b ^ MASK[i % 4] for i, b in enumerate(payload))


class Client:
    """Writes requests by increasing id as text frames and splits what it reads into frames."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.written = 0
        self.replies: list[dict[str, Any]] = []
        self.close_code: int | None = None
        self._buffer = b""

    @classmethod
    async def open(cls, address: str) -> Client:
        host, _, port = address.removeprefix("ws://").rstrip("/").rpartition(":")
        sock = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
        await sock.connect((host, int(port)))
        client = cls(trio.SocketStream(sock))
        key = base64.b64encode(os.urandom(16)).decode()
        await client.stream.send_all(
            (
                f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        while b"\r\n\r\n" not in client._buffer:
            client._buffer += await client.stream.receive_some(READ_SIZE)
        head, _, client._buffer = client._buffer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101"), head
        return client

    async def write(self, count: int) -> None:
        ids = range(self.written, self.written + count)
        messages = (request(n, "tools/call", {"name": "echo", "arguments": {}}) for n in ids)
        await self.stream.send_all(b"".join(frame(TEXT, json.dumps(m).encode()) for m in messages))
        self.written += count

    async def read(self) -> bool:
        """Read once; False at the close frame or the end (a reset raises BrokenResourceError)."""
        data = await self.stream.receive_some(READ_SIZE)
        self._buffer += data
        while len(self._buffer) >= 2:
            opcode, size, header = self._buffer[0] & 0x0F, self._buffer[1] & 0x7F, 2
            if size == 126:
                size, header = int.from_bytes(self._buffer[2:4], "big"), 4
            if len(self._buffer) < header + size:
                break
            payload, self._buffer = self._buffer[header : header + size], self._buffer[header + size :]
            if opcode == CLOSE:
                self.close_code = int.from_bytes(payload[:2], "big")
                return False
            assert opcode == TEXT, opcode
            self.replies.append(json.loads(payload))
        return bool(data)


def bridge_side_state(bridge_port: int, client_port: int) -> str | None:
    """The TCP state of the bridge's end of the client's connection (``/proc/net/tcp``, hex)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = (int(address.rpartition(":")[2], 16) for address in fields[1:3])
        if (local, remote) == (bridge_port, client_port):
            return fields[3]
    return None


async def test_a_ws_client_that_writes_after_the_bridge_ended_reads_every_reply_then_the_close_frame(
    sock_dir: Path,
) -> None:
    pid_file = sock_dir / "child.pid"
    with trio.fail_after(TIMEOUT):
        async with running_bridge(deaf_child(pid_file), ["ws://127.0.0.1:0/"]) as daemon:
            client = await Client.open(daemon.addresses[0])
            bridge_port = int(daemon.addresses[0].rstrip("/").rpartition(":")[2])
            client_port = client.stream.socket.getsockname()[1]
            pid = await deaf_child_pid(pid_file)
            await client.write(UNREAD)
            os.kill(pid, signal.SIGKILL)
            # The bridge has answered, sent its close frame and shut its write side; part of
            # that still waits in its send buffer, since the client has read nothing yet. The
            # client writes one more request, as a client does that has not read that far.
            await poll(lambda: bridge_side_state(bridge_port, client_port) != TCP_ESTABLISHED)
            await client.write(1)
            while await client.read():  # a reset raises BrokenResourceError, failing the test
                pass
            await client.stream.aclose()
    assert client.close_code == 1012, "the connection ended without the close frame"
    assert sorted(reply["id"] for reply in client.replies) == list(range(UNREAD))
