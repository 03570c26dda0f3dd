"""One HTTP(S) socket shared by several servers, each mounted at its own path: :class:`HttpHost`.

A host is opened once (``await HttpHost.open("http://127.0.0.1:8080", options)``) by whoever
serves several servers on one port (the bridge's fleet), served with
``await nursery.start(host.serve)`` and closed with ``aclose()``; it outlives the servers mounted
on it. Each server gets an :class:`HttpMountAddress` from :meth:`HttpHost.mount_address`, an
ordinary :class:`~channels.Address` whose ``listen(options)`` mounts it with that server's own
options (tokens, OAuth, sessions, CORS, metadata) and whose listener is served exactly as an
``http://`` address's is; closing that listener unmounts the server.

Per mount at path ``P``: the MCP endpoint at ``P``; the 2024-11-05 HTTP+SSE endpoints at
``dirname(P)/sse`` and ``dirname(P)/messages``; the protected-resource metadata at
``/.well-known/oauth-protected-resource{P}`` (RFC 9728, path-suffixed). Sessions are the
mount's own: one server's session id is unknown (404) to another.

The host keeps everything socket-level: connection slots, head and keep-alive deadlines, the TLS
handshake, TCP keepalive, parsing and its limits. Before any route, a request target is refused
if it could confuse routing (docs/security.md, "One port for many servers";
:mod:`channels._http.server.routing`): dot segments and encoded slashes or dots (400), a target
over 2 KiB (414); paths match exactly and case-sensitively (a trailing slash is another path),
and an unknown path gets a 404 whose JSON body names no server.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import NoReturn, Self, final

import attrs
import trio

from .._core.address import AddressError
from .._core.channel import MessageChannel
from .._core.jsonrpc import JSONObject
from .._core.listener import Incoming, MessageListener
from .._core.mounts import MountAddress, check_mount_path, mount_path
from .._core.options import ConnectOptions, ListenOptions
from .._sockets.activation import listen_only
from .._sockets.tcp import check_exposure
from .address import http_service
from .binding import Bound, bind_shared
from .mount import HttpMountListener
from .server.call import HttpCall, method_not_allowed
from .server.front import HttpFront
from .server.service import HttpService

# Where servers are mounted unless the host is told otherwise: PREFIX/NAME/mcp.
DEFAULT_PREFIX = "/servers"


@final
class HttpHost:
    """One HTTP or HTTPS socket serving several mounted servers by path.

    Owned by whoever opened it (:meth:`open`): it runs ``await nursery.start(host.serve)`` and
    closes the host with :meth:`aclose` at the end (closing also unmounts what is still mounted).

    Attributes:
        index: what ``GET {prefix}`` and ``GET {prefix}/`` list, set by the owner: a callable
            returning one JSON object per server (name, path, era, state...). ``None``: each
            mount's name and path. Answered only to callers passing the host's own
            authentication (its options' tokens or OAuth; loopback without either is open), and
            404 when the host was opened with ``index=False``.
    """

    index: Callable[[], list[JSONObject]] | None

    def __init__(self, bound: Bound, front: HttpFront, options: ListenOptions) -> None:
        """Use :meth:`open`."""
        self.index = None
        self._sockets = bound.sockets
        self._front = front
        self._endpoint = bound.endpoint  # the scheme, bind host, bound port; its path is the prefix
        self._address = bound.address
        self._options = options
        self._tls = bound.tls

    @classmethod
    async def open(
        cls,
        url_or_address: str,
        options: ListenOptions,
        *,
        prefix: str = DEFAULT_PREFIX,
        index: bool = True,
    ) -> Self:
        """Bind ``url_or_address`` (``http://HOST:PORT``, ``https://HOST:PORT`` or ``http+fd:NAME``).

        ``options`` are the listener's own: TLS files, TCP keepalive, the handshake timeout,
        ``allow_hosts``/``allow_origins``/``http.trust_proxy`` (added to each mount's own), and
        the tokens and OAuth that guard the index alone (each mount brings its own security to
        :meth:`mount_address`'s ``listen``). The caller owns the host and closes it.

        Raises:
            AddressError: another scheme, a path in the URL, or a bad ``prefix`` (it must start
                with ``/``, end without one, and have no dot segments nor ``%``).
            ListenError: the bind failed; ``https://`` without a certificate; an index beyond
                loopback without authentication or opt-out.
        """
        problem = check_mount_path(prefix, "prefix")
        if problem is not None:
            raise AddressError(f"{url_or_address}: {problem}")
        bound = await bind_shared(url_or_address, options, prefix, guarded=index)
        try:
            front = HttpFront(options, strict=True, address=bound.address)
            host = cls(bound, front, options)
            answer = host._answer_index
            routes = {prefix: answer, prefix + "/": answer} if index else {}
            # The index's checks; without an index, the Host and Origin checks of unknown paths.
            endpoint = bound.endpoint
            service = http_service(
                endpoint, bound.loopback, options, endpoint, bound.address, front.ticker, routes=routes
            )
        except BaseException:
            for one in bound.sockets:
                await trio.aclose_forcefully(one.listener)
            raise
        front.fallback = service
        if index:
            front.add(service)
        return host

    @property
    def address(self) -> str:
        """``SCHEME://HOST:PORT`` with the bound port (``http+fd:NAME`` for an activated socket)."""
        return self._address

    @property
    def prefix(self) -> str:
        """Where servers are mounted by default: ``{prefix}/{name}/mcp``."""
        return self._endpoint.path

    @property
    def mounts(self) -> Mapping[str, str]:
        """The servers mounted now: name to endpoint path."""
        return {name: service.endpoint.path for name, service in self._front.routes.names.items()}

    def mount_address(self, name: str, path: str | None = None) -> HttpMountAddress:
        """The address that mounts server ``name`` at ``path`` (default ``{prefix}/{name}/mcp``).

        Nothing is registered until its ``listen(options)``; see :class:`HttpMountAddress`.

        Raises:
            ListenError: ``name`` is not ``[A-Za-z0-9][A-Za-z0-9._-]{0,63}``, or ``path`` is
                not an absolute path of safe segments (no dot segments, no ``%``, no query).
        """
        return HttpMountAddress(self, name, mount_path(self._address, self.prefix, name, path, "mcp"))

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> NoReturn:
        """Accept and serve connections until cancelled; ``task_status.started()`` once accepting.

        Connections run inside this call: cancelling it ends them. Each request goes to the mount
        its path names, in that mount's handler nursery (see :meth:`HttpMountAddress.listen`).
        """
        front = self._front
        index = front.fallback
        assert index is not None
        try:
            async with trio.open_nursery() as nursery:
                index.attach(_no_incoming, nursery)
                await front.start_ticker(nursery)
                await index.start_oauth(nursery)
                for one in self._sockets:
                    nursery.start_soon(one.accept_into, front, nursery)
                task_status.started()
        finally:
            front.stop()
            index.stop()
        raise AssertionError("unreachable")  # pragma: no cover

    async def _answer_index(self, call: HttpCall) -> None:
        if call.request.method != "GET":
            raise method_not_allowed(call.allow(b"GET"))
        if self.index is not None:
            servers = self.index()
        else:
            servers = [{"name": name, "path": path} for name, path in self.mounts.items()]
        body = json.dumps({"servers": servers}).encode()
        await call.respond(200, [(b"content-type", b"application/json")], body)

    def reload_certificates(self) -> bool:
        """Read the TLS certificate and key again, if the host has TLS (see ``MessageListener``).

        Raises:
            ListenError: a file cannot be loaded; the ones in use stay.
        """
        if self._tls is None:
            return False
        self._tls.reload()
        return True

    @property
    def oauth_outcomes(self) -> Mapping[str, int] | None:
        """With OAuth on the host (the index's): its verifier's outcome counts."""
        index = self._front.fallback
        return index.oauth.verifier.outcomes if index is not None and index.oauth is not None else None

    async def aclose(self) -> None:
        """Close the socket and unmount every server still mounted (their sessions end)."""
        self._front.routes.closed = True
        for service in list(self._front.routes.names.values()):
            await self._unmount(service)
        for one in self._sockets:
            await trio.aclose_forcefully(one.listener)

    # --- mounts (for HttpMountAddress and its listener) ---------------------------------

    async def _mount(self, mount: HttpMountAddress, options: ListenOptions) -> HttpService:
        """Route ``mount``'s paths to a new service with ``options``; see :meth:`HttpMountAddress.listen`."""
        self._front.routes.check(mount, mount.name)
        own = self._options
        options = attrs.evolve(
            options,
            allow_hosts=options.allow_hosts | own.allow_hosts,
            allow_origins=options.allow_origins | own.allow_origins,
            http=attrs.evolve(options.http, trust_proxy=options.http.trust_proxy or own.http.trust_proxy),
        )
        loopback = await check_exposure(
            mount, self._endpoint.host, options, encrypted=self._endpoint.secure, web=True
        )
        endpoint = attrs.evolve(self._endpoint, path=mount.path)
        service = http_service(
            endpoint,
            loopback,
            options,
            endpoint,
            mount,
            self._front.ticker,
            name=mount.name,
            bare_metadata=False,
        )
        self._front.add(service, mount)
        return service

    async def _unmount(self, service: HttpService) -> None:
        """Route nothing to ``service`` any more and end its sessions; its paths get 404."""
        self._front.remove(service)
        await service.close()


async def _no_incoming(incoming: Incoming) -> None:  # pragma: no cover (the index starts no channel)
    await incoming.aclose()


@final
@attrs.frozen
class HttpMountAddress(MountAddress[HttpHost]):
    """Server ``name`` mounted at ``path`` on an :class:`HttpHost` (see :class:`~channels.MountAddress`).

    Two compare equal iff they have the same host (the same object), name and path, so an
    unchanged server's configuration stays equal across reloads. ``str()`` is the endpoint's
    URL, ``f"{host.address}{path}"``.
    """

    scheme = "http-mount"

    async def listen(self, options: ListenOptions) -> list[MessageListener]:
        """Mount the server with its own ``options``; return its one listener (the caller's).

        ``options`` are the server's: tokens, OAuth (audience: this mount's URL by default),
        ``http`` (sessions cap and idle timeout, CORS, metadata, trust_proxy), ``allow_hosts``,
        ``allow_origins``, ``max_message_bytes``. The listener's ``serve(handler,
        handler_nursery)`` hands the bridge this server's incomings exactly as an ``http://``
        listener's does; until it serves, and once it stops serving, the mount's requests get
        503. Its ``aclose()`` unmounts: the mount's sessions and streams end, and its paths get
        404 from then on. To mount a server again at the same path, close the old listener first.

        Raises:
            ListenError: the path, a sibling path or the metadata path is already mounted (naming
                both servers), or the name is; the host is closed; beyond loopback without
                authentication.
        """
        service = await self.host._mount(self, options)
        return [HttpMountListener(str(self), service, self.host._unmount)]

    @asynccontextmanager
    async def connect(self, options: ConnectOptions) -> AsyncIterator[MessageChannel]:
        """Connect to the mounted server as a Streamable HTTP client (as ``http://`` does).

        Raises:
            ConnectError: the server cannot be reached (or the host is socket-activated: it only
                listens).
        """
        if self.host.address.startswith("http+fd:"):
            async with listen_only(self) as channel:
                yield channel
            return
        endpoint = attrs.evolve(self.host._endpoint, path=self.path)
        from .client.channel import open_http_client  # a serving bridge never loads the client

        async with open_http_client(endpoint, options) as channel:
            yield channel
