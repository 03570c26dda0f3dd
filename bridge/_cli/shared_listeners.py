"""The configuration file's shared listeners (``[listeners.NAME]``) and the paths mounted on them.

:func:`shared_listeners` turns each table into a :class:`~bridge._ops.plan.SharedListener`;
:func:`check_mount` refuses what a mount (``shared = "NAME"`` in a server's listeners) may not set
and a server name that cannot be a path segment; :func:`check_routes` refuses two servers whose
paths collide on one listener. Each error names its field and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs

from channels import HttpOptions, ListenOptions, TcpKeepalive, parse_address

from .._errors import ConfigError
from .._limits import parse_duration
from .._ops.plan import FleetPlan, SharedListener
from .loaders import load_tokens
from .oauth_options import check_audience, oauth_keys
from .schema import (
    HTTP_MOUNT_FIELDS,
    MOUNT_FIELDS,
    SHARED_KINDS,
    SOCKET_FIELDS,
    ListenerEntry,
    SharedListenerEntry,
)

# A server's name on a shared listener is a path segment (PREFIX/NAME/mcp), a log and metric label:
# the names channels' HttpHost accepts (channels/_http/host.py, SERVER_NAME), checked here first
# so that the file's error names the server.
SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# The shared listeners that serve WebSocket (a WebSocketHost): no index, no HTTP sessions.
WEBSOCKET_KINDS = ("ws", "wss")
# A shared listener's own authentication, which guards its index alone.
INDEX_GUARD_FIELDS = {
    "token_file",
    "token_env",
    "token_credential",
    "oauth_issuer",
    "oauth_audience",
    "oauth_scope",
    "oauth_introspection",
    "oauth_client_file",
}
# A mount path or prefix: absolute, segments of unreserved characters (RFC 3986 §2.3) and a few
# sub-delims, no percent-encoding, no dot segment, no empty segment; what the host routes exactly.
_SEGMENT = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=:@-]+")


def path_problem(path: str) -> str | None:
    """Why ``path`` cannot be a mount path or prefix, or ``None``."""
    if not path.startswith("/") or path.endswith("/"):
        return "expected an absolute path without a trailing slash, such as /tools/github/mcp"
    for segment in path[1:].split("/"):
        if segment in (".", ".."):
            return "no . or .. segments"
        if not _SEGMENT.fullmatch(segment):
            return "letters, digits and -._~ in each segment; no %, no query, no empty segment"
    return None


def shared_listeners(tables: Mapping[str, SharedListenerEntry]) -> dict[str, SharedListener]:
    """Every ``[listeners.NAME]`` table as a :class:`SharedListener`.

    Raises:
        ConfigError: naming the field and the fix.
    """
    return {name: _shared_listener(entry, f"listeners.{name}") for name, entry in tables.items()}


def _shared_listener(entry: SharedListenerEntry, where: str) -> SharedListener:
    if entry.kind not in SHARED_KINDS:
        raise ConfigError(
            f'{where}.kind: expected "http" or "https" (or "fd" for a socket systemd passes), or "ws" '
            'or "wss": a shared listener serves its servers by path over HTTP or WebSocket'
        )
    if entry.kind in WEBSOCKET_KINDS:
        _check_websocket(entry, where)
    if entry.kind == "fd":
        if entry.name is None:
            raise ConfigError(
                f'{where}.name: required for kind = "fd" (the socket unit\'s FileDescriptorName)'
            )
        for field in ("address", "tls_cert", "tls_key", "tls_client_ca"):
            if getattr(entry, field) is not None:
                raise ConfigError(f'{where}.{field}: not used by kind = "fd"; remove it')
        url = f"http+fd:{entry.name}"
    else:
        if entry.address is None:
            raise ConfigError(
                f'{where}.address: required for kind = {entry.kind!r}, such as "127.0.0.1:8080"'
            )
        if entry.name is not None:
            raise ConfigError(f'{where}.name: only for kind = "fd"; remove it')
        url = f"{entry.kind}://{entry.address}"
        tls = [field for field in ("tls_cert", "tls_key", "tls_client_ca") if getattr(entry, field)]
        if entry.kind in ("http", "ws") and tls:
            secure = "wss" if entry.kind == "ws" else "https"
            raise ConfigError(
                f"{where}.{tls[0]}: for kind = {secure!r}; remove it or make the listener {secure}"
            )
        if entry.kind in ("https", "wss") and (entry.tls_cert is None or entry.tls_key is None):
            raise ConfigError(f"{where}: kind = {entry.kind!r} needs tls_cert and tls_key")
    if problem := path_problem(entry.prefix):
        raise ConfigError(f"{where}.prefix: {problem}")
    try:
        parsed = parse_address(f"{url}{entry.prefix}")
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    oauth = oauth_keys(entry, where)
    check_audience(oauth, parsed, where)
    options = ListenOptions(
        tokens=load_tokens(entry.token_file, entry.token_env, entry.token_credential),
        tls_cert=entry.tls_cert,
        tls_key=entry.tls_key,
        tls_client_ca=entry.tls_client_ca,
        allow_origins=frozenset(entry.allow_origin),
        allow_hosts=frozenset(entry.allow_host),
        allow_non_loopback=entry.insecure_no_auth,
        oauth=oauth,
        http=HttpOptions(trust_proxy=entry.trust_proxy),
    )
    if entry.handshake_timeout is not None:
        timeout = parse_duration(entry.handshake_timeout, field=f"{where}.handshake_timeout")
        options = attrs.evolve(options, handshake_timeout=timeout)
    if entry.tcp_keepalive is not None:
        try:
            options = attrs.evolve(options, tcp_keepalive=TcpKeepalive.parse(entry.tcp_keepalive))
        except ValueError as exc:
            raise ConfigError(f"{where}.tcp_keepalive: {exc}") from None
    index = entry.index is not False and entry.kind not in WEBSOCKET_KINDS
    return SharedListener(url=url, options=options, prefix=entry.prefix, index=index)


def _check_websocket(entry: SharedListenerEntry, where: str) -> None:
    """Refuse what a WebSocket shared listener has no use for: an index, and what guards one.

    Raises:
        ConfigError: naming the field and the fix.
    """
    if entry.index:
        raise ConfigError(
            f"{where}.index: a WebSocket listener has no index (an HTTP listener's GET {entry.prefix} "
            "lists its servers); remove it"
        )
    unset = SharedListenerEntry(kind=entry.kind)
    for field in (*sorted(INDEX_GUARD_FIELDS), "trust_proxy"):
        if getattr(entry, field) != getattr(unset, field):
            why = (
                "it guards the index, which a WebSocket listener has not"
                if field != "trust_proxy"
                else ("X-Forwarded-* headers are read by HTTP listeners only")
            )
            raise ConfigError(
                f"{where}.{field}: not used by kind = {entry.kind!r} ({why}); set each server's own "
                "on its mount, or remove it"
            )


def check_mount(
    entry: ListenerEntry, where: str, server: str, listeners: Mapping[str, SharedListener]
) -> None:
    """Refuse a mount that names no shared listener, sets what it may not, or cannot be routed.

    Raises:
        ConfigError: naming the field and the fix.
    """
    if entry.shared not in listeners:
        declared = ", ".join(sorted(listeners)) or "none is declared"
        raise ConfigError(
            f"{where}.shared: no listener {entry.shared!r}; declare [listeners.{entry.shared}] "
            f'(kind = "http", address = "127.0.0.1:8080") or name one of the file\'s ({declared})'
        )
    if entry.kind is not None:
        raise ConfigError(
            f"{where}.kind: a mount is served by [listeners.{entry.shared}], of its kind; remove kind"
        )
    unset = ListenerEntry()
    for field in attrs.fields(ListenerEntry):
        if field.name in MOUNT_FIELDS or getattr(entry, field.name) == getattr(unset, field.name):
            continue
        if field.name in SOCKET_FIELDS:
            raise ConfigError(
                f"{where}.{field.name}: a setting of the socket, which the servers share; set it on "
                f"[listeners.{entry.shared}]"
            )
        raise ConfigError(f"{where}.{field.name}: not used by a mount on a shared listener; remove it")
    if not SERVER_NAME.fullmatch(server):
        raise ConfigError(
            f"servers.{server}: a server on a shared listener is named in its paths, logs and metrics: "
            "use letters, digits, '.', '_' and '-' (at most 64, starting with a letter or digit); rename it"
        )
    if listeners[str(entry.shared)].websocket:
        for key in sorted(HTTP_MOUNT_FIELDS):
            if getattr(entry, key) != getattr(unset, key):
                raise ConfigError(
                    f"{where}.{key}: HTTP's; not used by a mount on WebSocket listener "
                    f"[listeners.{entry.shared}]; remove it"
                )
    if entry.path is not None and (problem := path_problem(entry.path)):
        raise ConfigError(f"{where}.path: {problem}")


def _routes(endpoint: str, websocket: bool) -> set[str]:
    """The paths a mount at ``endpoint`` answers: the endpoint, and over HTTP the 2024-11-05 transport's."""
    if websocket:
        return {endpoint}
    parent = endpoint.rsplit("/", 1)[0]
    return {endpoint, f"{parent}/sse", f"{parent}/messages"}


def check_routes(plan: FleetPlan) -> None:
    """Refuse paths that collide on one listener: two servers', their legacy siblings, an index.

    Raises:
        ConfigError: naming both servers and the fix.
    """
    taken: dict[tuple[str, str], str] = {}
    for server in plan.mounts:
        names = [listener for listener, _ in plan.endpoints(server)]
        if twice := {name for name in names if names.count(name) > 1}:
            raise ConfigError(
                f"servers.{server}.listeners: mounted twice on listener {sorted(twice)[0]!r}; keep one"
            )
        for listener, endpoint in plan.endpoints(server):
            shared = plan.listeners[listener]
            prefix = shared.prefix
            if shared.index and endpoint in (prefix, f"{prefix}/"):
                raise ConfigError(
                    f"servers.{server}: its path {endpoint} is the index of listener {listener!r}; "
                    "give it another path"
                )
            for route in sorted(_routes(endpoint, shared.websocket)):
                other = taken.setdefault((listener, route), server)
                if other != server:
                    raise ConfigError(
                        f"servers.{server}: its path {endpoint} on listener {listener!r} collides with "
                        f"servers.{other}'s ({route}); give one of them another path"
                    )
