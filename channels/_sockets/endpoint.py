"""URL-shaped addresses (``ws://``, ``wss://``, ``http://``, ``https://``): host, port and path."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import attrs

from .._core.address import AddressError
from .._core.options import ListenError, ListenOptions
from .tcp import format_host_port

if TYPE_CHECKING:
    from .._core.oauth import OAuthSettings  # a listener given OAuth settings has loaded it
    from .._core.tlscontext import ServerTls  # loaded by server_tls, for https:// and wss:// only


@attrs.frozen
class Endpoint:
    """Where a URL-shaped address points.

    Attributes:
        scheme: ``"ws"``, ``"wss"``, ``"http"`` or ``"https"``.
        host: the host name or IP address, without brackets.
        port: the TCP port (the scheme's default if the URL names none).
        path: the path, ``"/"`` if the URL has none.
    """

    scheme: str
    host: str
    port: int
    path: str

    @property
    def secure(self) -> bool:
        """Whether the scheme runs over TLS."""
        return self.scheme in ("wss", "https")

    @property
    def transport(self) -> str:
        """The scheme, as :attr:`~channels.PeerInfo.transport` names it."""
        return self.scheme

    @property
    def authority(self) -> str:
        """``HOST:PORT``, IPv6 bracketed."""
        return format_host_port(self.host, self.port)

    def __str__(self) -> str:
        return f"{self.scheme}://{self.authority}{self.path}"


def parse_endpoint(text: str, scheme: str, *, kind: str, example_path: str = "/mcp") -> Endpoint:
    """Parse ``SCHEME://HOST[:PORT][/PATH]``; the port defaults to 80 or 443.

    Args:
        text: the whole address.
        scheme: the scheme expected.
        kind: what the address is, for messages (``"a WebSocket address"``).
        example_path: the path shown in the example of error messages.

    Raises:
        AddressError: another scheme, no host, a bad port, or a query, fragment or user name.
    """
    example = f"{scheme}://127.0.0.1:7301{example_path}"
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        raise AddressError(f"{text!r}: expected {scheme}://HOST:PORT/PATH, for example {example}") from None
    if parts.scheme != scheme or not parts.hostname:
        raise AddressError(f"{text!r}: expected {scheme}://HOST:PORT/PATH, for example {example}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise AddressError(f"{text!r}: {kind} takes no query, fragment or credentials; for example {example}")
    if port is None:
        port = 443 if scheme in ("wss", "https") else 80
    return Endpoint(scheme, parts.hostname, port, parts.path or "/")


# Binds on every interface: the endpoint's URI then names no host a client would use.
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "*"})
DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}


def canonical_uri(endpoint: Endpoint) -> str:
    """The endpoint's canonical URI (RFC 8707 §2, the MCP authorization spec's "canonical URI").

    Lower-case scheme and host, the port only if it is not the scheme's default, the path as
    configured: ``http://127.0.0.1:8080/mcp``, ``https://mcp.example.com/mcp``.
    """
    port = "" if DEFAULT_PORTS.get(endpoint.scheme) == endpoint.port else f":{endpoint.port}"
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    return f"{endpoint.scheme.lower()}://{host.lower()}{port}{endpoint.path}"


def resolve_audience(settings: OAuthSettings, endpoint: Endpoint, address: object) -> OAuthSettings:
    """``settings`` with its audiences filled in: the endpoint's canonical URI if none was given.

    Only as configured, never from a request's ``Host`` (a client would choose the audience the
    bridge accepts: a confused deputy). ``endpoint`` carries the bound port when the address
    asked for port 0.

    Raises:
        ListenError: no audience was given and the endpoint binds every interface, so its URI is
            unknown; the message names ``--oauth-audience``.
    """
    if settings.audiences:
        return settings
    if endpoint.host.strip("[]") in WILDCARD_HOSTS:
        raise ListenError(
            f"{address}: OAuth needs the endpoint's public URI as the token audience, and a bind "
            f"on {endpoint.host} does not say it; pass --oauth-audience (oauth_audience in a "
            f"configuration file), for example --oauth-audience https://mcp.example.com{endpoint.path}"
        )
    return attrs.evolve(settings, audiences=(canonical_uri(endpoint),))


def server_tls(
    endpoint: Endpoint, address: object, options: ListenOptions, *, alpn: tuple[str, ...] = ()
) -> ServerTls | None:
    """The TLS of a listener on ``endpoint`` (``https://``, ``wss://``); ``None`` for ``http://`` and ``ws://``.

    TLS's modules load here, for a secure endpoint only: a plain web listener never needs them.

    Raises:
        ListenError: no certificate, or files that cannot be loaded (:meth:`ServerTls.load`).
    """
    if not endpoint.secure:
        return None
    from .._core.tlscontext import ServerTls

    return ServerTls.load(address, options, alpn=alpn)
