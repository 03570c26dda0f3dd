"""WebSocket listeners: accepting a TCP connection, and establishing the channel over it.

:class:`WebSocketListener` only accepts (and wraps ``wss`` connections in TLS);
:class:`WebSocketIncoming` runs the TLS handshake and the upgrade (:mod:`channels._ws.upgrade`)
in the connection's own task, within the handshake timeout, then keeps the channel alive with
pings while its block runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, NoReturn, final

import attrs
import trio

from .._core.channel import CloseReason, MessageChannel, PeerInfo
from .._core.fdio import TLS_STREAMS
from .._core.guard import RequestGuard
from .._core.listener import HandshakeError, Incoming, IncomingHandler, MessageListener, tls_handshake
from .._core.options import ListenOptions
from .._core.unwrap import single_exception
from .._sockets.endpoint import Endpoint
from .._sockets.tcp import accept_tcp, format_host_port
from .channel import WebSocketChannel
from .upgrade import Upgrade, accept_upgrade

if TYPE_CHECKING:
    from .._core.tlscontext import ServerTls  # wss:// only (channels._sockets.endpoint.server_tls)
    from .oauth import WsOAuth  # with ListenOptions.oauth only: it loads channels._oauth


@final
@attrs.define(eq=False)
class WebSocketIncoming(Incoming):
    """An accepted TCP connection that must upgrade to WebSocket (after TLS, for ``wss``).

    From a shared host (:class:`~channels.WebSocketHost`), the TLS handshake is done and the
    request read and routed already (``upgrade``), and the open channel is kept in ``opened``
    (the mount's, which closes them when unmounted) while its block runs.
    """

    stream: trio.abc.Stream
    initial_peer: PeerInfo
    endpoint: Endpoint
    guard: RequestGuard
    options: ListenOptions
    oauth: WsOAuth | None = None
    upgrade: Upgrade | None = None
    opened: set[WebSocketChannel] | None = None

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
                    if self.opened is not None:
                        self.opened.add(channel)
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
                        if self.opened is not None:
                            self.opened.discard(channel)
                        await channel.aclose_with(CloseReason.NORMAL)
                    await trio.aclose_forcefully(self.stream)
                    nursery.cancel_scope.cancel()

    async def _handshake(self) -> WebSocketChannel:
        peer = self.initial_peer
        if self.upgrade is None and isinstance(self.stream, TLS_STREAMS):
            peer = await tls_handshake(self.stream, peer)
        path = self.endpoint.path if self.upgrade is None else None  # a host routed it by its path
        return await accept_upgrade(
            self.stream, peer, path, self.guard, self.options.max_message_bytes, self.oauth, self.upgrade
        )

    async def aclose(self) -> None:
        await self.stream.aclose()


@final
class WebSocketListener(MessageListener):
    """Accepts TCP connections to upgrade to WebSocket; owns its socket and its OAuth check.

    With ``options.oauth`` (audiences filled in), it creates a :class:`~channels._ws.oauth.WsOAuth`
    whose verifier runs in :meth:`serve`'s nursery, and guards Host and Origin with ``guard``
    while the OAuth check takes the tokens (static ones first).
    """

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
        self._oauth = None
        if options.oauth is not None:
            from .oauth import WsOAuth

            self._oauth = WsOAuth(options.oauth, options.tokens)
        self._guard = attrs.evolve(guard, tokens=None) if self._oauth is not None else guard
        self._options = options
        self._tls = tls
        host, port = listener.socket.getsockname()[:2]
        self._address = f"{endpoint.transport}://{format_host_port(host, port)}{endpoint.path}"

    @property
    def address(self) -> str:
        return self._address

    async def accept(self) -> Incoming:
        wrapped, peer = await accept_tcp(
            self._listener,
            self._endpoint.transport,
            self._tls,
            https_compatible=True,
            keepalive=self._options.tcp_keepalive,
        )
        return WebSocketIncoming(wrapped, peer, self._endpoint, self._guard, self._options, self._oauth)

    @property
    def oauth_outcomes(self) -> Mapping[str, int] | None:
        return self._oauth.verifier.outcomes if self._oauth is not None else None

    async def serve(
        self,
        handler: IncomingHandler,
        handler_nursery: trio.Nursery,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> NoReturn:
        """Accept as any listener does, with the OAuth verifier running beside (if any)."""
        async with trio.open_nursery() as nursery:
            if self._oauth is not None:
                await nursery.start(self._oauth.run)
            await super().serve(handler, handler_nursery, task_status=task_status)

    async def aclose(self) -> None:
        await self._listener.aclose()
