"""WebSocket addresses, listeners and handshakes: ``ws://HOST:PORT/PATH`` and ``wss://...``.

One JSON-RPC message per text frame (:class:`~channels._ws.channel.WebSocketChannel`). The
subprotocol ``mcp`` is offered by our client and chosen by our server when the client offers it
(the SDKs' practice; WebSocket is not yet an MCP transport in the spec); a client that offers none
is served all the same.

What a peer gets for what it sends:

==========================================  ================================================
a text frame with one JSON-RPC message      delivered
a text frame with anything else             a JSON-RPC error (``receive`` raises
                                            :class:`~channels.ProtocolError`), as on any channel
a binary frame                              close 1003 (unsupported data)
invalid UTF-8 in a text frame               close 1007
a message over ``max_message_bytes``        close 1009 (message too big)
nothing at all within ``ping_timeout`` of   close 1011, and the channel is broken
a ping (sent every ``ping_interval``)
==========================================  ================================================

The opening handshake is the ``websockets`` library's (HTTP parsing, ``Sec-WebSocket-Accept``,
subprotocol choice). Before it is accepted, :class:`~channels._core.guard.RequestGuard` checks Host,
Origin and the bearer token; a wrong path gets 404.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Self, final

import attrs
import trio
from websockets.client import ClientProtocol
from websockets.datastructures import Headers
from websockets.exceptions import InvalidStatus
from websockets.http11 import Request, Response
from websockets.protocol import State
from websockets.server import ServerProtocol
from websockets.typing import Subprotocol
from websockets.uri import parse_uri

from .._core.address import Address, register_address_kind
from .._core.channel import CloseReason, MessageChannel, PeerInfo
from .._core.fdio import RECEIVE_SIZE
from .._core.guard import Rejection, RequestGuard
from .._core.listener import HandshakeError, Incoming, MessageListener, tls_handshake
from .._core.options import AccessDenied, ConnectError, ConnectOptions, ListenOptions
from .._core.tlscontext import ServerTls, client_context
from .._core.tlsstream import TLS_STREAMS
from .._core.unwrap import single_exception
from .._sockets.endpoint import Endpoint, parse_endpoint
from .._sockets.tcp import accept_tcp, check_exposure, format_host_port, open_tcp_listeners, open_tcp_stream
from .._sockets.tls import open_tls_client_stream
from .channel import WebSocketChannel

logger = logging.getLogger("channels.websocket")
# The websockets library logs every handshake at INFO; the daemon already logs each connection,
# so its own logger is kept at WARNING (set "channels.websocket.wire" to DEBUG for a frame trace).
wire_logger = logging.getLogger("channels.websocket.wire")
wire_logger.setLevel(logging.WARNING)


class _RedactCredentials(logging.Filter):
    """At DEBUG, websockets logs every handshake header (``"< %s: %s"``): never the token."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if (
            isinstance(args, tuple)
            and len(args) == 2
            and isinstance(args[0], str)
            and args[0].lower() in ("authorization", "cookie", "proxy-authorization")
        ):
            record.args = (args[0], "[redacted]")
        return True


wire_logger.addFilter(_RedactCredentials())

SUBPROTOCOL = Subprotocol("mcp")
# What ends an HTTP/1.1 request's header section (RFC 9112 §2.1; websockets wants CRLF).
END_OF_HEADERS = b"\r\n\r\n"


