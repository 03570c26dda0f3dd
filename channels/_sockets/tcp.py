"""TCP channels, and what every network listener shares: the loopback rule, TCP listeners.

The MCP transports text says local servers SHOULD bind only to localhost. Binding any other address
is refused unless clients must authenticate (bearer tokens, or TLS client certificates) or the
operator opted out (:attr:`ListenOptions.allow_non_loopback`, ``--insecure-no-auth``), and then a
warning is logged for every listener opened.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Self, final

import attrs
import trio

from .._core.address import Address, AddressError, register_address_kind
from .._core.channel import MessageChannel, PeerInfo
from .._core.listener import Incoming, MessageListener, StreamIncoming
from .._core.options import (
    DEFAULT_TCP_IDLE_TIMEOUT,
    ConnectError,
    ConnectOptions,
    ListenError,
    ListenOptions,
    TcpKeepalive,
)
from .._core.stream import StreamChannel

if TYPE_CHECKING:
    from .._core.tlscontext import ServerTls  # loads with tls: (channels._sockets.tls) and the web rooms

logger = logging.getLogger("channels.tcp")


def format_host_port(host: str, port: int) -> str:
    """``HOST:PORT`` with IPv6 literals bracketed."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def split_host_port(host_port: str, *, text: str, form: str) -> tuple[str, int]:
    """Split ``HOST:PORT`` or ``[V6]:PORT``.

    Raises:
        AddressError: quoting ``text`` (the whole address) and naming ``form``, the expected shape.
    """
    host, colon, port_text = host_port.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    # isdigit() alone admits "²" and other digits int() rejects.
    if (
        not colon
        or not host
        or not (port_text.isascii() and port_text.isdigit())
        or not 0 <= int(port_text) <= 65535
    ):
        raise AddressError(f"{text!r}: expected {form}")
    return host, int(port_text)


