"""One WebSocket socket shared by several servers, each mounted at its own path: :class:`WebSocketHost`.

The WebSocket counterpart of :class:`~channels.HttpHost`, with the same contract: opened once
(``await WebSocketHost.open("ws://127.0.0.1:8081", options)``) by whoever serves several servers
on one port (the bridge's fleet), served with ``await nursery.start(host.serve)``, closed with
``aclose()``; it outlives the servers mounted on it. Each server gets a
:class:`WebSocketMountAddress` from :meth:`WebSocketHost.mount_address` (``{prefix}/{name}/ws``
by default), an ordinary :class:`~channels.Address` whose ``listen(options)`` mounts it with that
server's own options (tokens, OAuth, message limit, pings) and whose listener is served as a
``ws://`` address's is; closing that listener unmounts the server: its open WebSockets get a close
frame 1001 (going away), and later upgrades to its path 404.

The host keeps what belongs to the socket: accepting, TCP keepalive, the TLS handshake, and
reading each upgrade request within its own handshake timeout, to route it. Routing is
:mod:`channels._core.mounts`', the same as an HTTP host's: the path of the target matches a mount
exactly and case-sensitively, after refusing dot segments and encoded slashes or dots (400) and
targets over 2 KiB (414); an unknown path gets 404 with a JSON body naming no server; a path
mounted but not served, 503. A WebSocket host has no index (an HTTP host's lists its servers).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, NoReturn, Self, final

import attrs
import trio

from .._core.address import AddressError
from .._core.channel import MessageChannel, PeerInfo
from .._core.fdio import TLS_STREAMS
from .._core.guard import Rejection, RequestGuard
from .._core.listener import HandshakeError, MessageListener, tls_handshake
from .._core.mounts import (
    MAX_TARGET_BYTES,
    NOT_FOUND,
    MountAddress,
    MountTable,
    check_mount_path,
    mount_path,
    unsafe_target,
)
from .._core.options import ConnectOptions, ListenOptions, TcpKeepalive
from .._sockets.endpoint import Endpoint, parse_endpoint, resolve_audience, server_tls
from .._sockets.tcp import accept_tcp, check_exposure, format_host_port, open_tcp_listeners
from .address import SecureWebSocketAddress, WebSocketAddress
from .mount import WebSocketMount, WebSocketMountListener
from .upgrade import read_upgrade, refuse_upgrade

if TYPE_CHECKING:
    from .._core.tlscontext import ServerTls  # https:// and wss:// only (server_tls loads it)

logger = logging.getLogger("channels.websocket")

# Where servers are mounted unless the host is told otherwise: PREFIX/NAME/ws (as an HTTP host's).
DEFAULT_PREFIX = "/servers"


@attrs.define(eq=False)
class _Accepted(trio.abc.AsyncResource):
    """An accepted connection (TLS-wrapped for ``wss``, its handshake not done) and its peer.

    ``trio.serve_listeners`` closes it once routed: closing closes the stream unless it was
    handed over to a mount (``handed``), whose WebSocket then owns it.
    """

    stream: trio.abc.Stream
    peer: PeerInfo
    handed: bool = False

    async def aclose(self) -> None:
        if not self.handed:
            await trio.aclose_forcefully(self.stream)
        else:
            await trio.lowlevel.checkpoint()


@attrs.frozen(eq=False)
class _Socket(trio.abc.Listener[_Accepted]):
    """One bound socket, whose ``accept`` gives an :class:`_Accepted`.

    A listener so that ``trio.serve_listeners`` accepts on it, with its retries when out of
    file descriptors.
    """

    listener: trio.SocketListener
    transport: str
    tls: ServerTls | None
    keepalive: TcpKeepalive | None

    async def accept(self) -> _Accepted:
        stream, peer = await accept_tcp(
            self.listener, self.transport, self.tls, https_compatible=True, keepalive=self.keepalive
        )
        return _Accepted(stream, peer)

    async def aclose(self) -> None:
        await self.listener.aclose()


@final
class WebSocketHost:
    """One WebSocket socket (``ws://`` or ``wss://``) serving several mounted servers by path.

    Owned by whoever opened it (:meth:`open`): it runs ``await nursery.start(host.serve)`` and
    closes the host with :meth:`aclose` at the end (closing also unmounts what is still mounted).
    """

    def __init__(
        self,
        sockets: list[_Socket],
        endpoint: Endpoint,
        address: str,
        options: ListenOptions,
        tls: ServerTls | None,
    ) -> None:
        """Use :meth:`open`."""
        self._sockets = sockets
        self._tls = tls
        self._endpoint = endpoint  # the scheme, bind host, bound port; its path is the prefix
        self._address = address
        self._options = options
        self._table: MountTable[WebSocketMount, None] = MountTable(address)

    @classmethod
    async def open(cls, url: str, options: ListenOptions, *, prefix: str = DEFAULT_PREFIX) -> Self:
        """Bind ``url`` (``ws://HOST:PORT`` or ``wss://HOST:PORT``), mounting under ``prefix``.

        ``options`` are the socket's own: TLS files, TCP keepalive, the handshake timeout (for
        reading an upgrade request, before it is routed), and ``allow_hosts``/``allow_origins``
        (added to each mount's own). Each mount brings its own security to
        :meth:`mount_address`'s ``listen``. The caller owns the host and closes it.

        Raises:
            AddressError: another scheme, a path in the URL, or a bad ``prefix``.
            ListenError: the bind failed; ``wss://`` without a certificate.
        """
        problem = check_mount_path(prefix, "prefix")
        if problem is not None:
            raise AddressError(f"{url}: {problem}")
        scheme = url.partition(":")[0]
        if scheme not in ("ws", "wss"):
            raise AddressError(f"{url!r}: a shared WebSocket listener is ws://HOST:PORT or wss://HOST:PORT")
        endpoint = parse_endpoint(url, scheme, kind="a shared WebSocket listener", example_path="")
        if endpoint.path != "/":
            raise AddressError(
                f"{url!r}: a shared listener takes no path; its servers are mounted under a prefix"
            )
        address = url.rstrip("/")
        tls = server_tls(endpoint, address, options)
        listeners = await open_tcp_listeners(address, endpoint.host, endpoint.port)
        port = listeners[0].socket.getsockname()[1]
        address = f"{scheme}://{format_host_port(endpoint.host, port)}"
        sockets = [_Socket(one, scheme, tls, options.tcp_keepalive) for one in listeners]
        return cls(sockets, attrs.evolve(endpoint, port=port, path=prefix), address, options, tls)

    @property
    def address(self) -> str:
        """``SCHEME://HOST:PORT`` with the bound port."""
        return self._address

    @property
    def prefix(self) -> str:
        """Where servers are mounted by default: ``{prefix}/{name}/ws``."""
        return self._endpoint.path

    @property
    def mounts(self) -> Mapping[str, str]:
        """The servers mounted now: name to path."""
        return {name: mount.endpoint.path for name, mount in self._table.names.items()}

    def mount_address(self, name: str, path: str | None = None) -> WebSocketMountAddress:
        """The address that mounts server ``name`` at ``path`` (default ``{prefix}/{name}/ws``).

        Nothing is registered until its ``listen(options)``; see :class:`WebSocketMountAddress`.

        Raises:
            ListenError: ``name`` is not ``[A-Za-z0-9][A-Za-z0-9._-]{0,63}``, or ``path`` is
                not an absolute path of safe segments (no dot segments, no ``%``, no query).
        """
        return WebSocketMountAddress(self, name, mount_path(self._address, self.prefix, name, path, "ws"))

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> NoReturn:
        """Accept and route upgrades until cancelled; ``task_status.started()`` once accepting.

        Each connection is read and routed in a task of this call; once routed, it is the
        mount's (its WebSocket runs in the bridge's handler nursery, and outlives a cancelled
        ``serve``).
        """
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self._route, self._sockets)
            task_status.started()
        raise AssertionError("unreachable")  # pragma: no cover

    async def _route(self, accepted: _Accepted) -> None:
        """TLS, the upgrade request, and the mount its path names (or the refusal); within the timeout."""
        stream, peer = accepted.stream, accepted.peer
        rejection: Rejection | None
        timeout = self._options.handshake_timeout
        try:
            with trio.move_on_after(timeout) as deadline:
                if isinstance(stream, TLS_STREAMS):
                    peer = await tls_handshake(stream, peer)
                upgrade = await read_upgrade(stream, self._options.max_message_bytes)
                target = upgrade.target
                path = target.partition("?")[0]
                found = self._table.get(path) if len(target) <= MAX_TARGET_BYTES else None
                if found is None:
                    rejection = unsafe_target(target) or NOT_FOUND
                else:
                    rejection = found[0].hand_over(stream, peer, upgrade)
                    accepted.handed = rejection is None
                if rejection is not None:
                    await refuse_upgrade(stream, upgrade, rejection)
                    logger.info("%s: upgrade refused with %d: %s", peer, rejection.status, rejection.message)
            if deadline.cancelled_caught:
                logger.info("%s: refused: no WebSocket upgrade within %gs", peer, timeout)
        except HandshakeError as exc:
            logger.info("%s: refused: %s", peer, exc)
        finally:
            await accepted.aclose()

    def reload_certificates(self) -> bool:
        """Read the TLS certificate and key again, if the host has TLS (see ``MessageListener``).

        Raises:
            ListenError: a file cannot be loaded; the ones in use stay.
        """
        if self._tls is None:
            return False
        self._tls.reload()
        return True

    async def aclose(self) -> None:
        """Close the socket and unmount every server still mounted (their WebSockets close, 1001)."""
        self._table.closed = True
        for mount in list(self._table.names.values()):
            await self._unmount(mount)
        for one in self._sockets:
            await trio.aclose_forcefully(one)

    # --- mounts (for WebSocketMountAddress and its listener) ----------------------------

    async def _mount(self, address: WebSocketMountAddress, options: ListenOptions) -> WebSocketMount:
        """Route ``address``'s path to a new mount with ``options`` (see its ``listen``)."""
        self._table.check(address, address.name)
        own = self._options
        options = attrs.evolve(
            options,
            allow_hosts=options.allow_hosts | own.allow_hosts,
            allow_origins=options.allow_origins | own.allow_origins,
        )
        host = self._endpoint.host
        loopback = await check_exposure(address, host, options, encrypted=self._endpoint.secure, web=True)
        guard = RequestGuard.create(
            loopback=loopback,
            bind_host=host,
            allow_hosts=options.allow_hosts,
            allow_origins=options.allow_origins,
            tokens=options.tokens,
        )
        endpoint = attrs.evolve(self._endpoint, path=address.path)
        oauth = None
        if options.oauth is not None:  # audience: the mount's own URL unless configured
            options = attrs.evolve(options, oauth=resolve_audience(options.oauth, endpoint, address))
            assert options.oauth is not None
            from .oauth import WsOAuth  # OAuth's machinery loads only where a mount uses it

            oauth = WsOAuth(options.oauth, options.tokens)
            guard = attrs.evolve(guard, tokens=None)
        mount = WebSocketMount(address.name, endpoint, guard, options, oauth)
        self._table.mount(address, address.name, mount, {address.path: None})
        return mount

    async def _unmount(self, mount: WebSocketMount) -> None:
        """Route nothing to ``mount`` any more and close its WebSockets; its path gets 404."""
        self._table.unmount(mount)
        await mount.close()


@final
@attrs.frozen
class WebSocketMountAddress(MountAddress[WebSocketHost]):
    """Server ``name`` mounted at ``path`` on a :class:`WebSocketHost` (see :class:`~channels.MountAddress`).

    Two compare equal iff they have the same host (the same object), name and path, so an
    unchanged server's configuration stays equal across reloads. ``str()`` is the endpoint's
    URL, ``f"{host.address}{path}"``.
    """

    scheme = "ws-mount"

    async def listen(self, options: ListenOptions) -> list[MessageListener]:
        """Mount the server with its own ``options``; return its one listener (the caller's).

        ``options`` are the server's: tokens, OAuth (audience: this mount's URL by default),
        ``allow_hosts``, ``allow_origins``, ``max_message_bytes``, pings, the handshake timeout
        (for checking and answering its upgrades). The listener's ``serve(handler,
        handler_nursery)`` hands the bridge this server's connections as a ``ws://`` listener's
        does; until it serves, and once it stops serving, upgrades to the path get 503. Its
        ``aclose()`` unmounts: the mount's WebSockets get close 1001 and later upgrades 404.

        Raises:
            ListenError: the path or the name is mounted already (naming both servers); the host
                is closed; beyond loopback without authentication.
        """
        mount = await self.host._mount(self, options)
        return [WebSocketMountListener(str(self), mount, self.host._unmount)]

    @asynccontextmanager
    async def connect(self, options: ConnectOptions) -> AsyncIterator[MessageChannel]:
        """Connect to the mounted server as a WebSocket client (as ``ws://`` does).

        Raises:
            AccessDenied: the upgrade was refused with 401 or 403.
            ConnectError: the server cannot be reached, or refused the upgrade otherwise.
        """
        endpoint = attrs.evolve(self.host._endpoint, path=self.path)
        kind = SecureWebSocketAddress if endpoint.secure else WebSocketAddress
        async with kind(endpoint).connect(options) as channel:
            yield channel
