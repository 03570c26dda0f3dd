"""HTTP/1.1 client connections over trio streams (parsed by h11), and a small keep-alive pool.

HTTP/1.1 cannot multiplex: a connection carries one exchange at a time, and pipelining is no help
when a response may be a long-lived event stream. Concurrent requests therefore need several
connections. :class:`ConnectionPool` keeps finished connections open for the next request
(keep-alive), opens new ones when all are busy, and bounds how many exist at once.

Nothing here knows MCP; :mod:`channels._http.client.channel` builds on it.
"""

from __future__ import annotations

import logging
import select
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import final

import h11
import trio

from ..._core.fdio import RECEIVE_SIZE
from ..._core.options import ConnectError, ConnectOptions
from ..._sockets.endpoint import Endpoint
from ..._sockets.tcp import open_tcp_stream
from ..._sockets.tls import open_tls_client_stream

logger = logging.getLogger("channels.http.client")

MAX_CONNECTIONS = 16
"""Connections open at once to one endpoint, busy and idle together. HTTP/1.1 runs one exchange per
connection, so this is also how many requests can be in flight: well above what one stdio client
keeps in flight (the SDK clients await most requests one by one), and far below any server's
connection limit. Further requests wait for a connection (backpressure on ``send``)."""

RESERVED_CONNECTIONS = 2
"""Connections that long exchanges (requests, whose response streams may stay open for minutes,
and the standalone GET stream) never take. Notifications and replies to the server's requests are
acknowledged at once (202), and a tool call may be waiting for exactly such a reply (sampling,
elicitation): if long exchanges could hold every connection, that reply could never be sent."""

IDLE_KEEPALIVE = 4.0
"""Seconds an idle connection may wait for reuse; older ones are closed instead. Servers close idle
keep-alive connections after 5 s (uvicorn's and Node's defaults), and a request written just as
the server closes is lost with no way to tell whether it was processed; staying under the
common timeout avoids that race."""

MAX_RESPONSE_HEAD_BYTES = 64 * 1024
"""Longest status line and headers accepted (h11's default is 16 KiB; a server behind proxies that
add headers can exceed it). A longer head fails the exchange."""


class HttpFailure(Exception):
    """An HTTP exchange failed below the level of a response.

    No connection, a lost connection, a response h11 cannot parse. The message says what
    happened, for logs and error replies.
    """


