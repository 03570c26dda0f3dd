"""TLS: ``tls:HOST:PORT`` (newline framing over TLS), and the contexts ``wss://`` shares.

Server side: a certificate chain and key (``--tls-cert``, ``--tls-key``); with a client CA
(``--tls-client-ca``) every client must present a certificate that CA signed (mTLS), and its
subject is on the channel's :attr:`~channels.PeerInfo.certificate`. Client side: the system trust
store, or a CA file (``--tls-ca``), and optionally a client certificate.

Both sides use :func:`ssl.create_default_context`'s choices (TLS 1.2 or newer, the library's
cipher list, hostname checking on the client), so the settings follow the Python build's
security policy rather than a list kept here.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import trio

from .._core.address import (
    ConnectError,
    ConnectOptions,
    ListenError,
    ListenOptions,
    register_address_kind,
)
from .._core.channel import MessageChannel, PeerInfo
from .._core.listener import HandshakeError, MessageListener, tls_handshake
from .tcp import (
    HostPortAddress,
    TcpListener,
    check_exposure,
    format_host_port,
    open_tcp_listeners,
    open_tcp_stream,
    stream_channel,
)


def server_context(address: object, options: ListenOptions) -> ssl.SSLContext:
    """The server context for a ``tls:`` or ``wss://`` listener.

    Raises:
        ListenError: no certificate configured, or a file that cannot be loaded (named, with the
            flag that set it).
    """
    if options.tls_cert is None or options.tls_key is None:
        raise ListenError(
            f"{address}: a TLS listener needs a certificate and its key: "
            "pass --tls-cert PATH and --tls-key PATH"
        )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    # No TLS 1.2 renegotiation: a client could make the server redo handshakes at will (CPU), and
    # OpenSSL reading in the middle of a write would complicate TlsSocketStream for nothing.
    context.options |= ssl.OP_NO_RENEGOTIATION
    try:
        context.load_cert_chain(options.tls_cert, options.tls_key, password=_no_passphrase)
    except (OSError, ssl.SSLError, EncryptedKey) as exc:
        raise ListenError(
            f"{address}: cannot load --tls-cert {options.tls_cert} with --tls-key "
            f"{options.tls_key}: {_describe(exc)}"
        ) from None
    if options.tls_client_ca is not None:
        try:
            context.load_verify_locations(cafile=options.tls_client_ca)
        except (OSError, ssl.SSLError) as exc:
            raise ListenError(
                f"{address}: cannot load --tls-client-ca {options.tls_client_ca}: {_describe(exc)}"
            ) from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


@attrs.define(eq=False)
class ServerTls:
    """A TLS listener's context, which can be replaced by one read from the files again.

    Renewed certificates (``--tls-cert``, ``--tls-key``, ``--tls-client-ca``) are taken in by
    :meth:`reload` (the daemon calls it on SIGHUP) without closing the listener: the next
    handshakes use the new files; connections already open keep what they agreed on.

    Attributes:
        address: the listener's address, for messages.
        options: where the files are.
        context: the context for the next handshake.
    """

    address: object
    options: ListenOptions
    context: ssl.SSLContext
    alpn: tuple[str, ...] = ()
    """The protocols offered in ALPN, if any (``https://``: HTTP/1.1)."""

    @classmethod
    def load(cls, address: object, options: ListenOptions, *, alpn: tuple[str, ...] = ()) -> ServerTls:
        """Read the files.

        Raises:
            ListenError: as :func:`server_context`.
        """
        return cls(address, options, _with_alpn(server_context(address, options), alpn), alpn)

    def reload(self) -> None:
        """Read the files again into a new context, and use it for the next handshakes.

        Raises:
            ListenError: a file cannot be loaded (named with its flag); the context in use stays.
        """
        self.context = _with_alpn(server_context(self.address, self.options), self.alpn)


def _with_alpn(context: ssl.SSLContext, alpn: tuple[str, ...]) -> ssl.SSLContext:
    if alpn:
        context.set_alpn_protocols(list(alpn))
    return context


def client_context(address: object, options: ConnectOptions) -> ssl.SSLContext:
    """The client context: ``options.tls_ca`` or the system store, and a client certificate.

    Raises:
        ConnectError: a file that cannot be loaded, named with its flag.
    """
    try:
        context = ssl.create_default_context(cafile=options.tls_ca)
    except (OSError, ssl.SSLError) as exc:
        raise ConnectError(f"{address}: cannot load --tls-ca {options.tls_ca}: {_describe(exc)}") from None
    if options.tls_cert is not None:
        try:
            context.load_cert_chain(options.tls_cert, options.tls_key)
        except (OSError, ssl.SSLError) as exc:
            raise ConnectError(
                f"{address}: cannot load --tls-cert {options.tls_cert}: {_describe(exc)}"
            ) from None
    return context


class EncryptedKey(Exception):
    """A private key file needs a passphrase."""


def _no_passphrase() -> bytes:
    # Without a password callback OpenSSL would prompt on the terminal, blocking the event loop
    # (and every connection) until someone types: a daemon refuses encrypted keys instead.
    raise EncryptedKey(
        "the key is encrypted, and a daemon cannot ask for its passphrase: give it an unencrypted "
        "key readable only by the bridge's user (or a systemd credential)"
    )


def _describe(exc: OSError | ssl.SSLError | EncryptedKey) -> str:
    if isinstance(exc, EncryptedKey):
        return str(exc)
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    return exc.strerror or str(exc)


async def open_tls_client_stream(
    address: object, host: str, port: int, options: ConnectOptions, *, https_compatible: bool = False
) -> trio.SSLStream[trio.SocketStream]:
    """Connect and run the TLS handshake within ``options.handshake_timeout``.

    Raises:
        ConnectError: no connection, or the handshake failed (an untrusted certificate...).
    """
    context = client_context(address, options)
    tcp = await open_tcp_stream(address, host, port, options.handshake_timeout)
    stream = trio.SSLStream(tcp, context, server_hostname=host, https_compatible=https_compatible)
    try:
        with trio.fail_after(options.handshake_timeout):
            await tls_handshake(stream, PeerInfo("tls"))
    except (HandshakeError, trio.TooSlowError) as exc:
        await trio.aclose_forcefully(stream)
        reason = str(exc) or f"no TLS handshake within {options.handshake_timeout:g}s"
        raise ConnectError(f"{address}: {reason}") from None
    return stream


@register_address_kind
@attrs.frozen
class TlsAddress(HostPortAddress):
    """``tls:HOST:PORT``: newline-delimited JSON-RPC over TLS over TCP.

    Attributes:
        host: a name or an IP address (without brackets); a client checks the server's
            certificate against it.
        port: the port; 0 picks a free one when listening.
    """

    scheme = "tls"
    host: str
    port: int

    async def listen(self, options: ListenOptions) -> list[MessageListener]:
        """Listen with ``options.tls_cert`` and ``options.tls_key``; the caller owns the listeners.

        With ``options.tls_client_ca``, clients must present a certificate it signed (mTLS), which
        authenticates them; with ``options.tokens``, a token as their first message. The TLS
        handshake happens in :meth:`~channels.Incoming.establish`, never in ``accept``. Beyond
        loopback, listening needs one of the two or ``options.allow_non_loopback``.

        Raises:
            ListenError: no certificate or key configured, a PEM file that cannot be loaded,
                beyond loopback without authentication or opt-out, or the bind failed.
        """
        tls = ServerTls.load(self, options)
        await check_exposure(self, self.host, options, encrypted=True)
        return [
            TcpListener(listener, options, tls=tls)
            for listener in await open_tcp_listeners(self, self.host, self.port)
        ]

    @asynccontextmanager
    async def connect(self, options: ConnectOptions) -> AsyncIterator[MessageChannel]:
        """Connect and run the TLS handshake; the channel is closed when the block ends.

        The server's certificate is checked against ``options.tls_ca`` (or the system's trust
        store) and ``host``. The connection and the handshake are each bounded by
        ``options.handshake_timeout``. A token is presented as on ``tcp:``, and a refused one is
        likewise not raised here.

        Raises:
            ConnectError: a PEM file that cannot be loaded, no connection, or a failed or
                timed-out handshake (an untrusted certificate, for example).
        """
        stream = await open_tls_client_stream(self, self.host, self.port, options)
        async with stream_channel(
            stream, PeerInfo("tls", format_host_port(self.host, self.port)), options
        ) as channel:
            yield channel