@final
@attrs.define(eq=False)
class WebSocketIncoming(Incoming):
    """An accepted TCP connection that must upgrade to WebSocket (after TLS, for ``wss``)."""

    stream: trio.abc.Stream
    initial_peer: PeerInfo
    endpoint: Endpoint
    guard: RequestGuard
    options: ListenOptions

    @property
    def peer(self) -> PeerInfo:
        return self.initial_peer

    @asynccontextmanager
    async def establish(self) -> AsyncIterator[MessageChannel]:
        with single_exception():
            async with trio.open_nursery() as nursery:
                channel = None
                try:
                    with trio.move_on_after(self.options.handshake_timeout) as deadline:
                        channel = await self._handshake()
                    if deadline.cancelled_caught:
                        raise HandshakeError(
                            f"no WebSocket upgrade within {self.options.handshake_timeout:g}s"
                        )
                    assert channel is not None
                    nursery.start_soon(
                        channel.keepalive, self.options.ping_interval, self.options.ping_timeout
                    )
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

    async def _handshake(self) -> WebSocketChannel:
        peer = self.initial_peer
        if isinstance(self.stream, TLS_STREAMS):
            peer = await tls_handshake(self.stream, peer)
        protocol = ServerProtocol(
            max_size=self.options.max_message_bytes,
            select_subprotocol=_select_subprotocol,
            logger=wire_logger,
        )
        request, received = await _read_request(self.stream, protocol)
        origins = request.headers.get_all("Origin")
        agents = request.headers.get_all("User-Agent")
        peer = attrs.evolve(
            peer, origin=origins[0] if origins else None, user_agent=agents[0] if agents else None
        )
        outcome: Rejection | str | None
        if request.path.partition("?")[0] != self.endpoint.path:
            outcome = Rejection(404, "not-found", f"Not Found: the MCP endpoint is {self.endpoint.path}")
        else:
            hosts = request.headers.get_all("Host")
            outcome = self.guard.check(hosts[0] if len(hosts) == 1 else None, _raw_headers(request.headers))
        if isinstance(outcome, Rejection):
            await _send_response(self.stream, protocol, _rejection(protocol, outcome))
            raise HandshakeError(f"upgrade refused with {outcome.status}: {outcome.message}")
        response = protocol.accept(request)
        await _send_response(self.stream, protocol, response)
        if response.status_code != 101:
            raise HandshakeError(
                f"not a valid WebSocket upgrade ({protocol.handshake_exc}); answered {response.status_code}"
            )
        if outcome is not None:
            peer = attrs.evolve(peer, credential=outcome)
        return WebSocketChannel(self.stream, protocol, peer, self.options.max_message_bytes, received)

    async def aclose(self) -> None:
        await self.stream.aclose()


@final
class WebSocketListener(MessageListener):
    """Accepts TCP connections to upgrade to WebSocket; owns its socket."""

    def __init__(
        self,
        listener: trio.SocketListener,
        endpoint: Endpoint,
        guard: RequestGuard,
        options: ListenOptions,
        tls: ServerTls | None,
    ) -> None:
        self._listener = listener
        self._endpoint = endpoint
        self._guard = guard
        self._options = options
        self._tls = tls
        host, port = listener.socket.getsockname()[:2]
        self._address = f"{endpoint.transport}://{format_host_port(host, port)}{endpoint.path}"

    @property
    def address(self) -> str:
        return self._address

    async def accept(self) -> Incoming:
        wrapped, peer = await accept_tcp(
            self._listener, self._endpoint.transport, self._tls, https_compatible=True
        )
        return WebSocketIncoming(wrapped, peer, self._endpoint, self._guard, self._options)

    async def aclose(self) -> None:
        await self._listener.aclose()


