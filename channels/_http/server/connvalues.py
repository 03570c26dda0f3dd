"""What an HTTP connection is given and writes as is: its limits (:class:`ConnectionLimits`), heads."""

from __future__ import annotations

from collections.abc import Sequence
from http import HTTPStatus

import attrs

# Discarding the rest of an over-limit body, or lingering before closing after a refusal: at most
# this long in all, and this long without a byte (nginx's lingering_time 30s and
# lingering_timeout 5s; Apache's lingering close waits up to 2 s per read, 30 s in all).
DISCARD_TIME = 30.0
DISCARD_IDLE = 5.0


@attrs.frozen
class ConnectionLimits:
    """How long and how much one HTTP connection may take.

    Attributes:
        head_timeout: seconds from the first byte of a request to the end of its head (slowloris).
        body_timeout: seconds to receive a whole body once the head is in.
        idle_timeout: seconds a kept-alive connection may wait for its next request.
        send_timeout: seconds a write may wait for the client to read.
        max_body: the longest body accepted (413 beyond).
        discard_time: seconds to read and drop the rest of an over-limit body, or what a client
            sends after a refusal before the connection closes (a lingering close).
        discard_idle: seconds without a byte after which that stops early.
    """

    head_timeout: float
    body_timeout: float
    idle_timeout: float
    send_timeout: float
    max_body: int
    discard_time: float = DISCARD_TIME
    discard_idle: float = DISCARD_IDLE


def status_line(status: int) -> bytes:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    return f"HTTP/1.1 {status} {phrase}\r\n".encode()


STATUS_LINES = {status.value: status_line(status.value) for status in HTTPStatus}


SERVER_HEADER = b"server: mcp-bridge\r\n"

HeaderBlock = Sequence[tuple[bytes, bytes]] | bytes
"""A response's headers: name and value pairs, or already encoded (:func:`header_block`)."""


def header_block(headers: Sequence[tuple[bytes, bytes]]) -> bytes:
    """``headers`` as a response head carries them, each ``name: value`` and CRLF.

    Made once for headers sent with many responses (a response style's), rather than for each.
    """
    return b"".join([name + b": " + value + b"\r\n" for name, value in headers])


def response_head(status: int, headers: HeaderBlock, tail: bytes) -> bytes:
    """A response's head: its status line, the server header, ``headers``, then ``tail``.

    ``tail``: the framing headers and the blank line that ends the head.
    """
    block = headers if isinstance(headers, bytes) else header_block(headers)
    return (STATUS_LINES.get(status) or status_line(status)) + SERVER_HEADER + block + tail
