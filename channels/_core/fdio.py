"""What every channel that reads a socket directly shares: the read size, and dropping unread bytes."""

from __future__ import annotations

import os

# How much one read asks for. 64 KiB holds hundreds of small MCP messages, so a pipelined peer is
# served by one system call per batch; it is also trio's DEFAULT_RECEIVE_SIZE for sockets.
RECEIVE_SIZE = 65536

# The most reads discard_unread makes (1 MiB: far more than a handshake, a goodbye or a close frame
# in flight; a peer still sending after that is reset, and cannot hold the event loop).
MAX_DISCARD_READS = 16


def discard_unread(fd: int) -> None:
    """Read and drop what the socket ``fd`` has received and nobody read, without waiting.

    Called just before closing: a socket closed with unread bytes is reset (RST), and a reset can
    destroy what was sent last (a TLS alert, ``close_notify``, a WebSocket close frame) before
    the peer reads it.
    """
    try:
        for _ in range(MAX_DISCARD_READS):
            if not os.read(fd, RECEIVE_SIZE):
                return
    except OSError:
        pass  # BlockingIOError: nothing more; anything else: closing anyway
