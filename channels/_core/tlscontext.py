"""TLS contexts for listeners and clients, read from the PEM files the options name.

Server side: a certificate chain and key (``--tls-cert``, ``--tls-key``); with a client CA
(``--tls-client-ca``) every client must present a certificate that CA signed (mTLS). Client side:
the system trust store, or a CA file (``--tls-ca``), and optionally a client certificate.
:class:`ServerTls` holds a listener's context and reads the files again on reload. ``tls:``,
``wss://`` and ``https://`` share these; the TLS socket stream is :mod:`channels._core.tlsstream`.

Both sides use :func:`ssl.create_default_context`'s choices (TLS 1.2 or newer, the library's
cipher list, hostname checking on the client), so the settings follow the Python build's
security policy rather than a list kept here.
"""

from __future__ import annotations

import ssl

import attrs

from .options import ConnectError, ConnectOptions, ListenError, ListenOptions


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
