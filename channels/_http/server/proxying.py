"""What a request's headers say about where it came from: CORS, and a trusted proxy's forwarding.

Used by each mounted service (:mod:`channels._http.server.service`): the ``Origin`` it allows
(CORS, ``HttpOptions.cors_origins``), a preflight's answer, and behind a trusted proxy
(``HttpOptions.trust_proxy``) the client's address, host and scheme from ``X-Forwarded-*``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import attrs

from ..._core.channel import PeerInfo
from ..._core.guard import header_values
from .request import Request

Headers = Sequence[tuple[bytes, bytes]]

CORS_ALLOW_HEADERS = (
    b"authorization, content-type, accept, last-event-id, mcp-session-id, mcp-protocol-version, "
    b"mcp-method, mcp-name"
)
CORS_EXPOSE_HEADERS = b"mcp-session-id, mcp-protocol-version"
CORS_MAX_AGE = b"600"  # seconds a browser may remember a preflight (Chromium caps it at 7200)


def cors_for(origin: bytes | None, allowed: Collection[str]) -> tuple[tuple[bytes, bytes], ...]:
    """The CORS headers of a response to ``origin``, if it is one of ``allowed`` (else none)."""
    if origin is None or origin.decode("latin-1").lower().rstrip("/") not in allowed:
        return ()
    return (
        (b"access-control-allow-origin", origin),
        (b"access-control-expose-headers", CORS_EXPOSE_HEADERS),
        (b"vary", b"origin"),
    )


def preflight_headers(request: Request) -> list[tuple[bytes, bytes]]:
    """A preflight's answer: the MCP headers, plus the ``Mcp-Param-*`` ones it asks for.

    Those are named after a tool's ``x-mcp-header`` annotations, which no fixed list can hold.
    """
    asked = request.header(b"access-control-request-headers") or b""
    params = [name.strip() for name in asked.lower().split(b",") if name.strip().startswith(b"mcp-param-")]
    allowed = b", ".join([CORS_ALLOW_HEADERS, *params])
    return [
        (b"access-control-allow-methods", b"GET, POST, DELETE, OPTIONS"),
        (b"access-control-allow-headers", allowed),
        (b"access-control-max-age", CORS_MAX_AGE),
    ]


def first_forwarded(headers: Headers, name: bytes) -> bytes | None:
    """The first entry of a proxy's header ``name``, if it was sent exactly once."""
    values = header_values(headers, name)
    return values[0].split(b",")[0].strip() if len(values) == 1 else None


def forwarded_for(headers: Headers, peer: PeerInfo) -> PeerInfo:
    """Behind a trusted proxy: ``peer`` with the client's address, from ``X-Forwarded-For``."""
    address = first_forwarded(headers, b"x-forwarded-for")
    return peer if address is None else attrs.evolve(peer, address=address.decode("latin-1"))
