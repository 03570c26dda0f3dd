"""Host, Origin and bearer-token checks on an HTTP request, before anything else happens (sans-IO).

Used on the WebSocket upgrade request (and by the HTTP channel). The rules, in the order checked:

1. ``Host`` must be present exactly once (400), and name an allowed host (403): by default the
   loopback names (``localhost``, ``127.0.0.1``, ``::1``) on a loopback bind, which defeats DNS
   rebinding (a page on ``attacker.example`` whose name now resolves to 127.0.0.1 still sends
   ``Host: attacker.example``); any name on other binds, which must authenticate; plus every
   ``--allow-host``.
2. ``Origin``, if present (browsers send it; other clients do not), must appear at most once and
   be allowed (403): on a loopback bind, any ``http(s)://`` origin with a loopback host; plus every
   ``--allow-origin``. ``Origin: null`` passes only if listed. The MCP transports text: servers
   "MUST validate the Origin header ... If the Origin header is present and invalid, servers MUST
   respond with HTTP 403 Forbidden".
3. With tokens configured, ``Authorization: Bearer TOKEN`` must carry one of them (401, with
   ``WWW-Authenticate: Bearer``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import attrs

from .auth import TokenSet, bearer_token

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})

Headers = Sequence[tuple[bytes, bytes]]


@attrs.frozen
class Rejection:
    """Why a request is refused: the HTTP status, a reason code and a sentence for the client.

    The body is a JSON-RPC error with ``id`` null, the shape the TypeScript SDK uses for these
    refusals, so an MCP client can show it.
    """

    status: int
    reason: str
    message: str

    def body(self) -> bytes:
        return json.dumps(
            {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32000, "message": self.message, "data": {"reason": self.reason}},
            }
        ).encode()

    def headers(self) -> list[tuple[bytes, bytes]]:
        headers = [(b"content-type", b"application/json")]
        if self.status == 401:
            headers.append((b"www-authenticate", b'Bearer realm="mcp-bridge"'))
        return headers


def header_values(headers: Headers, name: bytes) -> list[bytes]:
    """Every value of header ``name``, in order.

    ``name`` is lower-case, as every name in ``headers`` is: the HTTP request parser and the
    WebSocket upgrade lower-case them once as they read them (field names are case-insensitive,
    RFC 9110 §5.1), so none is lowered again here.
    """
    return [value for key, value in headers if key == name]


def hostname_of(host: str) -> str:
    """The host name in a ``Host`` value or origin authority, lower-case, without port or brackets.

    ``"[::1]:7301"`` → ``"::1"``, ``"LocalHost."`` → ``"localhost"``. A bare IPv6 address (a bind
    address, an ``--allow-host``) has no port: ``"2001:db8::5"`` stays whole.
    """
    host = host.strip().lower()
    if host.startswith("["):
        name = host[1 : host.find("]")] if "]" in host else host[1:]
    elif host.count(":") > 1:
        name = host
    else:
        name, colon, port = host.rpartition(":")
        if not colon or not port.isdigit():
            name = host
    return name.rstrip(".")


def _origin_hostname(origin: str) -> str | None:
    scheme, sep, authority = origin.partition("://")
    if not sep or scheme not in ("http", "https") or not authority or "/" in authority:
        return None
    return hostname_of(authority)


@attrs.frozen
class RequestGuard:
    """The checks one listener applies (see the module docstring).

    Attributes:
        loopback: the listener is bound to a loopback address.
        bind_host: the host it is bound to (always an allowed ``Host`` name).
        allow_hosts: extra allowed host names (lower-case, without port).
        allow_origins: extra allowed origins (``"https://app.example"``, compared without a
            trailing ``/`` and case-insensitively).
        tokens: bearer tokens, or ``None`` if the listener does not ask for one.
    """

    loopback: bool
    bind_host: str
    allow_hosts: frozenset[str] = frozenset()
    allow_origins: frozenset[str] = frozenset()
    tokens: TokenSet | None = None

    @classmethod
    def create(
        cls,
        *,
        loopback: bool,
        bind_host: str,
        allow_hosts: frozenset[str],
        allow_origins: frozenset[str],
        tokens: TokenSet | None,
    ) -> RequestGuard:
        return cls(
            loopback,
            hostname_of(bind_host),
            frozenset(hostname_of(host) for host in allow_hosts),
            frozenset(origin.lower().rstrip("/") for origin in allow_origins),
            tokens,
        )

    def check(
        self, host: str | None, headers: Headers, fields: Mapping[bytes, bytes] | None = None
    ) -> Rejection | str | None:
        """Apply the checks; return a :class:`Rejection`, or the label of the client's token.

        The label is ``None`` if the listener needs no token.

        Args:
            host: the request's one ``Host`` value (HTTP parsers keep it apart and refuse a
                request with none or several), or ``None`` if it had none.
            headers: the other headers.
            fields: the value of each header of ``headers`` sent once, by name, if the caller
                has it (``channels._http.server.request.single_fields``): looked up, not scanned.
        """
        if host is None:
            return Rejection(400, "bad-host", "Bad Request: exactly one Host header is required")
        if not self._host_allowed(hostname_of(host)):
            return Rejection(
                403, "host-not-allowed", "Forbidden: Host not allowed (add it with --allow-host)"
            )
        if fields is not None and len(fields) == len(headers):  # no header sent twice
            origin = fields.get(b"origin")
            origins = [origin] if origin is not None else []
        else:
            origins = header_values(headers, b"origin")
        if len(origins) > 1:
            return Rejection(403, "origin-not-allowed", "Forbidden: more than one Origin header")
        if origins and not self._origin_allowed(origins[0].decode("latin-1")):
            return Rejection(
                403, "origin-not-allowed", "Forbidden: Origin not allowed (add it with --allow-origin)"
            )
        if self.tokens is None:
            return None
        authorizations = header_values(headers, b"authorization")
        token = bearer_token(authorizations[0]) if len(authorizations) == 1 else None
        label = self.tokens.match(token)
        if label is None:
            return Rejection(401, "unauthorized", "Unauthorized: send Authorization: Bearer TOKEN")
        return label

    def _host_allowed(self, name: str) -> bool:
        if name in self.allow_hosts or name == self.bind_host:
            return True
        if self.loopback:
            return name in LOOPBACK_NAMES
        return not self.allow_hosts

    def _origin_allowed(self, origin: str) -> bool:
        normalised = origin.strip().lower().rstrip("/")
        if normalised in self.allow_origins:
            return True
        return self.loopback and _origin_hostname(normalised) in LOOPBACK_NAMES