async def is_loopback(host: str) -> bool:
    """Whether every address ``host`` names is a loopback address."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = await trio.socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


async def check_exposure(
    address: object, host: str, options: ListenOptions, *, encrypted: bool, web: bool = False
) -> bool:
    """Apply the loopback rule to a network listener; return whether ``host`` is loopback.

    Beyond loopback, a listener must authenticate its clients (tokens, TLS client certificates,
    or, for the HTTP and WebSocket listeners (``web``), OAuth access tokens) unless the operator
    opted out with ``allow_non_loopback``. Tokens over an unencrypted channel are allowed but
    warned about: they cross the network in clear text.

    Raises:
        ListenError: not loopback, no authentication and no opt-out; names the flags to use.
    """
    if await is_loopback(host):
        return True
    mtls = encrypted and options.tls_client_ca is not None
    oauth = web and options.oauth is not None
    if options.tokens is None and not mtls and not oauth:
        if not options.allow_non_loopback:
            raise ListenError(
                f"{address}: {host} is not a loopback address and no authentication is "
                "configured; require a bearer token (--token-file or --token-env)"
                + (" or client certificates (--tls-client-ca)" if encrypted else "")
                + ", bind 127.0.0.1, or pass --insecure-no-auth to expose the server anyway"
            )
        logger.warning(
            "%s: listening beyond loopback without authentication "
            "(--insecure-no-auth): anyone who can reach it can use the server",
            address,
        )
    elif (options.tokens is not None or oauth) and not encrypted:
        logger.warning(
            "%s: bearer tokens will cross the network in clear text; use tls:, wss:// or https:// "
            "(or a TLS reverse proxy) to protect them",
            address,
        )
    return False


def set_keepalive(sock: trio.socket.SocketType, keepalive: TcpKeepalive) -> None:
    """Turn TCP keepalive on for ``sock`` with ``keepalive``'s timings (where the OS has them).

    Raises:
        OSError: the socket is gone already.
    """
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (
        ("TCP_KEEPIDLE", keepalive.idle),
        ("TCP_KEEPINTVL", keepalive.interval),
        ("TCP_KEEPCNT", keepalive.count),
    ):
        option = getattr(socket, name, None)
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


async def accept_tcp(
    listener: trio.SocketListener,
    transport: str,
    tls: ServerTls | None,
    *,
    https_compatible: bool = False,
    keepalive: TcpKeepalive | None = None,
) -> tuple[trio.abc.Stream, PeerInfo]:
    """Accept one connection: the stream and what is known of the peer.

    With ``tls`` the stream is TLS-wrapped, its handshake not yet done, with the context current
    when the connection came (a reload while this waited counts). With ``keepalive`` the socket
    gets TCP keepalive (:func:`set_keepalive`).
    """
    while True:
        stream = await listener.accept()
        try:
            if keepalive is not None:
                set_keepalive(stream.socket, keepalive)
            host, port = stream.socket.getpeername()[:2]
            peer = PeerInfo(transport, format_host_port(host, port))
            if tls is None:
                return stream, peer
            from .._core.tlsstream import TlsSocketStream  # TLS listeners only: plain TCP never loads it

            return TlsSocketStream(stream, tls.context, https_compatible=https_compatible), peer
        except OSError as exc:
            # The peer reset the connection before it was accepted (ENOTCONN), or before OpenSSL
            # took the socket (ECONNRESET): skip it. An OSError out of accept() would end
            # trio.serve_listeners, and the daemon with it.
            logger.debug("dropped a connection reset before it was accepted: %s", exc)
            await trio.aclose_forcefully(stream)


@final
class TcpListener(MessageListener):
    """Accepts TCP connections (TLS ones, with an ``ssl_context``) as :class:`StreamIncoming`.

    It owns its socket.

    Args:
        listener: the bound socket listener, owned from now on.
        options: the channels' limits and authentication.
        tls: wrap every connection in TLS (``tls:``); the handshake happens in
            :meth:`StreamIncoming.establish`, never in ``accept``.
    """

    def __init__(
        self, listener: trio.SocketListener, options: ListenOptions, tls: ServerTls | None = None
    ) -> None:
        self._listener = listener
        self._options = options
        self._tls = tls
        self._transport = "tcp" if tls is None else "tls"
        host, port = listener.socket.getsockname()[:2]
        self._address = f"{self._transport}:{format_host_port(host, port)}"

    @property
    def address(self) -> str:
        return self._address

    async def accept(self) -> Incoming:
        options = self._options
        wrapped, peer = await accept_tcp(
            self._listener, self._transport, self._tls, keepalive=options.tcp_keepalive
        )
        return StreamIncoming(
            wrapped,
            peer,
            options.max_message_bytes,
            tokens=options.tokens,
            handshake_timeout=options.handshake_timeout,
            idle_timeout=options.idle_timeout_for(DEFAULT_TCP_IDLE_TIMEOUT),
        )

    async def aclose(self) -> None:
        await self._listener.aclose()


async def open_tcp_listeners(address: object, host: str, port: int) -> list[trio.SocketListener]:
    """``trio.open_tcp_listeners`` with errors as :class:`ListenError`.

    An IP address goes to ``getaddrinfo`` as bytes: the standard library encodes a ``str`` host
    with the ``idna`` codec, which an address does not need, and that codec's module and its
    ``stringprep`` tables (0.1 MiB) would stay in the daemon for its whole life.
    """
    try:
        return await trio.open_tcp_listeners(port, host=_as_bytes_if_ip(host))
    except OSError as exc:
        raise ListenError(f"{address}: {exc.strerror or exc}") from exc


def _as_bytes_if_ip(host: str) -> str | bytes:
    """``host`` as ASCII bytes if it is an IP address (the same for getaddrinfo), else unchanged."""
    try:
        ipaddress.ip_address(host)
        return host.encode("ascii")
    except (ValueError, UnicodeEncodeError):  # a name: trio and the codec encode it (IDNA)
        return host


async def open_tcp_stream(address: object, host: str, port: int, timeout: float) -> trio.SocketStream:
    """``trio.open_tcp_stream`` within ``timeout``, with errors as :class:`ConnectError`."""
    try:
        with trio.fail_after(timeout):
            return await trio.open_tcp_stream(host, port)
    except trio.TooSlowError:
        raise ConnectError(f"{address}: no connection within {timeout:g}s") from None
    except OSError as exc:
        raise ConnectError(f"{address}: {exc.strerror or exc}") from exc


@asynccontextmanager
async def stream_channel(
    stream: trio.abc.Stream, peer: PeerInfo, options: ConnectOptions
) -> AsyncIterator[MessageChannel]:
    """A client's channel over a connected stream; closes the stream when the block ends.

    It presents ``options.token`` first if set.
    """
    channel = StreamChannel(stream, max_message_bytes=options.max_message_bytes, peer=peer)
    try:
        if options.token is not None:
            from .._core.auth import authenticate_message  # only a client with a token needs it

            try:
                await channel.send(authenticate_message(options.token))
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise ConnectError(f"{peer}: connection lost while authenticating") from exc
        yield channel
    finally:
        await trio.aclose_forcefully(channel)


class HostPortAddress(Address):
    """An address of the form ``SCHEME:HOST:PORT``.

    ``SCHEME:[::1]:PORT`` for IPv6; port 0 picks a free port. Subclasses are frozen attrs classes
    with ``host`` and ``port``.
    """

    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Self:
        """Parse ``SCHEME:HOST:PORT`` (``SCHEME:[V6]:PORT``); the host is not resolved here.

        Raises:
            AddressError: no host or no port, or a port that is not a number from 0 to 65535.
        """
        form = f"{cls.scheme}:HOST:PORT, for example {cls.scheme}:127.0.0.1:7300"
        host, port = split_host_port(text.removeprefix(f"{cls.scheme}:"), text=text, form=form)
        return cls(host, port)  # type: ignore[call-arg]

    def __str__(self) -> str:
        return f"{self.scheme}:{format_host_port(self.host, self.port)}"


@register_address_kind
@attrs.frozen
class TcpAddress(HostPortAddress):
    """``tcp:HOST:PORT``: newline-delimited JSON-RPC over TCP.

    Attributes:
        host: a name or an IP address (without brackets); a name may resolve to several.
        port: the port; 0 picks a free one when listening.
    """

    scheme = "tcp"
    host: str
    port: int

    async def listen(self, options: ListenOptions) -> list[MessageListener]:
        """Listen on every address ``host`` resolves to; the caller owns the listeners.

        Clients must present one of ``options.tokens`` as their first message, if set. Beyond
        loopback, listening needs tokens or ``options.allow_non_loopback``, and either way logs a
        warning (tokens in clear text, or no authentication at all).

        Raises:
            ListenError: beyond loopback without authentication or opt-out, or the bind failed
                (address in use, no such address).
        """
        await check_exposure(self, self.host, options, encrypted=False)
        return [
            TcpListener(listener, options)
            for listener in await open_tcp_listeners(self, self.host, self.port)
        ]

    @asynccontextmanager
    async def connect(self, options: ConnectOptions) -> AsyncIterator[MessageChannel]:
        """Connect within ``options.handshake_timeout``; the channel is closed when the block ends.

        With ``options.token`` set, the first message sent is the ``bridge/authenticate``
        notification carrying it. A refused token is not raised here: see
        :class:`~channels.AccessDenied`.

        Raises:
            ConnectError: no connection within the timeout (refused, unreachable, unknown host),
                or it was lost while presenting the token.
        """
        stream = await open_tcp_stream(self, self.host, self.port, options.handshake_timeout)
        async with stream_channel(
            stream, PeerInfo("tcp", format_host_port(self.host, self.port)), options
        ) as channel:
            yield channel
