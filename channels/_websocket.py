"""WebSocket channels (trio-websocket): ``ws://HOST:PORT/PATH`` and ``wss://HOST:PORT/PATH``.

One JSON-RPC message per text frame. The subprotocol ``mcp`` is offered by our client and chosen by
our server when the client offers it (the SDKs' practice; WebSocket is not yet an MCP transport in
the spec); a client that offers none is served all the same.

What a peer gets for what it sends:

==========================================  ================================================
a text frame with one JSON-RPC message      delivered
a text frame with anything else             a JSON-RPC error (``receive`` raises
                                            :class:`~channels.ProtocolError`), as on any channel
a binary frame                              close 1003 (unsupported data)
invalid UTF-8 in a text frame               the connection is cut: wsproto reports 1007, but
                                            trio-websocket 0.12 sends no close frame (the
                                            peer sees 1006)
a message over ``max_message_bytes``        close 1009 (message too big)
no pong within ``ping_timeout`` of a ping   close 1011, and the channel is broken
==========================================  ================================================

Closing with :meth:`WebSocketChannel.aclose_with` sends the :class:`~channels.CloseReason`'s code
(1001 when the bridge stops, 1012 when the server behind it restarted...).

The upgrade request is checked by :class:`~channels._guard.RequestGuard` (Host, Origin, bearer
token) before it is accepted; a wrong path gets 404.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Self, final
from urllib.parse import urlsplit

import attrs
import trio
import trio_websocket
from trio_websocket import ConnectionClosed, WebSocketConnection

from ._address import (
    AccessDenied,
    Address,
    AddressError,
    ConnectError,
    ConnectOptions,
    ListenOptions,
    register_address_kind,
)
from ._channel import CloseReason, MessageChannel, PeerInfo
from ._errors import InvalidMessage, ProtocolError, SendTimeout
from ._guard import Rejection, RequestGuard, header_values
from ._jsonrpc import JSONObject, decode, encode, validate
from ._listener import HandshakeError, Incoming, MessageListener, tls_handshake
from ._stream import DEFAULT_MAX_MESSAGE_BYTES, RECEIVE_SIZE
from ._tcp import check_exposure, format_host_port, open_tcp_listeners, open_tcp_stream
from ._tls import client_context, open_tls_client_stream, server_context

logger = logging.getLogger("channels.websocket")

SUBPROTOCOL = "mcp"
# Messages trio-websocket may hold for us before it stops reading the socket: with 4 MiB messages
# that is 16 MiB, the budget of the websockets library's defaults (max_queue=16 x max_size=1 MiB).
MESSAGE_QUEUE = 4
# How long a closing handshake may take before the connection is simply cut.
CLOSE_TIMEOUT = 2.0
# RFC 6455 §5.5: a control frame's payload is at most 125 bytes, two of which hold the code.
MAX_CLOSE_REASON_BYTES = 123
# Close codes that end a channel in order (EndOfChannel): normal, going away, and no status code
# (RFC 6455 §7.4.1). Any other code is an error close; 1006 means no close frame arrived at all.
ORDERLY_CLOSE_CODES = frozenset({1000, 1001, 1005})
ABNORMAL_CLOSURE = 1006


@contextmanager
def _single_error() -> Iterator[None]:
    """Re-raise the one exception a nursery wrapped in a group (our context managers hold a
    nursery for the connection's reader task, and their callers expect plain exceptions)."""
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1 and not isinstance(group.exceptions[0], BaseExceptionGroup):
            error = group.exceptions[0]
            error.__suppress_context__ = True
            raise error  # noqa: B904 - deliberately the original exception, not a new cause
        raise


def _short(text: str) -> str:
    data = text.encode()[:MAX_CLOSE_REASON_BYTES]
    return data.decode(errors="ignore")


@final
class WebSocketChannel(MessageChannel):
    """JSON-RPC messages over a trio-websocket connection, one per text frame.

    Args:
        connection: the open connection; the channel closes it. Its reader task runs in the
            nursery of whoever made it (:meth:`WebSocketIncoming.establish`,
            :meth:`WebSocketAddress.connect`).
        peer: who is on the other end.
        max_message_bytes: longest message accepted, in UTF-8 bytes (trio-websocket's own limit
            counts characters, so both apply).
    """

    __slots__ = ("_broken", "_closed", "_connection", "_local_close", "_peer", "_receiving",
                 "_sending", "max_message_bytes", "send_timeout")

    def __init__(self, connection: WebSocketConnection, peer: PeerInfo,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self._connection = connection
        self._peer = peer
        self.max_message_bytes = max_message_bytes
        self.send_timeout: float | None = None
        self._closed = False
        self._broken = False
        self._receiving = False
        self._sending = False
        self._local_close: str | None = None  # why this side closed, once it has

    @property
    def peer(self) -> PeerInfo:
        return self._peer

    @property
    def subprotocol(self) -> str | None:
        """The negotiated subprotocol (``"mcp"``), or ``None``."""
        return self._connection.subprotocol

    async def receive(self) -> JSONObject:
        if self._receiving:
            raise trio.BusyResourceError("another task is already receiving on this channel")
        if self._closed:
            raise trio.ClosedResourceError("channel was closed")
        self._receiving = True
        try:
            try:
                message = await self._connection.get_message()
            except ConnectionClosed as exc:
                raise self._ended(exc) from None
        finally:
            self._receiving = False
        if isinstance(message, bytes):
            await self._close(CloseReason.UNSUPPORTED_DATA,
                              "binary frames are not accepted: send each JSON-RPC message as text")
            raise trio.BrokenResourceError("peer sent a binary frame (closed with 1003)")
        data = message.encode()
        if len(data) > self.max_message_bytes:
            await self._close(CloseReason.TOO_BIG,
                              f"message larger than {self.max_message_bytes} bytes")
            raise trio.BrokenResourceError(f"peer sent a message larger than "
                                           f"{self.max_message_bytes} bytes (closed with 1009)")
        return decode(data)

    def receive_nowait(self) -> JSONObject:
        """Never has anything buffered of its own: trio-websocket's queue is not reachable
        without blocking, so this raises ``WouldBlock`` (or the closed/busy errors)."""
        if self._receiving:
            raise trio.BusyResourceError("another task is already receiving on this channel")
        if self._closed:
            raise trio.ClosedResourceError("channel was closed")
        raise trio.WouldBlock

    def _ended(self, exc: ConnectionClosed) -> Exception:
        """What ``receive`` raises once the connection has closed: ``EndOfChannel`` after the
        peer's normal close (1000, 1001, or no code), ``BrokenResourceError`` naming the code
        otherwise."""
        if self._closed:
            return trio.ClosedResourceError("channel was closed")
        if self._local_close is not None:
            return trio.BrokenResourceError(f"closed by this side: {self._local_close}")
        reason = exc.reason
        code = reason.code if reason is not None else ABNORMAL_CLOSURE
        if code in ORDERLY_CLOSE_CODES:
            return trio.EndOfChannel()
        if code == ABNORMAL_CLOSURE:
            return trio.BrokenResourceError("connection lost without a close frame")
        text = f" {reason.reason}" if reason is not None and reason.reason else ""
        return trio.BrokenResourceError(f"closed with {code}{text}")

    async def send(self, value: JSONObject) -> None:
        if self._sending:
            raise trio.BusyResourceError("another task is already sending on this channel")
        try:
            validate(value)
        except InvalidMessage as exc:
            raise ValueError(f"not a JSON-RPC message: {exc}") from None
        text = encode(value)[:-1].decode()
        self._sending = True
        try:
            if self._closed:
                raise trio.ClosedResourceError("channel was closed")
            if self._broken:
                raise trio.BrokenResourceError("an earlier send timed out")
            await self._send_text(text)
        finally:
            self._sending = False

    async def _send_text(self, text: str) -> None:
        try:
            if self.send_timeout is None:
                await self._connection.send_message(text)
                return
            with trio.move_on_after(self.send_timeout) as waited:
                await self._connection.send_message(text)
        except ConnectionClosed as exc:
            if self._closed:
                raise trio.ClosedResourceError("channel was closed") from None
            raise trio.BrokenResourceError(f"connection closed ({exc.reason})") from None
        if waited.cancelled_caught:
            # Part of a frame may be on the wire: nothing may follow it, not even a close frame.
            self._broken = True
            self._local_close = "the peer did not read"
            await trio.aclose_forcefully(self._connection)
            raise SendTimeout(f"the peer accepted nothing for {self.send_timeout:g}s")

    async def _close(self, reason: CloseReason, detail: str) -> None:
        if self._local_close is None:
            self._local_close = f"{reason.value} {detail}"
        with trio.move_on_after(CLOSE_TIMEOUT) as scope:
            scope.shield = True
            await self._connection.aclose(reason.value, _short(detail))

    async def aclose_with(self, reason: CloseReason, detail: str = "") -> None:
        if self._closed:
            await trio.lowlevel.checkpoint()
            return
        self._closed = True
        if self._sending or self._broken:
            # A send is stuck mid-frame (or was cut off in one): no close frame can follow it.
            await trio.aclose_forcefully(self._connection)
            return
        await self._close(reason, detail)

    async def aclose(self) -> None:
        await self.aclose_with(CloseReason.NORMAL)

    async def keepalive(self, interval: float, timeout: float) -> None:
        """Ping every ``interval`` seconds; close with 1011 if a pong takes over ``timeout``.

        Run it beside the channel (in the nursery of its reader task); it returns once the
        connection has closed.
        """
        try:
            while True:
                await trio.sleep(interval)
                with trio.move_on_after(timeout) as waited:
                    await self._connection.ping()
                if waited.cancelled_caught:
                    logger.info("%s: no pong within %gs; closing", self._peer, timeout)
                    await self._close(CloseReason.INTERNAL_ERROR, "keepalive ping timeout")
                    return
        except ConnectionClosed:
            return


@attrs.frozen
class _Endpoint:
    """What a WebSocket listener or client needs to know of its address."""

    secure: bool
    host: str
    port: int
    path: str

    @property
    def transport(self) -> str:
        return "wss" if self.secure else "ws"


@final
@attrs.define(eq=False)
class WebSocketIncoming(Incoming):
    """An accepted TCP connection that must upgrade to WebSocket (after TLS, for ``wss``)."""

    stream: trio.abc.Stream
    initial_peer: PeerInfo
    endpoint: _Endpoint
    guard: RequestGuard
    options: ListenOptions

    @property
    def peer(self) -> PeerInfo:
        return self.initial_peer

    @asynccontextmanager
    async def establish(self) -> AsyncIterator[MessageChannel]:
        with _single_error():
            async with trio.open_nursery() as nursery:
                channel = None
                try:
                    with trio.move_on_after(self.options.handshake_timeout) as deadline:
                        channel = await self._handshake(nursery)
                    if deadline.cancelled_caught:
                        raise HandshakeError(
                            f"no WebSocket upgrade within {self.options.handshake_timeout:g}s")
                    assert channel is not None
                    nursery.start_soon(channel.keepalive, self.options.ping_interval,
                                       self.options.ping_timeout)
                    yield channel
                except trio.Cancelled:
                    if channel is not None:
                        await channel.aclose_with(CloseReason.GOING_AWAY, "server stopping")
                    raise
                except BaseException:
                    if channel is not None:
                        await channel.aclose_with(CloseReason.INTERNAL_ERROR, "internal error")
                    raise
                finally:
                    if channel is not None:
                        await channel.aclose_with(CloseReason.NORMAL)
                    await trio.aclose_forcefully(self.stream)
                    nursery.cancel_scope.cancel()

    async def _handshake(self, nursery: trio.Nursery) -> WebSocketChannel:
        peer = self.initial_peer
        if isinstance(self.stream, trio.SSLStream):
            peer = await tls_handshake(self.stream, peer)
        request = await trio_websocket.wrap_server_stream(
            nursery, self.stream, message_queue_size=MESSAGE_QUEUE,
            max_message_size=self.options.max_message_bytes, receive_buffer_size=RECEIVE_SIZE)
        origin = header_values(request.headers, b"origin")
        agent = header_values(request.headers, b"user-agent")
        peer = attrs.evolve(peer, origin=origin[0].decode("latin-1") if origin else None,
                            user_agent=agent[0].decode("latin-1") if agent else None)
        path = request.path.partition("?")[0]
        outcome: Rejection | str | None
        if path != self.endpoint.path:
            outcome = Rejection(404, "not-found",
                                f"Not Found: the MCP endpoint is {self.endpoint.path}")
        else:
            outcome = self.guard.check(_host_of(request), request.headers)
        if isinstance(outcome, Rejection):
            await request.reject(outcome.status, extra_headers=outcome.headers(),
                                 body=outcome.body())
            raise HandshakeError(f"upgrade refused with {outcome.status}: {outcome.message}")
        if outcome is not None:
            peer = attrs.evolve(peer, credential=outcome)
        subprotocol = SUBPROTOCOL if SUBPROTOCOL in request.proposed_subprotocols else None
        connection = await request.accept(subprotocol=subprotocol)
        return WebSocketChannel(connection, peer, self.options.max_message_bytes)

    async def aclose(self) -> None:
        await self.stream.aclose()


@final
class WebSocketListener(MessageListener):
    """Accepts TCP connections to upgrade to WebSocket; owns its socket."""

    def __init__(self, listener: trio.SocketListener, endpoint: _Endpoint, guard: RequestGuard,
                 options: ListenOptions, ssl_context: ssl.SSLContext | None) -> None:
        self._listener = listener
        self._endpoint = endpoint
        self._guard = guard
        self._options = options
        self._ssl_context = ssl_context
        host, port = listener.socket.getsockname()[:2]
        self._address = (f"{endpoint.transport}://{format_host_port(host, port)}"
                         f"{endpoint.path}")

    @property
    def address(self) -> str:
        return self._address

    async def accept(self) -> Incoming:
        while True:
            stream = await self._listener.accept()
            try:
                host, port = stream.socket.getpeername()[:2]
                break
            except OSError as exc:
                # The peer reset the connection before it was accepted (ENOTCONN): skip it. An
                # OSError out of accept() would end trio.serve_listeners, and the daemon with it.
                logger.debug("dropped a connection reset before it was accepted: %s", exc)
                await trio.aclose_forcefully(stream)
        peer = PeerInfo(self._endpoint.transport, format_host_port(host, port))
        wrapped: trio.abc.Stream = stream
        if self._ssl_context is not None:
            wrapped = trio.SSLStream(stream, self._ssl_context, server_side=True,
                                     https_compatible=True)
        return WebSocketIncoming(wrapped, peer, self._endpoint, self._guard, self._options)

    async def aclose(self) -> None:
        await self._listener.aclose()


class _WebSocketAddress(Address):
    """``ws://HOST:PORT/PATH`` (``wss://`` for TLS). The port defaults to 80 (443); the path to
    ``/``; a query string or fragment is refused. IPv6 hosts are bracketed."""

    endpoint: _Endpoint

    @classmethod
    def parse(cls, text: str) -> Self:
        example = f"{cls.scheme}://127.0.0.1:7301/mcp"
        try:
            parts = urlsplit(text)
            port = parts.port
        except ValueError:
            raise AddressError(f"{text!r}: expected {cls.scheme}://HOST:PORT/PATH, "
                               f"for example {example}") from None
        if parts.scheme != cls.scheme or not parts.hostname:
            raise AddressError(f"{text!r}: expected {cls.scheme}://HOST:PORT/PATH, "
                               f"for example {example}")
        if parts.query or parts.fragment or parts.username or parts.password:
            raise AddressError(f"{text!r}: a WebSocket address takes no query, fragment or "
                               f"credentials; for example {example}")
        secure = cls.scheme == "wss"
        if port is None:
            port = 443 if secure else 80
        return cls(_Endpoint(secure, parts.hostname, port, parts.path or "/"))  # type: ignore[call-arg]

    def __str__(self) -> str:
        endpoint = self.endpoint
        return f"{self.scheme}://{format_host_port(endpoint.host, endpoint.port)}{endpoint.path}"

    async def listen(self, options: ListenOptions) -> list[MessageListener]:
        endpoint = self.endpoint
        context = server_context(self, options) if endpoint.secure else None
        loopback = await check_exposure(self, endpoint.host, options, encrypted=endpoint.secure)
        guard = RequestGuard.create(loopback=loopback, bind_host=endpoint.host,
                                    allow_hosts=options.allow_hosts,
                                    allow_origins=options.allow_origins, tokens=options.tokens)
        return [WebSocketListener(listener, endpoint, guard, options, context)
                for listener in await open_tcp_listeners(self, endpoint.host, endpoint.port)]

    @asynccontextmanager
    async def connect(self, options: ConnectOptions) -> AsyncIterator[MessageChannel]:
        endpoint = self.endpoint
        if endpoint.secure:
            client_context(self, options)  # bad files fail before any connection is made
            stream: trio.abc.Stream = await open_tls_client_stream(
                self, endpoint.host, endpoint.port, options, https_compatible=True)
        else:
            stream = await open_tcp_stream(self, endpoint.host, endpoint.port,
                                           options.handshake_timeout)
        headers = ([(b"authorization", f"Bearer {options.token}".encode())]
                   if options.token is not None else [])
        peer = PeerInfo(endpoint.transport, format_host_port(endpoint.host, endpoint.port))
        upgraded = False
        try:
            with _single_error():
                async with trio.open_nursery() as nursery:
                    channel = None
                    try:
                        with trio.move_on_after(options.handshake_timeout) as deadline:
                            connection = await trio_websocket.wrap_client_stream(
                                nursery, stream, format_host_port(endpoint.host, endpoint.port),
                                endpoint.path, subprotocols=[SUBPROTOCOL], extra_headers=headers,
                                message_queue_size=MESSAGE_QUEUE,
                                max_message_size=options.max_message_bytes,
                                receive_buffer_size=RECEIVE_SIZE)
                        if deadline.cancelled_caught:
                            raise ConnectError(f"{self}: no WebSocket upgrade within "
                                               f"{options.handshake_timeout:g}s")
                        channel = WebSocketChannel(connection, peer, options.max_message_bytes)
                        nursery.start_soon(channel.keepalive, options.ping_interval,
                                           options.ping_timeout)
                        upgraded = True
                        yield channel
                    finally:
                        if channel is not None:
                            await channel.aclose_with(CloseReason.NORMAL)
                        await trio.aclose_forcefully(stream)
                        nursery.cancel_scope.cancel()
        except trio_websocket.ConnectionRejected as exc:
            if upgraded:
                raise
            error = AccessDenied if exc.status_code in (401, 403) else ConnectError
            raise error(f"{self}: upgrade refused with HTTP {exc.status_code}"
                        + _rejection_detail(exc.body)) from None


def _host_of(request: trio_websocket.WebSocketRequest) -> str | None:
    """The upgrade request's ``Host``. wsproto keeps it on its ``Request`` event, apart from the
    other headers, and trio-websocket 0.12 does not expose that event: hence the private
    attribute (tests/test_websocket.py fails loudly if it ever moves)."""
    event = getattr(request, "_event", None)
    host = getattr(event, "host", None)
    return host if isinstance(host, str) else None


def _rejection_detail(body: bytes | None) -> str:
    if not body:
        return ""
    text = body[:200].decode(errors="replace")
    return f": {text}"


@register_address_kind
@attrs.frozen
class WebSocketAddress(_WebSocketAddress):
    __doc__ = _WebSocketAddress.__doc__
    scheme = "ws"
    endpoint: _Endpoint


@register_address_kind
@attrs.frozen
class SecureWebSocketAddress(_WebSocketAddress):
    __doc__ = _WebSocketAddress.__doc__
    scheme = "wss"
    endpoint: _Endpoint
