"""The benchmark's Streamable HTTP sessions (MCP's HTTP transport), driven like every other row.

An :class:`HttpSession` offers what :class:`wire.Conn` offers (``send``, ``read_available``,
``read_lines``, ``read_one``, ``read_fd``, ``reserve``, ``close``), so the scenarios drive it
exactly as they drive a Unix, TCP, WebSocket or TLS session, the concurrent scenario's single poll
loop included. As in ``ws_tls.py``: non-blocking sockets, every wait a ``poll``, no thread of its
own, ``TCP_NODELAY`` on every socket (the benchmark batches its own writes).

What it speaks (MCP Streamable HTTP, protocol version ``wire.PROTOCOL_VERSION``):

* Every message handed to :meth:`HttpSession.send` (newline-terminated, as for the other rows) is
  one ``POST`` of that JSON to the endpoint, with ``Accept: application/json, text/event-stream``
  and ``Content-Type: application/json``. The ``initialize`` request goes without session headers;
  every later request carries the ``Mcp-Session-Id`` that the initialize response gave (if any) and
  ``MCP-Protocol-Version`` (the version the initialize result names).
* A request's response is either ``application/json`` (its body is the reply) or
  ``text/event-stream``: the reply is the ``data`` of the first ``message`` event whose JSON-RPC
  message is a response (no ``method``); comments, other event types and the server's notifications
  and requests on that stream are skipped. The reply is handed over as soon as its event is
  complete; the connection takes its next POST once the stream has ended. A notification (and a
  client's response) must be answered ``202 Accepted``; the messages queued after a notification
  or ``initialize`` wait for its response, as an SDK client awaits it. Any other status is an error
  naming the status and the start of the body (``HTTP 413 Payload Too Large: ...``).
* HTTP/1.1 with keep-alive, one request at a time per connection (no pipelining, which HTTP/1.1
  servers handle poorly). A session starts with one connection; :meth:`HttpSession.reserve` opens
  more (the pipelined scenario reserves one per call in flight, 64, before its clock starts), and a
  message waits for a free connection otherwise. A connection the server closes (``Connection:
  close``, or an idle keep-alive timeout) is reopened when next needed and counted.
* :meth:`HttpSession.close` ends the session with ``DELETE`` (unless a request still awaits its
  reply, after a failure) and records the status.

Responses are parsed here (:class:`ResponseParser`, :class:`EventStream`): status line, headers,
``Content-Length``, ``Transfer-Encoding: chunked`` (trailers skipped) or read-until-close bodies,
and server-sent events (``\\n``, ``\\r\\n`` or ``\\r`` line ends, multi-line ``data``). Not h11:
h11 costs about 50 µs per request/response pair here (building a request and parsing a
small response), several times what the rest of the client spends on a call, so it would have
made the client the bottleneck of every HTTP row; this parser costs a few µs. Only what a
benchmark client needs is implemented: no redirects, no authentication, no compression (none is
asked for), no resumption (``Last-Event-ID``), no standalone ``GET`` stream.
"""

from __future__ import annotations

import html
import json
import re
import select
import socket
from collections import Counter, deque
from collections.abc import Callable

from wire import IDLE_TIMEOUT_MS, IDLE_TIMEOUT_S, INITIALIZE, READ_SIZE, BenchError

MAX_HEAD_BYTES = 64 * 1024  # a longer status line + headers (or chunk-size line) is an error
ERROR_BODY_BYTES = 300  # how much of an error response's body is kept for the message
REQUEST_START = b'{"jsonrpc":"2.0","id":'  # how wire.encode starts every request (id before method)
INITIALIZE_BODY = INITIALIZE.rstrip(b"\n")
DELETE_TIMEOUT_MS = 5000  # how long close() waits for the DELETE's response before giving up

# what a POST carries, for routing its response
REQUEST, INITIALIZE_REQUEST, NOTIFICATION, DELETE = "request", "initialize", "notification", "delete"


# -- HTTP/1.1 responses -----------------------------------------------------------------------
LAST_CHUNK = b"\r\n0\r\n\r\n"  # a chunk's CRLF, the last (empty) chunk and no trailer
_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILER, _UNTIL_CLOSE, _IDLE = range(8)


