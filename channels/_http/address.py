"""Streamable HTTP addresses and listeners: ``http://HOST:PORT/PATH`` and ``https://...``.

The listener accepts TCP connections and serves each in a task of its own; what it hands the
bridge is not a connection but a session, a request or an SSE stream (see
:mod:`channels._http.server.service`), hence :meth:`HttpListener.serve` instead of ``accept``.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, NoReturn, Self, final

import attrs
import trio

from .._core.address import Address, AddressError, register_address_kind
from .._core.channel import ExchangeHandler, MessageChannel
from .._core.guard import RequestGuard
from .._core.listener import Incoming, IncomingHandler, MessageListener
from .._core.options import ConnectOptions, ListenError, ListenOptions, TcpKeepalive
from .._core.ticker import Ticker
from .._sockets.activation import activated_fds, adopt, listen_only
from .._sockets.endpoint import Endpoint, parse_endpoint, resolve_audience, server_tls
from .._sockets.tcp import check_exposure, format_host_port, open_tcp_listeners
from .accepting import HttpSocket
from .server.front import HttpFront
from .server.service import HttpService

if TYPE_CHECKING:
    from .._core.tlscontext import ServerTls  # https:// and wss:// only (server_tls loads it)

logger = logging.getLogger("channels.http")
# What an https:// listener offers in TLS's protocol negotiation: HTTP/1.1 only (no h2).
ALPN_PROTOCOLS = ("http/1.1",)


@final
class HttpListener(MessageListener):
    """Serves MCP over HTTP on one socket; owns the socket (not the front nor the service, shared).

    The front (connections, their limits) and the service (the MCP endpoint, its sessions and
    checks) are shared by every listener of one address: a host name may bind several sockets.
    """

    def __init__(
        self,
        listener: trio.SocketListener,
        front: HttpFront,
        service: HttpService,
        tls: ServerTls | None,
        *,
        address: str | None = None,
        keepalive: TcpKeepalive | None = None,
    ) -> None:
        self._front = front
        self._service = service
        self._tls = tls
        if address is None:
            host, port = listener.socket.getsockname()[:2]
            endpoint = service.endpoint
            address = f"{endpoint.scheme}://{format_host_port(host, port)}{endpoint.path}"
        self._address = address
        self._socket = HttpSocket(listener, service.endpoint.scheme, tls, keepalive, address)

    @property
    def address(self) -> str:
        return self._address

    async def accept(self) -> Incoming:
        """Not used: an HTTP connection is not one channel. Serve with :meth:`serve`.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError("an HTTP listener is served with serve(), not accept()")

    def dispatch_exchanges(self, handler: ExchangeHandler) -> None:
        self._service.exchanges = handler

    async def serve(
        self,
        handler: IncomingHandler,
        handler_nursery: trio.Nursery,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> NoReturn:
        """Accept TCP connections until cancelled; each is served in ``handler_nursery``.

        Connections run in ``handler_nursery`` so that, when this is cancelled (a graceful stop),
        responses in progress finish; idle keep-alive connections close and new requests get
        503 from then on.
        """
        service, front = self._service, self._front
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(service.mcp.reap_idle_sessions)
                service.attach(handler, handler_nursery)
                await front.start_ticker(handler_nursery)
                await service.start_oauth(handler_nursery)
                task_status.started()
                await self._socket.accept_into(front, handler_nursery)
        finally:
            front.stop()
            service.stop()

    @property
    def oauth_outcomes(self) -> Mapping[str, int] | None:
        oauth = self._service.oauth
        return oauth.verifier.outcomes if oauth is not None else None

    async def aclose(self) -> None:
        await self._socket.listener.aclose()


def http_service(
    endpoint: Endpoint,
    loopback: bool,
    options: ListenOptions,
    bound: Endpoint,
    address: object,
    ticker: Ticker,
    **kwargs: Any,
) -> HttpService:
    """The service of one HTTP endpoint, with its Host, Origin, token and OAuth checks.

    ``options.http.cors_origins`` are allowed origins too. OAuth's default audience is the
    canonical URI of ``bound`` (the endpoint with the port it was bound to). ``kwargs`` go to
    :class:`HttpService`.

    Raises:
        ListenError: OAuth without an audience on a wildcard bind.
    """
    guard = RequestGuard.create(
        loopback=loopback,
        bind_host=endpoint.host,
        allow_hosts=options.allow_hosts,
        allow_origins=options.allow_origins | options.http.cors_origins,
        tokens=options.tokens,
    )
    oauth = None
    if options.oauth is not None:
        settings = resolve_audience(options.oauth, bound, address)
        from .server.oauth import HttpOAuth  # OAuth's machinery loads only where it is used

        oauth = HttpOAuth(settings, options.tokens, endpoint.path)
    return HttpService(endpoint, guard, options, ticker, oauth, **kwargs)


def single_service(
    endpoint: Endpoint, loopback: bool, options: ListenOptions, bound: Endpoint, address: object
) -> tuple[HttpFront, HttpService]:
    """The front and the service of an ``http://`` address: one endpoint on its own sockets.

    Raises:
        ListenError: OAuth without an audience on a wildcard bind.
    """
    front = HttpFront(options)
    service = http_service(endpoint, loopback, options, bound, address, front.ticker)
    front.fallback = service
    front.add(service)
    return front, service


class _HttpAddress(Address):
    endpoint: Endpoint

    @classmethod
    def parse(cls, text: str) -> Self:
        """Parse ``SCHEME://HOST[:PORT][/PATH]`` (the path defaults to ``/``).

        Raises:
            AddressError: another scheme, no host, a bad port, or a query, fragment or user name.
        """
        return cls(parse_endpoint(text, cls.scheme, kind="an HTTP address"))  # type: ignore[call-arg]

    def __str__(self) -> str:
        return str(self.endpoint)

    async def listen(self, options: ListenOptions) -> list[MessageListener]:
        """Listen for MCP over HTTP on ``PATH``; the caller owns the listeners.

        Every request's ``Host``, ``Origin`` and bearer token are checked first (as for
        WebSocket; ``options.http.cors_origins`` are allowed origins too). ``https://`` needs
        ``options.tls_cert`` and ``options.tls_key``.

        Raises:
            ListenError: ``https://`` without a certificate, beyond loopback without
                authentication or opt-out, or the bind failed.
        """
        endpoint = self.endpoint
        tls = server_tls(endpoint, self, options, alpn=ALPN_PROTOCOLS)
        loopback = await check_exposure(self, endpoint.host, options, encrypted=endpoint.secure, web=True)
        if options.oauth is not None:  # a bind on a wildcard host without an audience: refused unbound
            resolve_audience(options.oauth, endpoint, self)
        sockets = await open_tcp_listeners(self, endpoint.host, endpoint.port)
        try:
            port = sockets[0].socket.getsockname()[1]
            bound = attrs.evolve(endpoint, port=port)
            front, service = single_service(endpoint, loopback, options, bound, self)
        except BaseException:
            for listener in sockets:
                await trio.aclose_forcefully(listener)
            raise
        keepalive = options.tcp_keepalive
        return [HttpListener(listener, front, service, tls, keepalive=keepalive) for listener in sockets]

    @asynccontextmanager
    async def connect(self, options: ConnectOptions) -> AsyncIterator[MessageChannel]:
        """Connect as a Streamable HTTP client (see :mod:`channels._http.client.channel`).

        Both MCP eras, decided per message: a client that opens with ``initialize`` gets a
        session (re-initialised transparently after a 404), 2026-07-28 requests are POSTed one by
        one with their routing headers. The channel is closed (its session deleted) when the
        block ends.

        Raises:
            ConnectError: the server cannot be reached (no connection, a failed TLS handshake,
                an unusable PEM file).
        """
        from .client.channel import open_http_client  # a serving bridge never loads the client

        async with open_http_client(self.endpoint, options) as channel:
            yield channel


@register_address_kind
@attrs.frozen
class HttpFdAddress(Address):
    """``http+fd:NAME/PATH``: Streamable HTTP on the sockets systemd passed as ``NAME``.

    Socket activation (``FileDescriptorName=NAME`` in the .socket unit), as ``fd:NAME`` but
    serving HTTP on ``PATH`` (default ``/mcp``) instead of newline-delimited JSON-RPC. A TCP
    socket gets the loopback rule of ``http://``; a Unix socket (for a reverse proxy on the same
    host) is treated as a loopback bind for the Host and Origin checks.
    """

    scheme = "http+fd"
    name: str
    path: str = "/mcp"

    @classmethod
    def parse(cls, text: str) -> Self:
        """Parse ``http+fd:NAME[/PATH]``.

        Raises:
            AddressError: no name.
        """
        rest = text.removeprefix("http+fd:")
        name, slash, path = rest.partition("/")
        if not name or ":" in name or "?" in path or "#" in path:
            raise AddressError(
                f"{text!r}: expected http+fd:NAME/PATH, NAME being the socket unit's FileDescriptorName="
            )
        return cls(name, "/" + path if slash else "/mcp")

    def __str__(self) -> str:
        return f"http+fd:{self.name}{self.path}"

    async def listen(self, options: ListenOptions) -> list[MessageListener]:
        """Adopt the sockets passed under ``NAME`` and serve HTTP on them; the caller owns them.

        Raises:
            ListenError: none were passed under that name, one is not a listening stream socket,
                or a TCP one is beyond loopback without authentication.
        """
        await trio.lowlevel.checkpoint()
        sockets = [adopt(fd, self) for fd in activated_fds(self.name, self)]
        try:
            first = sockets[0].getsockname()
            if sockets[0].family == socket.AF_UNIX:
                host, port, loopback = "localhost", 80, True
            else:
                host, port = first[0], first[1]
                loopback = all(
                    [
                        await check_exposure(self, sock.getsockname()[0], options, encrypted=False, web=True)
                        for sock in sockets
                    ]
                )
        except BaseException:
            for sock in sockets:
                sock.close()
            raise
        endpoint = Endpoint("http", host, port, self.path)
        if options.oauth is not None and not options.oauth.audiences and sockets[0].family == socket.AF_UNIX:
            for sock in sockets:
                sock.close()
            raise ListenError(
                f"{self}: OAuth on a socket-activated Unix socket needs the public URI as the token "
                "audience: pass --oauth-audience, for example --oauth-audience https://mcp.example.com/mcp"
            )
        try:
            front, service = single_service(endpoint, loopback, options, endpoint, self)
        except BaseException:
            for sock in sockets:
                sock.close()
            raise
        return [
            HttpListener(
                trio.SocketListener(trio.socket.from_stdlib_socket(sock)),
                front,
                service,
                None,
                address=str(self),
                keepalive=options.tcp_keepalive,
            )
            for sock in sockets
        ]

    def connect(self, options: ConnectOptions) -> AbstractAsyncContextManager[MessageChannel]:
        """Not possible: an ``http+fd:`` address only listens.

        Raises:
            ConnectError: always, on entering the block.
        """
        return listen_only(self)


@register_address_kind
@attrs.frozen
class HttpAddress(_HttpAddress):
    """``http://HOST:PORT/PATH``: MCP's Streamable HTTP transport (and HTTP+SSE for old clients)."""

    scheme = "http"
    endpoint: Endpoint


@register_address_kind
@attrs.frozen
class HttpsAddress(_HttpAddress):
    """``https://HOST:PORT/PATH``: the same over TLS."""

    scheme = "https"
    endpoint: Endpoint