class _WebSocketAddress(Address):
    """``ws://HOST:PORT/PATH`` (``wss://`` for TLS).

    The port defaults to 80 (443); the path to ``/``; a query string or fragment is refused. IPv6
    hosts are bracketed.
    """

    endpoint: Endpoint

    @classmethod
    def parse(cls, text: str) -> Self:
        """Parse ``SCHEME://HOST[:PORT][/PATH]``.

        Raises:
            AddressError: another scheme, no host, a bad port, or a query, fragment or user
                name.
        """
        return cls(parse_endpoint(text, cls.scheme, kind="a WebSocket address"))  # type: ignore[call-arg]

    def __str__(self) -> str:
        return str(self.endpoint)

    async def listen(self, options: ListenOptions) -> list[MessageListener]:
        """Listen for WebSocket upgrades on ``PATH``; the caller owns the listeners.

        Before the upgrade is accepted, the request's ``Host``, ``Origin`` and bearer token are
        checked (``options.allow_hosts``, ``options.allow_origins``, ``options.tokens``), and a
        wrong path gets 404; all within :meth:`~channels.Incoming.establish`, bounded by
        ``options.handshake_timeout``. ``wss://`` needs ``options.tls_cert`` and
        ``options.tls_key``; ``options.tls_client_ca`` requires client certificates. Each
        established channel pings its peer every ``options.ping_interval`` seconds.

        Raises:
            ListenError: ``wss://`` without a certificate or with files that cannot be loaded,
                beyond loopback without authentication or opt-out, or the bind failed.
        """
        endpoint = self.endpoint
        tls = ServerTls.load(self, options) if endpoint.secure else None
        loopback = await check_exposure(self, endpoint.host, options, encrypted=endpoint.secure)
        guard = RequestGuard.create(
            loopback=loopback,
            bind_host=endpoint.host,
            allow_hosts=options.allow_hosts,
            allow_origins=options.allow_origins,
            tokens=options.tokens,
        )
        return [
            WebSocketListener(listener, endpoint, guard, options, tls)
            for listener in await open_tcp_listeners(self, endpoint.host, endpoint.port)
        ]

    @asynccontextmanager
    async def connect(self, options: ConnectOptions) -> AsyncIterator[MessageChannel]:
        """Connect, upgrade, and yield the channel; it is closed when the block ends.

        ``options.token`` goes in the upgrade's ``Authorization: Bearer`` header. The connection,
        the TLS handshake (``wss://``) and the upgrade are each bounded by
        ``options.handshake_timeout``. A keepalive task pings the server while the block runs.
        Leaving the block sends a close frame (1000), shielded from cancellation and bounded, and
        closes the connection.

        Raises:
            AccessDenied: the server refused the upgrade with 401 or 403 (token, Origin, Host).
            ConnectError: a PEM file that cannot be loaded, no connection, a failed TLS
                handshake, an upgrade refused with another status or not answered in time, or not
                a WebSocket server.
        """
        endpoint = self.endpoint
        if endpoint.secure:
            client_context(self, options)  # bad files fail before any connection is made
            stream: trio.abc.Stream = await open_tls_client_stream(
                self, endpoint.host, endpoint.port, options, https_compatible=True
            )
        else:
            stream = await open_tcp_stream(self, endpoint.host, endpoint.port, options.handshake_timeout)
        peer = PeerInfo(endpoint.transport, format_host_port(endpoint.host, endpoint.port))
        try:
            with trio.move_on_after(options.handshake_timeout) as deadline:
                protocol = await self._upgrade(stream, options)
            if deadline.cancelled_caught:
                raise ConnectError(f"{self}: no WebSocket upgrade within {options.handshake_timeout:g}s")
        except BaseException:
            await trio.aclose_forcefully(stream)
            raise
        channel = WebSocketChannel(stream, protocol, peer, options.max_message_bytes)
        with single_exception():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(channel.keepalive, options.ping_interval, options.ping_timeout)
                try:
                    yield channel
                finally:
                    await channel.aclose_with(CloseReason.NORMAL)
                    nursery.cancel_scope.cancel()

    async def _upgrade(self, stream: trio.abc.Stream, options: ConnectOptions) -> ClientProtocol:
        """Send the upgrade request and read the response.

        Raises:
            AccessDenied: refused with 401 or 403.
            ConnectError: refused otherwise, or not a WebSocket server.
        """
        protocol = ClientProtocol(
            parse_uri(str(self)),
            subprotocols=[SUBPROTOCOL],
            max_size=options.max_message_bytes,
            logger=wire_logger,
        )
        request = protocol.connect()
        if options.token is not None:
            request.headers["Authorization"] = f"Bearer {options.token}"
        protocol.send_request(request)
        try:
            await stream.send_all(b"".join(protocol.data_to_send()))
            while protocol.state is State.CONNECTING and protocol.handshake_exc is None:
                data = await stream.receive_some(RECEIVE_SIZE)
                if data:
                    protocol.receive_data(data)
                else:
                    protocol.receive_eof()
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise ConnectError(f"{self}: connection lost during the upgrade: {exc}") from None
        failure = protocol.handshake_exc
        if isinstance(failure, InvalidStatus):
            status = failure.response.status_code
            error = AccessDenied if status in (401, 403) else ConnectError
            raise error(
                f"{self}: upgrade refused with HTTP {status}"
                + _rejection_detail(bytes(failure.response.body))
            )
        if failure is not None:
            raise ConnectError(f"{self}: not a WebSocket server: {failure}")
        return protocol