class ResponseParser:
    """An incremental HTTP/1.1 response parser for one connection, one response at a time.

    ``feed`` bytes as they arrive; it calls ``on_head(status, reason)`` (during which
    :meth:`header` reads the response's headers), ``on_body(data)`` for each piece of the
    de-chunked body and ``on_end()`` when the response is complete. ``expect()`` arms it for the
    next response; bytes that arrive with no response expected are an error (nothing is pipelined).
    Headers are looked up, not split into a dict: a client needs five of them, and this is most of
    the parsing time of a small response.
    """

    def __init__(self, on_head: Callable, on_body: Callable, on_end: Callable) -> None:
        self._on_head, self._on_body, self._on_end = on_head, on_body, on_end
        self._state = _IDLE
        self._pending = bytearray()  # an incomplete head or chunk line
        self._remaining = 0  # body or chunk bytes still to come
        self.no_body = False  # the response to a HEAD request has none (unused by MCP, kept honest)
        self.keep_alive = True  # whether the connection may carry another request afterwards
        self._head_bytes = b""  # the last response head (status line and headers)
        self._head_lower = b""  # the same in lower case, to find header names in

    @property
    def idle(self) -> bool:
        return self._state == _IDLE

    @property
    def started(self) -> bool:
        """True once any byte of the expected response has arrived."""
        return self._state != _HEAD or bool(self._pending)

    def expect(self) -> None:
        self._state = _HEAD
        self._pending.clear()

    def feed(self, data: bytes) -> None:
        pos, size = 0, len(data)
        while pos < size:
            state = self._state
            if state == _LENGTH or state == _CHUNK_DATA:
                take = min(self._remaining, size - pos)
                self._on_body(data if take == size else data[pos : pos + take])
                pos += take
                self._remaining -= take
                if not self._remaining:
                    if state == _LENGTH:
                        self._finish()
                    else:
                        self._state = _CHUNK_END
            elif state == _UNTIL_CLOSE:
                self._on_body(data[pos:] if pos else data)
                pos = size
            elif state == _CHUNK_END and data.startswith(LAST_CHUNK, pos):  # the usual end
                pos += len(LAST_CHUNK)
                self._finish()
            elif state == _IDLE:
                raise BenchError(f"{size - pos} bytes from the server with no request in flight")
            else:  # a line-oriented state: the head, a chunk-size line, a chunk's CRLF, a trailer
                if self._pending:  # rare: a line split across reads
                    data = bytes(self._pending) + data[pos:]
                    self._pending.clear()
                    pos, size = 0, len(data)
                terminator = b"\r\n\r\n" if state == _HEAD else b"\r\n"
                end = data.find(terminator, pos)
                if end < 0:
                    if size - pos > MAX_HEAD_BYTES:
                        raise BenchError(f"HTTP head or chunk line longer than {MAX_HEAD_BYTES} bytes")
                    self._pending += data[pos:]
                    return
                line = data[pos:end]
                pos = end + len(terminator)
                self._line(state, line)

    def feed_eof(self) -> None:
        """The server closed the connection: ends a read-until-close body, else is an error."""
        if self._state == _UNTIL_CLOSE:
            self._finish()
        elif self._state != _IDLE:
            where = "in the middle of the response" if self.started else "before responding"
            raise BenchError(f"connection closed by the server {where}")

    def _line(self, state: int, line: bytes) -> None:
        if state == _HEAD:
            self._head(line)
        elif state == _CHUNK_SIZE:
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise BenchError(f"bad chunk-size line: {line[:40]!r}") from None
            if size:
                self._state, self._remaining = _CHUNK_DATA, size
            else:
                self._state = _TRAILER
        elif state == _CHUNK_END:
            if line:
                raise BenchError(f"chunk not followed by CRLF: {line[:40]!r}")
            self._state = _CHUNK_SIZE
        elif not line:  # _TRAILER: the empty line ends the message; trailer fields are skipped
            self._finish()

    def header(self, name: bytes) -> bytes | None:
        """The value of the last response's first header called ``name`` (lower case), or None."""
        lower = self._head_lower
        start = lower.find(b"\r\n" + name + b":")
        if start < 0:
            return None
        start += len(name) + 3
        end = lower.find(b"\r\n", start)
        return self._head_bytes[start : end if end >= 0 else len(lower)].strip()

    def _head(self, head: bytes) -> None:
        status_line, _, _ = head.partition(b"\r\n")
        version, _, rest = status_line.partition(b" ")
        code, _, reason = rest.partition(b" ")
        if not version.startswith(b"HTTP/1.") or not code.isdigit():
            raise BenchError(f"bad HTTP status line: {status_line[:80]!r}")
        status = int(code)
        if 100 <= status < 200:  # 100 Continue and the like: the real response follows
            return
        self._head_bytes, self._head_lower = head, head.lower()
        connection = (self.header(b"connection") or b"").lower()
        self.keep_alive = b"close" not in connection and (
            version != b"HTTP/1.0" or b"keep-alive" in connection
        )
        self._on_head(status, reason.decode(errors="replace"))
        length = self.header(b"content-length")
        if self.no_body or status in (204, 304):
            self._finish()
        elif b"chunked" in (self.header(b"transfer-encoding") or b"").lower():
            self._state = _CHUNK_SIZE
        elif length is not None:
            try:
                self._remaining = int(length)
            except ValueError:
                raise BenchError(f"bad Content-Length: {length[:40]!r}") from None
            if self._remaining:
                self._state = _LENGTH
            else:
                self._finish()
        else:
            self._state = _UNTIL_CLOSE
            self.keep_alive = False

    def _finish(self) -> None:
        self._state = _IDLE
        self._on_end()


