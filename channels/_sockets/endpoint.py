"""URL-shaped addresses (``ws://``, ``wss://``, ``http://``, ``https://``): host, port and path."""

from __future__ import annotations

from urllib.parse import urlsplit

import attrs

from .._core.address import AddressError
from .tcp import format_host_port


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
