"""One keep-alive HTTP/1.1 connection of a benchmark Streamable HTTP session (streamable_http.py):
what is in flight on it, and how its response is read (JSON, an event stream, a 202, an error).

A :class:`Connection` belongs to its :class:`streamable_http.HttpSession`, which opens it, writes
its requests and closes it (``close``, or ``drop``); the connection calls back into the session
with each reply (``on_reply``), when it is free again (``on_free``) and when the server closed it.
"""

from __future__ import annotations

import json
import socket
from typing import TYPE_CHECKING

from http_wire import EventStream, ResponseParser, is_response, one_line
from wire import IDLE_TIMEOUT_S, INITIALIZE, READ_SIZE, BenchError

if TYPE_CHECKING:
    from streamable_http import HttpSession

ERROR_BODY_BYTES = 300  # how much of an error response's body is kept for the message
REQUEST_START = b'{"jsonrpc":"2.0","id":'  # how wire.encode starts every request (id before method)
INITIALIZE_BODY = INITIALIZE.rstrip(b"\n")

# what a POST carries, for routing its response
REQUEST, INITIALIZE_REQUEST, NOTIFICATION, DELETE = "request", "initialize", "notification", "delete"


def open_socket(address: tuple[str, int]) -> socket.socket:
    sock = socket.create_connection(address, timeout=IDLE_TIMEOUT_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # we batch writes ourselves
    sock.setblocking(False)
    return sock


class Connection:
    """One keep-alive HTTP/1.1 connection of a session, with at most one request in flight."""

    def __init__(self, session: HttpSession, sock: socket.socket) -> None:
        self.session = session
        self.sock = sock
        self.fd = sock.fileno()
        self.parser = ResponseParser(self._on_head, self._on_body, self._on_end)
        self.kind: str | None = None  # what is in flight: REQUEST, NOTIFICATION... or None when free
        self.status = 0
        self.reason = ""
        self._sse: EventStream | None = None  # the response is an event stream
        self._json: list[bytes] | None = None  # the response is one JSON message: its pieces
        self._error: list[bytes] | None = None  # the response is an error: the start of its body
        self._replied = False

    @property
    def awaiting_reply(self) -> bool:
        """A request is in flight whose reply has not arrived (an event stream whose reply has
        arrived may still be open: it ends soon)."""
        return self.kind in (REQUEST, INITIALIZE_REQUEST) and not self._replied

    def start(self, kind: str) -> None:
        self.kind = kind
        self.status, self._replied = 0, False
        self._sse = self._json = self._error = None
        self.parser.expect()

    def _on_head(self, status: int, reason: str) -> None:
        self.status, self.reason = status, reason
        kind = self.kind
        header = self.parser.header
        content_type = (header(b"content-type") or b"").split(b";", 1)[0].strip().lower()
        framing = "length" if header(b"content-length") is not None else "chunked"
        session = self.session
        if kind == DELETE:
            return  # any status is recorded, the body is not kept
        if kind == NOTIFICATION:
            if status != 202:
                self._error = []
            return
        if status != 200:
            self._error = []
        elif content_type == b"text/event-stream":
            self._sse = EventStream()
            session.stats[f"replies: SSE, {framing}"] += 1
        elif content_type == b"application/json":
            self._json = []
            session.stats[f"replies: JSON, {framing}"] += 1
        else:
            self._error = []
        if kind == INITIALIZE_REQUEST:
            session.session_id = header(b"mcp-session-id")

    def _on_body(self, data: bytes) -> None:
        if self._sse is not None:
            for payload in self._sse.feed(data):
                if not self._replied and is_response(payload):
                    self._replied = True
                    self.session.on_reply(self.kind, payload)
        elif self._json is not None:
            self._json.append(data)
        elif self._error is not None and sum(map(len, self._error)) < ERROR_BODY_BYTES:
            self._error.append(bytes(data[:ERROR_BODY_BYTES]))

    def _on_end(self) -> None:
        kind, self.kind = self.kind, None
        if kind == DELETE:
            self.session.stats[f"DELETE → {self.status}"] += 1
        elif self._error is not None:
            expected = "202 Accepted" if kind == NOTIFICATION else "200 with JSON or an event stream"
            body = one_line(b"".join(self._error)[:ERROR_BODY_BYTES].decode(errors="replace"))
            detail = f": {body}" if body else ""
            raise BenchError(f"HTTP {self.status} {self.reason} (expected {expected}){detail}")
        elif kind == NOTIFICATION:
            self.session.stats["notifications: 202"] += 1
        elif self._json is not None:
            body = b"".join(self._json)
            if not body:
                raise BenchError("HTTP 200 with an empty JSON body")
            self.session.on_reply(kind, body)
        elif not self._replied:
            raise BenchError("event stream ended without the reply")
        self.session.on_free(self, kind)

    def receive(self) -> None:
        """Read what the socket has now and parse it. A reset or a bad response raises, and the
        connection is dropped from the session (its state is unknown)."""
        try:
            data = self.sock.recv(READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            self.session.drop(self)
            raise BenchError(self._reset_message()) from None
        try:
            if data:
                self.parser.feed(data)
            else:
                self.parser.feed_eof()
                self.session.on_closed(self)
        except BenchError:
            self.session.drop(self)
            raise
        if self.session.queued:  # after the whole read is parsed: a freed connection takes the next
            self.session.pump()

    def _reset_message(self) -> str:
        if self.kind is None:
            return "connection reset by the server"
        if self.status:
            return f"connection reset by the server during a HTTP {self.status} {self.reason} response"
        return "connection reset by the server before it responded"

    def close(self) -> None:
        self.sock.close()


def kind_of(body: bytes) -> str:
    """What a message is, for its response: the fast path is how wire.encode writes requests."""
    if body.startswith(REQUEST_START):
        return INITIALIZE_REQUEST if body == INITIALIZE_BODY else REQUEST
    try:
        message = json.loads(body)
    except ValueError:
        return REQUEST  # not JSON: sent anyway, its response decides
    if isinstance(message, dict) and "method" in message and "id" not in message:
        return NOTIFICATION
    if isinstance(message, dict) and "method" not in message:
        return NOTIFICATION  # a client's response to a server request: also answered 202
    return INITIALIZE_REQUEST if isinstance(message, dict) and message["method"] == "initialize" else REQUEST