@final
class HttpConnection:
    """One HTTP/1.1 connection: h11's state machine over a trio stream (TCP or TLS).

    Args:
        stream: the connected stream; the connection owns it.
    """

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_RESPONSE_HEAD_BYTES)
        self.received = 0
        """Bytes received in the current exchange (0: the server has sent nothing yet)."""
        self.exchanges = 0
        """Exchanges started on this connection (more than 1: it was reused from the pool)."""
        self.idle_since = 0.0

    async def send_request(
        self, method: str, target: str, headers: Sequence[tuple[str, str]], body: bytes = b""
    ) -> None:
        """Write a whole request (head and body).

        Raises:
            HttpFailure: the connection failed while writing.
        """
        self.exchanges += 1
        self.received = 0
        framing = [("Content-Length", str(len(body)))] if body or method in ("POST", "PUT") else []
        try:
            data = self.h11.send(h11.Request(method=method, target=target, headers=[*headers, *framing]))
            if body:
                data += self.h11.send(h11.Data(data=body))
            data += self.h11.send(h11.EndOfMessage())
        except h11.LocalProtocolError as exc:  # a header value h11 refuses: a bug here, or odd input
            raise HttpFailure(f"cannot send the request: {exc}") from None
        try:
            await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise HttpFailure(f"connection lost while sending: {exc}") from None

    async def _next_event(self) -> h11.Event | type[h11.PAUSED]:
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise HttpFailure(f"invalid HTTP response: {exc}") from None
            if event is not h11.NEED_DATA:
                return event  # type: ignore[return-value]
            try:
                data = await self.stream.receive_some(RECEIVE_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise HttpFailure(f"connection lost: {exc}") from None
            self.received += len(data)
            self.h11.receive_data(bytes(data))

    async def receive_response(self) -> h11.Response:
        """Read the response head (skipping 1xx informational responses).

        Raises:
            HttpFailure: the connection closed or failed first, or the head is not valid HTTP.
        """
        while True:
            event = await self._next_event()
            if isinstance(event, h11.Response):
                return event
            if not isinstance(event, h11.InformationalResponse):
                raise HttpFailure(f"connection closed before a response ({type(event).__name__})")

    async def receive_data(self) -> bytes:
        """The next piece of the response body, or ``b""`` once it is complete.

        Raises:
            HttpFailure: the connection closed or failed before the end of the body.
        """
        while True:
            event = await self._next_event()
            if isinstance(event, h11.Data):
                if event.data:
                    return bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return b""
            else:
                raise HttpFailure(f"connection closed in the middle of a response ({type(event).__name__})")

    async def read_body(self, limit: int) -> bytes | None:
        """The rest of the body, or ``None`` if it is longer than ``limit`` bytes.

        After ``None`` the connection is left mid-response and cannot be reused.

        Raises:
            HttpFailure: as :meth:`receive_data`.
        """
        parts: list[bytes] = []
        size = 0
        while chunk := await self.receive_data():
            size += len(chunk)
            if size > limit:
                return None
            parts.append(chunk)
        return b"".join(parts)

    def finish(self) -> bool:
        """Whether the exchange completed cleanly and the connection can carry another."""
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            try:
                self.h11.start_next_cycle()
            except h11.LocalProtocolError:
                return False
            return True
        return False

    def looks_dead(self) -> bool:
        """Whether an idle plain-TCP connection has something to read, and so must not be reused.

        The server closed it (EOF), or sent bytes no request asked for (httpcore's check). TLS
        connections are not checked: a TLS 1.3 server sends session tickets after the handshake,
        which make an idle socket readable without anything being wrong. A TLS connection the
        server closed is caught by the retry in :meth:`ConnectionPool.request` instead.
        """
        stream = self.stream
        if not isinstance(stream, trio.SocketStream):
            return False
        try:
            readable, _, _ = select.select([stream.socket.fileno()], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    async def aclose(self) -> None:
        """Close the connection at once (no TLS goodbye is waited for)."""
        await trio.aclose_forcefully(self.stream)


@final
class ConnectionPool:
    """Keep-alive HTTP/1.1 connections to one endpoint, at most :data:`MAX_CONNECTIONS` at once.

    Args:
        endpoint: where to connect (``https`` means TLS).
        options: ``handshake_timeout`` bounds each connection and TLS handshake; ``tls_ca``,
            ``tls_cert`` and ``tls_key`` configure TLS.
        max_connections: the bound (tests lower it).

    Attributes:
        long_exchanges: a semaphore that exchanges which may stay open indefinitely (requests
            answered by event streams, the standalone GET stream) hold, so that
            :data:`RESERVED_CONNECTIONS` stay available for short ones.
    """

    def __init__(self, endpoint: Endpoint, options: ConnectOptions, max_connections: int = MAX_CONNECTIONS):
        self.endpoint = endpoint
        self.options = options
        self._busy = trio.Semaphore(max_connections)
        self.long_exchanges = trio.Semaphore(max(1, max_connections - RESERVED_CONNECTIONS))
        self._idle: list[HttpConnection] = []
        self._closed = False

    async def open_connection(self) -> HttpConnection:
        """A new connection (TCP, and TLS for ``https``), bounded by ``handshake_timeout``.

        Raises:
            ConnectError: no connection, or a failed TLS handshake.
        """
        endpoint = self.endpoint
        if endpoint.secure:
            stream: trio.abc.Stream = await open_tls_client_stream(
                endpoint, endpoint.host, endpoint.port, self.options, https_compatible=True
            )
        else:
            stream = await open_tcp_stream(
                endpoint, endpoint.host, endpoint.port, self.options.handshake_timeout
            )
        return HttpConnection(stream)

    async def check_reachable(self) -> None:
        """Open one connection and keep it for the first request.

        Raises:
            ConnectError: as :meth:`open_connection`.
        """
        connection = await self.open_connection()
        connection.idle_since = trio.current_time()
        self._idle.append(connection)

    def _take_idle(self) -> HttpConnection | None:
        now = trio.current_time()
        while self._idle:
            connection = self._idle.pop()  # the most recently used: the least likely to be stale
            if now - connection.idle_since < IDLE_KEEPALIVE and not connection.looks_dead():
                return connection
            self._discard(connection)
        return None

    def _discard(self, connection: HttpConnection) -> None:
        # Closing a plain socket never blocks; a TLS stream closed forcefully does not either.
        stream = connection.stream
        if isinstance(stream, trio.SSLStream):
            stream = stream.transport_stream
        if isinstance(stream, trio.SocketStream):
            stream.socket.close()

    @asynccontextmanager
    async def request(
        self,
        method: str,
        headers: Sequence[tuple[str, str]],
        body: bytes = b"",
        *,
        on_sent: Callable[[], object] | None = None,
    ) -> AsyncIterator[tuple[HttpConnection, h11.Response]]:
        """Send a request to the endpoint's path and yield the connection and the response head.

        The caller reads the body from the connection inside the block. When the block ends,
        the connection returns to the pool if the exchange completed, and is closed otherwise
        (a body left unread, cancellation, an error).

        A reused connection that fails before the server sent a single byte is replaced by a
        fresh one and the request written again, once: the server closed it while it was idle,
        so it cannot have processed the request.

        Args:
            method: ``"POST"``, ``"GET"`` or ``"DELETE"``.
            headers: the headers besides ``Content-Length`` (which the body sets).
            body: the request body.
            on_sent: called once the request has been written in full.

        Raises:
            HttpFailure: no connection, or it failed before a response head arrived.
            trio.ClosedResourceError: the pool was closed.
        """
        async with self._busy:
            if self._closed:
                raise trio.ClosedResourceError("the HTTP client was closed")
            connection = self._take_idle()
            try:
                if connection is None:
                    connection = await self._open_or_fail()
                try:
                    response = await self._exchange(connection, method, headers, body, on_sent)
                except HttpFailure:
                    if connection.exchanges <= 1 or connection.received:
                        raise
                    logger.debug("a kept-alive connection was closed by the server; reconnecting")
                    await connection.aclose()
                    connection = await self._open_or_fail()
                    response = await self._exchange(connection, method, headers, body, on_sent)
                yield connection, response
            except BaseException:
                if connection is not None:
                    await connection.aclose()
                    connection = None
                raise
            finally:
                if connection is not None:
                    if connection.finish() and not self._closed:
                        connection.idle_since = trio.current_time()
                        self._idle.append(connection)
                    else:
                        await connection.aclose()

    async def _open_or_fail(self) -> HttpConnection:
        try:
            return await self.open_connection()
        except ConnectError as exc:
            raise HttpFailure(str(exc)) from None

    async def _exchange(
        self,
        connection: HttpConnection,
        method: str,
        headers: Sequence[tuple[str, str]],
        body: bytes,
        on_sent: Callable[[], object] | None,
    ) -> h11.Response:
        await connection.send_request(method, self.endpoint.path, headers, body)
        if on_sent is not None:
            on_sent()
        return await connection.receive_response()

    async def aclose(self) -> None:
        """Close the idle connections; busy ones close when their exchanges end. Idempotent."""
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            await connection.aclose()