# -- server-sent events -----------------------------------------------------------------------
class EventStream:
    """An incremental ``text/event-stream`` parser: ``feed`` returns the data of each complete
    ``message`` event (events of another type, events without data, and comments are dropped;
    ``id`` and ``retry`` are ignored)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._carriage_return = False  # the last piece ended with CR, which an LF may complete

    def feed(self, data: bytes) -> list[bytes]:
        if self._carriage_return or b"\r" in data:
            data = self._normalise(data)
        buffer = self._buffer
        if not buffer and data.endswith(b"\n\n") and data.find(b"\n\n") == len(data) - 2:
            payload = _event_data(data[:-2])  # the usual case: exactly one whole event
            return [] if payload is None else [payload]
        start = max(0, len(buffer) - 1)
        buffer += data
        payloads = []
        while (end := buffer.find(b"\n\n", start)) >= 0:
            payload = _event_data(bytes(buffer[:end]))
            del buffer[: end + 2]
            start = 0
            if payload is not None:
                payloads.append(payload)
        return payloads

    def _normalise(self, data: bytes) -> bytes:
        """CRLF and lone CR line ends become LF (an LF after a piece that ended with CR is that
        CR's, and dropped)."""
        if self._carriage_return and data.startswith(b"\n"):
            data = data[1:]
        self._carriage_return = data.endswith(b"\r")
        return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def _event_data(block: bytes) -> bytes | None:
    """The data of one event (its lines, without the blank line), or None if it is not a message."""
    data = []
    kind = b"message"
    for line in block.split(b"\n"):
        if line.startswith(b"data"):
            if line.startswith(b"data: "):
                data.append(line[6:])
            elif line.startswith(b"data:"):
                data.append(line[5:])
            elif line == b"data":
                data.append(b"")
        elif line.startswith(b"event:"):
            kind = line[6:].removeprefix(b" ")
        # comments (":..."), id:, retry: and unknown fields are ignored
    if kind != b"message" or not data:
        return None
    return data[0] if len(data) == 1 else b"\n".join(data)


def _is_response(payload: bytes) -> bool:
    """True unless the JSON-RPC message is a request or notification (has a ``method`` member).

    A response has no ``"method"`` key, and inside a JSON string a quote is always escaped, so a
    payload without the bytes ``"method"`` (and without ``\\u`` escapes, which could spell it) is
    a response without being parsed; anything else is parsed to be sure.
    """
    if b'"method"' not in payload and b"\\u" not in payload:
        return True
    try:
        message = json.loads(payload)
    except ValueError:
        return True  # not JSON: handed on, for the scenario to report
    return not (isinstance(message, dict) and "method" in message)


# -- connections and sessions -----------------------------------------------------------------
def _open_socket(address: tuple[str, int]) -> socket.socket:
    sock = socket.create_connection(address, timeout=IDLE_TIMEOUT_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # we batch writes ourselves
    sock.setblocking(False)
    return sock


class _Connection:
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
                if not self._replied and _is_response(payload):
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
            body = _one_line(b"".join(self._error)[:ERROR_BODY_BYTES].decode(errors="replace"))
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


class HttpSession:
    """One MCP session over Streamable HTTP, driven like a :class:`wire.Conn` (see module doc)."""

    def __init__(self, address: tuple[str, int], path: str, stats: Counter) -> None:
        self._address = address
        self._path = path
        self.stats = stats  # shared by the target's sessions: response framings, reconnections...
        self.session_id: bytes | None = None
        self._protocol_version: bytes | None = None
        self._post_head = b""  # the request head up to Content-Length's value
        self._set_post_head()
        self._poller = select.poll()
        self._connections: dict[int, _Connection] = {}  # by fd, open ones only
        self._free: list[_Connection] = []
        self._capacity = 1  # connections this session may have open
        self._queue: deque[bytes] = deque()  # messages waiting for a free connection
        self._ready: list[bytes] = []  # replies not yet handed over
        self._barrier = False  # a notification or initialize is in flight: later messages wait
        self._pumping = False
        self._closed = False
        first = self._open()
        self._free.append(first)
        self.read_fd = first.fd  # what a caller polls for a one-connection session

    # -- the Conn interface ----------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        """POST each newline-terminated message of ``data`` once a connection is free for it."""
        self._queue.extend(message for message in data.split(b"\n") if message)
        self.pump()

    def reserve(self, in_flight: int) -> None:
        """Open connections up to ``in_flight`` now, so that many requests can be in flight."""
        self._capacity = max(self._capacity, in_flight)
        while len(self._connections) < self._capacity:
            self._free.append(self._open())

    def read_available(self) -> list[bytes]:
        """The replies that what is readable now completes (maybe none)."""
        if not self._ready:
            self._receive(0)
        ready, self._ready = self._ready, []
        return ready

    def read_lines(self) -> list[bytes]:
        """Wait for at least one reply and return every reply received."""
        if not self._ready:
            self._receive(0)
        while not self._ready:
            if not self._receive(IDLE_TIMEOUT_MS):
                raise BenchError(f"no reply for {IDLE_TIMEOUT_S:g} s")
        ready, self._ready = self._ready, []
        return ready

    def read_one(self) -> bytes:
        """Exactly one reply, for request/reply exchanges with nothing else in flight."""
        lines = self.read_lines()
        if len(lines) != 1:
            raise BenchError(f"{len(lines)} messages arrived where one reply was expected")
        return lines[0]

    def close(self) -> None:
        """End the session with DELETE unless a request awaits its reply; close the sockets."""
        if self._closed:
            return
        self._closed = True
        try:
            self._delete()
        except (BenchError, OSError) as error:
            self.stats[f"DELETE failed: {error}"] += 1
        finally:
            for connection in list(self._connections.values()):
                connection.close()
            self._connections.clear()

    # -- called by connections -----------------------------------------------------------------
    @property
    def queued(self) -> bool:
        return bool(self._queue)

    def on_reply(self, kind: str | None, payload: bytes) -> None:
        if kind == INITIALIZE_REQUEST:
            self._initialized(payload)
        self._ready.append(payload)

    def on_free(self, connection: _Connection, kind: str | None) -> None:
        if kind != REQUEST:
            self._barrier = False
        if not connection.parser.keep_alive:
            self.drop(connection)
            self.stats["connections closed by the server"] += 1
        else:
            self._free.append(connection)

    def on_closed(self, connection: _Connection) -> None:
        """The server closed an idle connection (a keep-alive timeout): open another when needed."""
        if connection.fd in self._connections:
            self.drop(connection)
            self.stats["connections closed by the server"] += 1

    # -- inside -------------------------------------------------------------------------------
    def _set_post_head(self) -> None:
        lines = [
            f"POST {self._path} HTTP/1.1",
            f"Host: {self._address[0]}:{self._address[1]}",
            "Accept: application/json, text/event-stream",
            "Content-Type: application/json",
        ]
        if self.session_id is not None:
            lines.append(f"Mcp-Session-Id: {self.session_id.decode()}")
        if self._protocol_version is not None:
            lines.append(f"MCP-Protocol-Version: {self._protocol_version.decode()}")
        self._post_head = ("\r\n".join(lines) + "\r\nContent-Length: ").encode()

    def _initialized(self, payload: bytes) -> None:
        try:
            version = json.loads(payload)["result"]["protocolVersion"]
        except (ValueError, KeyError, TypeError):
            return  # not a result: the scenario reports the reply
        self._protocol_version = str(version).encode()
        self._set_post_head()

    def _open(self) -> _Connection:
        connection = _Connection(self, _open_socket(self._address))
        self._connections[connection.fd] = connection
        self._poller.register(connection.fd, select.POLLIN)
        return connection

    def drop(self, connection: _Connection) -> None:
        """Close a connection and forget it (a later message opens another)."""
        if self._connections.pop(connection.fd, None) is not None:
            self._poller.unregister(connection.fd)
        if connection in self._free:
            self._free.remove(connection)
        connection.close()

    def _take_connection(self) -> _Connection | None:
        if self._free:
            return self._free.pop()
        if len(self._connections) < self._capacity:
            connection = self._open()
            self.stats["connections reopened"] += 1
            if len(self._connections) == 1:
                self.read_fd = connection.fd
            return connection
        return None

    def pump(self) -> None:
        """Send queued messages while connections are free (and no notification is in flight)."""
        if self._pumping:
            return
        self._pumping = True
        try:
            while self._queue and not self._barrier:
                connection = self._take_connection()
                if connection is None:
                    return
                body = self._queue.popleft()
                kind = _kind(body)
                if kind != REQUEST:
                    self._barrier = True
                connection.start(kind)
                self._write(connection, [self._post_head, b"%d\r\n\r\n" % len(body), body])
        finally:
            self._pumping = False

    def _write(self, connection: _Connection, buffers: list[bytes]) -> None:
        """Write all of ``buffers`` to one connection, reading every connection while it blocks.

        An error while the request is still going out (an early ``413``, a reset) is reported with
        how much of the request had been written."""
        views = [memoryview(buffer) for buffer in buffers if buffer]
        total, sent = sum(map(len, views)), 0
        while views:
            try:
                count = connection.sock.sendmsg(views)
            except BlockingIOError:
                count = 0
            except (BrokenPipeError, ConnectionResetError) as error:
                reset = f"{type(error).__name__} after {sent} of {total} request bytes"
                try:
                    connection.receive()  # an early error response (413...) says more than the reset
                except BenchError as found:
                    raise BenchError(f"{found} ({reset})") from None
                finally:
                    self.drop(connection)
                raise BenchError(f"connection reset by the server: {reset}") from None
            sent += count
            remaining = count
            while remaining:
                if remaining >= len(views[0]):
                    remaining -= len(views.pop(0))
                else:
                    views[0] = views[0][remaining:]
                    remaining = 0
            if views and count == 0:
                try:
                    self._wait_writable(connection)
                except BenchError as found:
                    raise BenchError(f"{found} (after {sent} of {total} request bytes)") from None

    def _wait_writable(self, connection: _Connection) -> None:
        self._poller.modify(connection.fd, select.POLLIN | select.POLLOUT)
        try:
            events = self._poller.poll(IDLE_TIMEOUT_MS)
        finally:
            if connection.fd in self._connections:
                self._poller.modify(connection.fd, select.POLLIN)
        if not events:
            raise BenchError(f"server stopped reading for {IDLE_TIMEOUT_S:g} s")
        for fd, event in events:
            if event & (select.POLLIN | select.POLLHUP | select.POLLERR) and fd in self._connections:
                self._connections[fd].receive()

    def _receive(self, timeout_ms: int) -> bool:
        """Read every connection that is readable within ``timeout_ms``; False if none was."""
        events = self._poller.poll(timeout_ms)
        for fd, _ in events:
            connection = self._connections.get(fd)
            if connection is not None:
                connection.receive()
        return bool(events)

    def _delete(self) -> None:
        if any(c.awaiting_reply for c in self._connections.values()) or self._queue:
            self.stats["DELETE skipped: requests in flight"] += 1
            return
        # notifications' 202s, and the ends of event streams whose reply has been handed over
        while any(c.kind is not None for c in self._connections.values()):
            if not self._receive(DELETE_TIMEOUT_MS):
                raise BenchError("responses still open before DELETE")
        if self.session_id is None:
            self.stats["DELETE skipped: no session id"] += 1
            return
        connection = self._take_connection()
        if connection is None:  # cannot happen: nothing is in flight
            return
        head = (
            f"DELETE {self._path} HTTP/1.1\r\nHost: {self._address[0]}:{self._address[1]}\r\n"
            f"Mcp-Session-Id: {self.session_id.decode()}\r\n"
            + (
                f"MCP-Protocol-Version: {self._protocol_version.decode()}\r\n"
                if self._protocol_version
                else ""
            )
            + "\r\n"
        ).encode()
        connection.start(DELETE)
        self._write(connection, [head])
        while connection.kind is not None:
            if not self._receive(DELETE_TIMEOUT_MS):
                raise BenchError(f"no response to DELETE within {DELETE_TIMEOUT_MS / 1000:g} s")


def _one_line(text: str) -> str:
    """An error body for a one-line message: HTML tags and entities gone, whitespace collapsed."""
    if "<" in text:
        text = html.unescape(re.sub(r"<[^>]*>", " ", text))
    return " ".join(text.split())


def _kind(body: bytes) -> str:
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


def http_connect(address: tuple[str, int], path: str, stats: Counter | None = None) -> HttpSession:
    """A new Streamable HTTP session (one connection, nothing sent yet) at ``http://address/path``."""
    return HttpSession(address, path, Counter() if stats is None else stats)
