"""The benchmark's Streamable HTTP sessions (MCP's HTTP transport), driven like every other row.

An :class:`HttpSession` offers what :class:`wire.Conn` offers (``send``, ``read_available``,
``read_lines``, ``read_one``, ``read_fd``, ``reserve``, ``close``), so the scenarios drive it
exactly as they drive a Unix, TCP, WebSocket or TLS session, the concurrent scenario's single poll
loop included. As in ``ws_tls.py``: non-blocking sockets, every wait a ``poll``, no thread of its
own, ``TCP_NODELAY`` on every socket (the benchmark batches its own writes).

What it speaks (MCP Streamable HTTP, protocol version ``wire.PROTOCOL_VERSION`` by default):

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

* ``HttpSession(modern=True)`` speaks the 2026-07-28 era instead (http_modern.py): no session, no
  ``initialize`` (it becomes ``server/discover``), no ``notifications/initialized``, no ``DELETE``;
  every request carries ``params._meta`` (protocol version, client capabilities) and every POST
  ``MCP-Protocol-Version: 2026-07-28``, ``Mcp-Method`` and, where the era asks for it,
  ``Mcp-Name``.

Each connection is an ``http_conn.Connection``; responses are parsed by hand (``http_wire.py``:
not h11, which would make the client the bottleneck). No standalone ``GET`` stream, no
resumption (``Last-Event-ID``).
"""

from __future__ import annotations

import json
import select
from collections import Counter, deque

from http_conn import DELETE, INITIALIZE_REQUEST, REQUEST, Connection, kind_of, open_socket
from http_modern import MODERN_VERSION, modern_post
from wire import IDLE_TIMEOUT_MS, IDLE_TIMEOUT_S, BenchError

DELETE_TIMEOUT_MS = 5000  # how long close() waits for the DELETE's response before giving up
# Request heads kept by a modern session, one per (Mcp-Method, Mcp-Name): a scenario uses two or
# three; past this many (a client calling many tools) the cache starts again.
MODERN_HEADS = 64


class HttpSession:
    """One MCP session over Streamable HTTP, driven like a :class:`wire.Conn` (see module doc)."""

    def __init__(self, address: tuple[str, int], path: str, stats: Counter, modern: bool = False) -> None:
        self._address = address
        self._path = path
        self.stats = stats  # shared by the target's sessions: response framings, reconnections...
        self.modern = modern  # the 2026-07-28 era (see module doc), else the legacy one
        self._modern_heads: dict[tuple[bytes, bytes | None], bytes] = {}
        self.session_id: bytes | None = None
        self._protocol_version: bytes | None = None
        self._post_head = b""  # the request head up to Content-Length's value
        self._set_post_head()
        self._poller = select.poll()
        self._connections: dict[int, Connection] = {}  # by fd, open ones only
        self._free: list[Connection] = []
        self._capacity = 1  # connections this session may have open
        # messages waiting for a free connection, with their request head (None: the session's)
        self._queue: deque[tuple[bytes, bytes | None]] = deque()
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
        for message in data.split(b"\n"):
            if not message:
                continue
            if not self.modern:
                self._queue.append((message, None))
            elif (post := modern_post(message)) is None:
                self.stats["not sent in the 2026-07-28 era: notifications/initialized"] += 1
            else:
                body, method, name = post
                self._queue.append((body, self._modern_head(method, name)))
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
        if kind == INITIALIZE_REQUEST and not self.modern:
            self._initialized(payload)
        self._ready.append(payload)

    def on_free(self, connection: Connection, kind: str | None) -> None:
        if kind != REQUEST:
            self._barrier = False
        if not connection.parser.keep_alive:
            self.drop(connection)
            self.stats["connections closed by the server"] += 1
        else:
            self._free.append(connection)

    def on_closed(self, connection: Connection) -> None:
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

    def _modern_head(self, method: bytes, name: bytes | None) -> bytes:
        """The head of a modern POST up to Content-Length's value (kept per method and name)."""
        head = self._modern_heads.get((method, name))
        if head is None:
            if len(self._modern_heads) >= MODERN_HEADS:
                self._modern_heads.clear()
            head = self._modern_heads[method, name] = (
                self._post_head.removesuffix(b"Content-Length: ")
                + b"MCP-Protocol-Version: %s\r\nMcp-Method: %s\r\n" % (MODERN_VERSION.encode(), method)
                + (b"Mcp-Name: %s\r\n" % name if name is not None else b"")
                + b"Content-Length: "
            )
        return head

    def _initialized(self, payload: bytes) -> None:
        try:
            version = json.loads(payload)["result"]["protocolVersion"]
        except (ValueError, KeyError, TypeError):
            return  # not a result: the scenario reports the reply
        self._protocol_version = str(version).encode()
        self._set_post_head()

    def _open(self) -> Connection:
        connection = Connection(self, open_socket(self._address))
        self._connections[connection.fd] = connection
        self._poller.register(connection.fd, select.POLLIN)
        return connection

    def drop(self, connection: Connection) -> None:
        """Close a connection and forget it (a later message opens another)."""
        if self._connections.pop(connection.fd, None) is not None:
            self._poller.unregister(connection.fd)
        if connection in self._free:
            self._free.remove(connection)
        connection.close()

    def _take_connection(self) -> Connection | None:
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
                body, head = self._queue.popleft()
                kind = kind_of(body)
                if kind != REQUEST:
                    self._barrier = True
                connection.start(kind)
                self._write(connection, [head or self._post_head, b"%d\r\n\r\n" % len(body), body])
        finally:
            self._pumping = False

    def _write(self, connection: Connection, buffers: list[bytes]) -> None:
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

    def _wait_writable(self, connection: Connection) -> None:
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
        if self.modern:
            return  # the 2026-07-28 era has no session to end
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


def http_connect(
    address: tuple[str, int], path: str, stats: Counter | None = None, modern: bool = False
) -> HttpSession:
    """A new Streamable HTTP session (one connection, nothing sent yet) at ``http://address/path``,
    in the 2026-07-28 era if ``modern``, else the legacy one."""
    return HttpSession(address, path, Counter() if stats is None else stats, modern)
