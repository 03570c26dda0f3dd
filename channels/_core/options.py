"""How listeners are opened and connections made: the option records, and how either fails.

:class:`ListenOptions` and :class:`ConnectOptions` (with :class:`HttpOptions` inside the former)
are what ``Address.listen`` and ``Address.connect`` take; each address kind reads the fields that
concern it. Every default is named here, with its reason. :class:`ListenError` and
:class:`ConnectError` are what listening and connecting raise when they fail, whatever the kind.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from .stream import DEFAULT_MAX_MESSAGE_BYTES

if TYPE_CHECKING:
    from .auth import TokenSet  # given only with tokens, by whoever loaded them (loads on first use)
    from .oauth import OAuthSettings  # given only with OAuth, by whoever built it (loads on first use)

# Unix socket files are created owner-only unless the operator widens them (docs/design.md §5.7).
DEFAULT_SOCKET_MODE = 0o600

# The handshake deadline (TLS, WebSocket upgrade, authentication): a complete request may never
# take that long (HAProxy `timeout http-request 5s`; websockets `open_timeout=10`).
DEFAULT_HANDSHAKE_TIMEOUT = 10.0
# WebSocket keepalive: a ping every 20 s, and the connection is closed if its pong takes longer
# than 20 s (the websockets library's ping_interval and ping_timeout).
DEFAULT_PING_INTERVAL = 20.0
DEFAULT_PING_TIMEOUT = 20.0
# Stream listeners (unix:, tcp:, tls:): a connection with no traffic either way and no request in
# flight for this long is closed (its child stopped). Unix: never by default, as on stdio, where a
# client may sit silent for days; the socket is local, and its peer's exit always closes it.
DEFAULT_UNIX_IDLE_TIMEOUT: float | None = None
# TCP and TLS: one hour, HAProxy's usual `timeout client` for long-lived connections. A network peer
# can vanish without a FIN (keepalive, below, notices that); a silent one that stays is worth its
# child for an hour, and NATs and firewalls on the way forget idle flows far sooner anyway.
DEFAULT_TCP_IDLE_TIMEOUT: float | None = 3600.0


@attrs.frozen
class TcpKeepalive:
    """TCP keepalive on accepted connections (``SO_KEEPALIVE``), so the kernel notices a vanished peer.

    The defaults are Redis's (``tcp-keepalive 300``: the first probe after 300 s of silence, then
    one every 100 s, three unanswered ones end the connection): a dead peer is noticed within about
    10 minutes instead of Linux's 2 h 11 min (7200 s + 9 probes of 75 s), and 300 s stays below the 350 s
    after which cloud NAT gateways drop idle flows.

    Attributes:
        idle: seconds of silence before the first probe (``TCP_KEEPIDLE``).
        interval: seconds between probes (``TCP_KEEPINTVL``).
        count: unanswered probes before the connection is dropped (``TCP_KEEPCNT``).
    """

    idle: int = 300
    interval: int = 100
    count: int = 3

    @classmethod
    def parse(cls, text: str) -> TcpKeepalive | None:
        """``"300,100,3"`` (idle and interval in seconds, then the count) → a record; ``"off"`` → None.

        Raises:
            ValueError: anything else, with a message saying what is expected.
        """
        if text.strip().lower() == "off":
            return None
        parts = [part.strip().removesuffix("s") for part in text.split(",")]
        if len(parts) != 3 or not all(part.isascii() and part.isdigit() and int(part) > 0 for part in parts):
            raise ValueError(
                f'expected "IDLE,INTERVAL,COUNT" in whole seconds such as "300,100,3", or "off"; got {text!r}'
            )
        idle, interval, count = (int(part) for part in parts)
        return cls(idle, interval, count)


# Legacy Streamable HTTP sessions left idle this long are ended (their children stopped); a client
# that comes back gets 404 and initialises again, as the spec provides. Half an hour outlasts a
# person's pause between tool calls without keeping abandoned children forever.
DEFAULT_SESSION_IDLE_TIMEOUT = 30 * 60.0
# At most this many legacy sessions at once per HTTP address (each may own a child process). At the
# cap the least recently used idle one is evicted, so the cap bounds memory, not clients: measured
# children (docs/streamable-http.md) use 21-65 MiB PSS each, so 64 of the largest hold about 4 GiB,
# a sixth of a 24 GiB machine; a small VM should lower it (256 Node children would need 16 GiB).
DEFAULT_MAX_SESSIONS = 64
# Bytes of SSE events kept per session for Last-Event-ID replay (oldest dropped first).
DEFAULT_EVENT_BUDGET = 4 * 1024 * 1024
# A comment on an idle SSE stream this often keeps proxies from timing it out (nginx's
# proxy_read_timeout defaults to 60 s).
DEFAULT_SSE_KEEPALIVE = 15.0
# A POST's answer that takes this long, with nothing to send before it, turns into an event stream
# so that keep-alive comments can flow; a quicker one is one JSON body, whatever its size (clients
# cap one event: the Python SDK at 1 MiB). Long enough for ordinary slow tools, and, with the
# keep-alive interval, well within nginx's 60 s proxy_read_timeout.
DEFAULT_SSE_AFTER = 15.0


def _origins(values: Iterable[str]) -> frozenset[str]:
    """Origins as compared: lower-case, without a trailing ``/``."""
    return frozenset(origin.lower().rstrip("/") for origin in values)


@attrs.frozen
class HttpOptions:
    """Settings only HTTP listeners read.

    Attributes:
        session_idle_timeout: seconds after which an idle legacy session is ended.
        max_sessions: legacy sessions (and 2024-11-05 SSE streams) at once; more get 503.
        event_budget: bytes of events a session keeps for ``Last-Event-ID`` replay.
        sse_keepalive: seconds of silence on an event stream before a keep-alive comment.
        sse_after: seconds a POST's answer may take, with nothing to send before it, before the
            response turns from one JSON body into an event stream (with keep-alive comments).
        trust_proxy: take the client's host from ``X-Forwarded-Host`` (for the Host check) and
            its address from ``X-Forwarded-For``, set by a reverse proxy in front. Only for
            listeners that nothing but the proxy can reach.
        cors_origins: origins whose browser pages may call the endpoint cross-origin (CORS,
            off when empty); they are also allowed as ``Origin``.
        resource_metadata: an OAuth 2.0 protected-resource metadata document (RFC 9728) served
            at ``/.well-known/oauth-protected-resource`` plus the endpoint's path, and named in
            the ``WWW-Authenticate`` header of 401 answers; ``None`` serves none.
    """

    session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT
    max_sessions: int = DEFAULT_MAX_SESSIONS
    event_budget: int = DEFAULT_EVENT_BUDGET
    sse_keepalive: float = DEFAULT_SSE_KEEPALIVE
    sse_after: float = DEFAULT_SSE_AFTER
    trust_proxy: bool = False
    cors_origins: frozenset[str] = attrs.field(default=frozenset(), converter=_origins)
    resource_metadata: Mapping[str, Any] | None = None


@attrs.frozen
class ListenOptions:
    """How to open listeners. Each kind reads the fields that concern it.

    Attributes:
        max_message_bytes: longest message accepted from a peer.
        socket_mode: permission bits of a Unix socket file.
        socket_group: group id given to a Unix socket file, or ``None`` for the process's group.
        allow_uids, allow_gids: Unix sockets: if either is given, only peers whose uid is in
            ``allow_uids`` or whose gid is in ``allow_gids`` are served (``SO_PEERCRED``, checked at
            accept, before any byte is read); others are disconnected and logged.
        tokens: network channels (``tcp:``, ``tls:``, ``ws://``, ``wss://``): if set, every
            client must present one of these bearer tokens (see :mod:`channels._core.auth`).
        tls_cert, tls_key: PEM files of the certificate chain and private key, for ``tls:`` and
            ``wss://`` listeners.
        tls_client_ca: PEM file of the CAs whose client certificates are accepted; if set, TLS
            clients must present one (mTLS), and that authenticates them.
        allow_origins: WebSocket: ``Origin`` values accepted besides the defaults (loopback
            origins on loopback binds); a request without ``Origin`` (not a browser) passes.
        allow_hosts: WebSocket: ``Host`` names accepted; by default the loopback names on loopback
            binds (DNS rebinding protection) and any name on other binds (which must
            authenticate).
        allow_non_loopback: permit binds beyond loopback without authentication (the operator's
            explicit opt-out, ``--insecure-no-auth``).
        handshake_timeout: seconds a client has for its TLS handshake, WebSocket upgrade and
            authentication.
        ping_interval, ping_timeout: WebSocket keepalive.
        idle_timeout: stream listeners (``unix:``, ``tcp:``, ``tls:``): seconds without traffic
            either way and without a request in flight after which a connection is closed; ``0``
            turns it off; ``None`` (the default) is each kind's default
            (:data:`DEFAULT_UNIX_IDLE_TIMEOUT`, :data:`DEFAULT_TCP_IDLE_TIMEOUT`). Set on each
            accepted channel as :attr:`~channels.MessageChannel.idle_timeout`; its user enforces it.
        tcp_keepalive: keepalive on connections accepted by every TCP listener (``tcp:``,
            ``tls:``, ``ws://``, ``wss://``, ``http://``, ``https://``); ``None`` leaves the
            kernel's setting (off).
        http: settings of HTTP listeners.
        oauth: HTTP and WebSocket listeners: validate OAuth 2.1 access tokens (docs/security.md,
            "OAuth"); static ``tokens`` are still accepted beside them. Its empty ``audiences``
            means the endpoint's own URI. A bind beyond loopback with it counts as authenticated.
    """

    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    socket_mode: int = DEFAULT_SOCKET_MODE
    socket_group: int | None = None
    allow_uids: frozenset[int] = frozenset()
    allow_gids: frozenset[int] = frozenset()
    tokens: TokenSet | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
    allow_origins: frozenset[str] = frozenset()
    allow_hosts: frozenset[str] = frozenset()
    allow_non_loopback: bool = False
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT
    ping_interval: float = DEFAULT_PING_INTERVAL
    ping_timeout: float = DEFAULT_PING_TIMEOUT
    idle_timeout: float | None = None
    tcp_keepalive: TcpKeepalive | None = TcpKeepalive()
    http: HttpOptions = HttpOptions()
    oauth: OAuthSettings | None = None

    def idle_timeout_for(self, default: float | None) -> float | None:
        """The idle timeout of a listener whose kind defaults to ``default``; ``None`` if off."""
        chosen = default if self.idle_timeout is None else self.idle_timeout
        return chosen if chosen else None


@attrs.frozen
class ConnectOptions:
    """How to connect.

    Attributes:
        max_message_bytes: longest message accepted from the peer.
        token: the bearer token to present (never shown by ``repr``).
        tls_ca: PEM file of the CAs to trust for ``tls:``/``wss://`` servers; ``None`` means the
            system's trust store.
        tls_cert, tls_key: a client certificate and its key, for servers that require one (mTLS).
        handshake_timeout: seconds for connecting, the TLS handshake and the WebSocket upgrade.
        ping_interval, ping_timeout: WebSocket keepalive.
    """

    max_message_bytes: int = 16 * 1024 * 1024
    token: str | None = attrs.field(default=None, repr=False)
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT
    ping_interval: float = DEFAULT_PING_INTERVAL
    ping_timeout: float = DEFAULT_PING_TIMEOUT


class ListenError(Exception):
    """A listener could not be opened; the message names the address, the cause and the fix.

    Raised by ``Address.listen``, :func:`~channels.open_listeners` and :func:`~channels.serve`:
    a path or port in use, a missing certificate, a bind beyond loopback without authentication.
    """


class ConnectError(Exception):
    """A connection could not be made; the message names the address and the cause.

    Raised by ``Address.connect`` and :func:`~channels.connect` on entering the block: nothing
    listening, a timeout, a failed TLS handshake or WebSocket upgrade.
    """


class AccessDenied(ConnectError):
    """The server refused this client: a wrong or missing token, a forbidden Origin or Host.

    Raised where the refusal comes before any message (a WebSocket upgrade answered 401 or 403).
    On newline channels (``tcp:``, ``tls:``) a refused token is not reported on connecting: the
    server answers with a JSON-RPC error (code :data:`~channels.UNAUTHORIZED`, id null) and
    closes, which the first ``receive`` sees.
    """
