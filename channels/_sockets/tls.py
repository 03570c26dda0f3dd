"""TLS: ``tls:HOST:PORT`` (newline framing over TLS), and the client stream ``wss://`` shares.

The server side's certificate chain and key, and the client side's trust store, are read by
:mod:`channels._core.tlscontext`; with a client CA (``--tls-client-ca``) every client must present
a certificate that CA signed (mTLS), and its subject is on the channel's
:attr:`~channels.PeerInfo.certificate`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import trio

from .._core.address import register_address_kind
from .._core.channel import MessageChannel, PeerInfo
from .._core.listener import HandshakeError, MessageListener, tls_handshake
from .._core.options import ConnectError, ConnectOptions, ListenOptions
from .._core.tlscontext import ServerTls, client_context
from .tcp import (
    HostPortAddress,
    TcpListener,
    check_exposure,
    format_host_port,
    open_tcp_listeners,
    open_tcp_stream,
    stream_channel,
)


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