def _select_subprotocol(protocol: ServerProtocol, offered: Sequence[Subprotocol]) -> Subprotocol | None:
    """``mcp`` if the client offers it; otherwise no subprotocol (not a refusal)."""
    return SUBPROTOCOL if SUBPROTOCOL in offered else None


def _raw_headers(headers: Headers) -> list[tuple[bytes, bytes]]:
    return [
        (name.lower().encode("latin-1", "replace"), value.encode("latin-1", "replace"))
        for name, value in headers.raw_items()
    ]


async def _read_request(stream: trio.abc.Stream, protocol: ServerProtocol) -> tuple[Request, bytes]:
    """Read until the upgrade request is complete; return it and the bytes that followed it.

    The library gets the request's bytes only: frames sent before the answer (the client should
    wait for it, RFC 6455 §4.1) are the channel's to read, from a frame boundary.

    Raises:
        HandshakeError: the peer left, or sent something that is not an HTTP request (it was
            answered with 400, or 431/414 for oversized headers).
    """
    tail = b""  # the last bytes read, for an end of headers split between two reads
    while True:
        try:
            data = await stream.receive_some(RECEIVE_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise HandshakeError(f"connection lost before the upgrade request: {exc}") from None
        if not data:
            raise HandshakeError("connection closed before a complete upgrade request")
        end = (tail + data).find(END_OF_HEADERS)
        cut = len(data) if end < 0 else end + len(END_OF_HEADERS) - len(tail)
        protocol.receive_data(data[:cut])
        tail = (tail + data)[-(len(END_OF_HEADERS) - 1) :]
        for event in protocol.events_received():
            if isinstance(event, Request):
                return event, bytes(data[cut:])
        if protocol.handshake_exc is not None:
            pending = [chunk for chunk in protocol.data_to_send() if chunk]
            if not pending:
                protocol.send_response(protocol.reject(400, "Bad Request: not an HTTP request\n"))
            await _send_response(stream, protocol, None, pending)
            raise HandshakeError(f"not an upgrade request: {protocol.handshake_exc}")


def _rejection(protocol: ServerProtocol, rejection: Rejection) -> Response:
    response = protocol.reject(rejection.status, rejection.body().decode())
    del response.headers["Content-Type"]
    for name, value in rejection.headers():
        response.headers[name.decode()] = value.decode()
    return response


async def _send_response(
    stream: trio.abc.Stream,
    protocol: ServerProtocol,
    response: Response | None,
    pending: Sequence[bytes] = (),
) -> None:
    """Send the handshake response (and anything the protocol queued before it)."""
    if response is not None:
        protocol.send_response(response)
    data = b"".join([*pending, *protocol.data_to_send()])
    try:
        await stream.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        raise HandshakeError(f"connection lost while answering the upgrade: {exc}") from None


def _rejection_detail(body: bytes | None) -> str:
    if not body:
        return ""
    text = body[:200].decode(errors="replace")
    return f": {text}"


@register_address_kind
@attrs.frozen
class WebSocketAddress(_WebSocketAddress):
    """``ws://HOST:PORT/PATH``: one JSON-RPC message per WebSocket text frame, over TCP.

    The port defaults to 80; the path to ``/``; a query string or fragment is refused. IPv6 hosts
    are bracketed.
    """

    scheme = "ws"
    endpoint: Endpoint


@register_address_kind
@attrs.frozen
class SecureWebSocketAddress(_WebSocketAddress):
    """``wss://HOST:PORT/PATH``: one JSON-RPC message per WebSocket text frame, over TLS.

    The port defaults to 443; the path to ``/``; a query string or fragment is refused. IPv6
    hosts are bracketed.
    """

    scheme = "wss"
    endpoint: Endpoint
