"""An HTTP connection on one end of a socket pair, and the other end to read what it wrote.

For the tests that check the bytes a response puts on the wire, with no listener and no client:
the test owns both ends (closing the client socket; the connection's ``aclose`` closes the server's).
"""

from __future__ import annotations

import socket

import trio

from channels._http.server.conn import HttpConnection
from channels._http.server.connvalues import ConnectionLimits

# Deadlines no test here comes near: each side writes or reads in one scheduler pass.
LIMITS = ConnectionLimits(head_timeout=5, body_timeout=5, idle_timeout=5, send_timeout=5, max_body=1 << 20)
# Bytes asked of the client socket per read: more than any test's response.
READ_SIZE = 1 << 20


def connection_pair(buffer: int | None = None) -> tuple[HttpConnection, socket.socket]:
    """A connection and the non-blocking client socket it writes to.

    ``buffer``: the server's send buffer and the client's receive buffer, in bytes (the kernel's
    defaults otherwise), for a test that needs a write the kernel does not take at once.
    """
    server, client = socket.socketpair()
    if buffer is not None:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer)
    client.setblocking(False)
    return HttpConnection(trio.SocketStream(trio.socket.from_stdlib_socket(server)), LIMITS), client


def read_all(client: socket.socket) -> bytes:
    """Everything the client socket holds now, without waiting for more (or up to the end)."""
    data = b""
    while True:
        try:
            chunk = client.recv(READ_SIZE)
        except BlockingIOError:
            return data
        if not chunk:
            return data
        data += chunk
