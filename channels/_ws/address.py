"""WebSocket addresses, ``ws://HOST:PORT/PATH`` and ``wss://...``: each listens and connects.

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

The opening handshake is :mod:`channels._ws.upgrade` (the server's side) and
:mod:`channels._ws.dial` (the client's); the listener and the accepted
connection are :mod:`channels._ws.listener`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Self

import attrs
import trio

from .._core.address import Address, register_address_kind
from .._core.channel import CloseReason, MessageChannel, PeerInfo
from .._core.guard import RequestGuard
from .._core.listener import MessageListener
from .._core.options import ConnectError, ConnectOptions, ListenOptions
from .._core.unwrap import single_exception
from .._sockets.endpoint import Endpoint, parse_endpoint, resolve_audience, server_tls
from .._sockets.tcp import check_exposure, format_host_port, open_tcp_listeners, open_tcp_stream
from .channel import WebSocketChannel
from .listener import WebSocketListener


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
        tls = server_tls(endpoint, self, options)
        loopback = await check_exposure(self, endpoint.host, options, encrypted=endpoint.secure, web=True)
        guard = RequestGuard.create(
            loopback=loopback,
            bind_host=endpoint.host,
            allow_hosts=options.allow_hosts,
            allow_origins=options.allow_origins,
            tokens=options.tokens,
        )
        if options.oauth is not None:  # a bind on a wildcard host without an audience: refused unbound
            resolve_audience(options.oauth, endpoint, self)
        sockets = await open_tcp_listeners(self, endpoint.host, endpoint.port)
        if options.oauth is not None:  # the default audience has the port bound, for port 0
            port = sockets[0].socket.getsockname()[1]
            bound = attrs.evolve(endpoint, port=port)
            options = attrs.evolve(options, oauth=resolve_audience(options.oauth, bound, self))
        return [WebSocketListener(listener, endpoint, guard, options, tls) for listener in sockets]

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
        from .dial import request_upgrade  # a client only: a WebSocket server loads no client code

        endpoint = self.endpoint
        if endpoint.secure:
            from .._core.tlscontext import client_context  # wss:// only: ws:// loads no TLS module
            from .._sockets.tls import open_tls_client_stream

            client_context(self, options)  # bad files fail before any connection is made
            stream: trio.abc.Stream = await open_tls_client_stream(
                self, endpoint.host, endpoint.port, options, https_compatible=True
            )
        else:
            stream = await open_tcp_stream(self, endpoint.host, endpoint.port, options.handshake_timeout)
        peer = PeerInfo(endpoint.transport, format_host_port(endpoint.host, endpoint.port))
        try:
            with trio.move_on_after(options.handshake_timeout) as deadline:
                protocol = await request_upgrade(stream, self, options)
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
