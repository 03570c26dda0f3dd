"""The configuration file's shape: attrs records, structured by cattrs at this edge.

The file's shape::

    [servers.github]
    command = ["npx", "-y", "@modelcontextprotocol/server-github"]
    env = { GITHUB_TOKEN_FILE = "/run/credentials/mcp-bridge@github.service/token" }
    child = "auto"
    sandbox = { network = true }   # bubblewrap; rw = [...], ro = [...] as --sandbox-rw/-ro
    tool_scopes = { "delete_*" = ["mcp:admin"] }   # OAuth scopes per tool name pattern

    [[servers.github.listeners]]
    kind = "unix"
    path = "/run/mcp-bridge/github.sock"

    [[servers.github.listeners]]
    kind = "http"
    address = "127.0.0.1:7302"
    path = "/mcp"
    token_file = ["/etc/mcp-bridge/tokens"]
    oauth_issuer = ["https://auth.example.com"]   # OAuth access tokens too (oauth_audience...)

    [listeners.public]             # one HTTP(S) socket shared by several servers, by path
    kind = "http"
    address = "127.0.0.1:8080"
    prefix = "/servers"            # servers at /servers/NAME/mcp; GET /servers lists them

    [[servers.github.listeners]]
    shared = "public"              # mounted on it, with the server's own tokens, OAuth, sessions
    path = "/tools/github/mcp"     # optional: its own path

attrs classes describe the file; cattrs structures it at this edge, with unknown keys refused.
Every error names the path of the bad field and what was expected
(``servers.github.listeners[1].path: expected a string``). Sizes and durations stay text here,
written as on the command line ("4MiB", "30s"); :mod:`.config` parses them.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any

import attrs
import cattrs

from .._child.restarts import RestartPolicy
from .._errors import ConfigError

LISTENER_KINDS = ("unix", "tcp", "tls", "ws", "wss", "http", "https", "fd")
CHILD_MODES = ("per-connection", "shared", "auto")
_TOKENS = {"token_file", "token_env", "token_credential", "insecure_no_auth"}
_TLS = {"tls_cert", "tls_key", "tls_client_ca"}
_WEB = {"allow_origin", "allow_host"}
_HTTP = {"cors_origin", "trust_proxy", "oauth_metadata", "session_idle_timeout", "max_sessions", "sse_after"}
_OAUTH = {"oauth_issuer", "oauth_audience", "oauth_scope", "oauth_introspection", "oauth_client_file"}
# Per listener kind, the fields that apply: anything else set is refused, as the command line
# refuses an option no listener would use.
KIND_FIELDS = {
    "unix": {"path", "socket_mode", "socket_group", "allow_uid", "allow_gid"},
    "tcp": {"address", *_TOKENS},
    "tls": {"address", *_TOKENS, *_TLS},
    "ws": {"address", "path", *_TOKENS, *_WEB, *_OAUTH},
    "wss": {"address", "path", *_TOKENS, *_WEB, *_TLS, *_OAUTH},
    "http": {"address", "path", *_TOKENS, *_WEB, *_HTTP, *_OAUTH},
    "https": {"address", "path", *_TOKENS, *_WEB, *_TLS, *_HTTP, *_OAUTH},
    "fd": {"name", "protocol", "path", "allow_uid", "allow_gid", *_TOKENS, *_WEB, *_HTTP, *_OAUTH},
}


# A shared listener's (``[listeners.NAME]``) kinds: HTTP and WebSocket serve servers by path.
SHARED_KINDS = ("http", "https", "fd", "ws", "wss")
# What a mount on a WebSocket shared listener may not set: HTTP's sessions, CORS and metadata.
HTTP_MOUNT_FIELDS = {"cors_origin", "oauth_metadata", "session_idle_timeout", "max_sessions", "sse_after"}
# What a mount (``shared = "NAME"``) sets for itself: its path, its security, its sessions.
MOUNT_FIELDS = {"shared", "path", *_TOKENS, *_OAUTH, "cors_origin", "oauth_metadata"} | {
    "session_idle_timeout",
    "max_sessions",
    "sse_after",
}
# What belongs to the socket, so to the shared listener's table, not to a mount.
SOCKET_FIELDS = {"address", "name", "protocol", *_TLS, *_WEB, "trust_proxy"}


@attrs.frozen
class ListenerEntry:
    """One ``[[servers.NAME.listeners]]`` table: a listener of the server's own, or a mount."""

    kind: str | None = None
    shared: str | None = None
    """The name of a ``[listeners.NAME]`` table to be mounted on (then ``kind`` is not given)."""
    path: str | None = None
    address: str | None = None
    name: str | None = None
    protocol: str | None = None
    socket_mode: str | None = None
    socket_group: int | None = None
    allow_uid: list[int] = attrs.field(factory=list)
    allow_gid: list[int] = attrs.field(factory=list)
    token_file: list[str] = attrs.field(factory=list)
    token_env: list[str] = attrs.field(factory=list)
    token_credential: list[str] = attrs.field(factory=list)
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
    allow_origin: list[str] = attrs.field(factory=list)
    allow_host: list[str] = attrs.field(factory=list)
    insecure_no_auth: bool = False
    cors_origin: list[str] = attrs.field(factory=list)
    trust_proxy: bool = False
    oauth_metadata: str | None = None
    session_idle_timeout: str | None = None
    max_sessions: int | None = None
    sse_after: str | None = None
    oauth_issuer: list[str] = attrs.field(factory=list)
    oauth_audience: list[str] = attrs.field(factory=list)
    oauth_scope: list[str] = attrs.field(factory=list)
    oauth_introspection: str | None = None
    oauth_client_file: str | None = None


@attrs.frozen
class SharedListenerEntry:
    """One ``[listeners.NAME]`` table: an HTTP(S) or WebSocket socket several servers are mounted on.

    Its tokens and OAuth settings guard the index (``GET prefix``) only: each mount brings its own.
    ``index``: ``None`` when not set (on for HTTP; a WebSocket listener has none).
    """

    kind: str
    address: str | None = None
    name: str | None = None
    prefix: str = "/servers"
    index: bool | None = None
    token_file: list[str] = attrs.field(factory=list)
    token_env: list[str] = attrs.field(factory=list)
    token_credential: list[str] = attrs.field(factory=list)
    insecure_no_auth: bool = False
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
    allow_origin: list[str] = attrs.field(factory=list)
    allow_host: list[str] = attrs.field(factory=list)
    trust_proxy: bool = False
    oauth_issuer: list[str] = attrs.field(factory=list)
    oauth_audience: list[str] = attrs.field(factory=list)
    oauth_scope: list[str] = attrs.field(factory=list)
    oauth_introspection: str | None = None
    oauth_client_file: str | None = None
    handshake_timeout: str | None = None
    tcp_keepalive: str | None = None


@attrs.frozen
class LimitsEntry:
    """``[servers.NAME.limits]``: any of the command line's limits, in the same units."""

    max_message: str | None = None
    max_child_message: str | None = None
    max_connections: int | None = None
    max_in_flight: int | None = None
    send_timeout: str | None = None
    half_close_timeout: str | None = None
    drain_timeout: str | None = None
    stop_stdin_timeout: str | None = None
    stop_term_timeout: str | None = None
    request_timeout: str | None = None
    handshake_timeout: str | None = None
    ping_interval: str | None = None
    ping_timeout: str | None = None
    idle_timeout: str | None = None
    tcp_keepalive: str | None = None


@attrs.frozen
class SandboxEntry:
    """``sandbox = {...}`` of a server: ``--sandbox`` and its options (``{}`` for the defaults)."""

    rw: list[str] = attrs.field(factory=list)
    ro: list[str] = attrs.field(factory=list)
    network: bool = False
    bwrap: str = "bwrap"


@attrs.frozen
class ServerEntry:
    """One ``[servers.NAME]`` table."""

    command: list[str]
    listeners: list[ListenerEntry] = attrs.field(factory=list)
    env: dict[str, str] = attrs.field(factory=dict)
    pass_env: list[str] = attrs.field(factory=list)
    cwd: str | None = None
    child: str = "auto"
    start: str = "eager"
    idle_stop: str | None = None
    probe_timeout: str | None = None
    prespawn: int = 0
    restart_limit: int = RestartPolicy().crash_limit
    restart_window: str | None = None
    limits: LimitsEntry = LimitsEntry()
    sandbox: SandboxEntry | None = None
    tool_scopes: dict[str, list[str]] = attrs.field(factory=dict)


@attrs.frozen
class ConfigFile:
    """The whole file."""

    servers: dict[str, ServerEntry]
    listeners: dict[str, SharedListenerEntry] = attrs.field(factory=dict)


_converter = cattrs.Converter(forbid_extra_keys=True)


def _strict(kind: type) -> Any:
    """A structure hook that takes values of exactly ``kind`` (cattrs would turn 5 into "5")."""

    def structure(value: Any, _: Any) -> Any:
        if type(value) is not kind:
            raise ValueError(f"expected {kind.__name__}")
        return value

    return structure


for _kind in (str, int, bool):
    _converter.register_structure_hook(_kind, _strict(_kind))


def _lists_are_lists(raw: Any, cls: type, where: str) -> list[str]:
    """Where the raw data has a string (or anything else) where ``cls`` wants a list.

    cattrs would turn ``pass_env = "HOME"`` into ``["H", "O", "M", "E"]``; this walk finds such
    values first, with their paths.
    """
    if not isinstance(raw, dict) or not attrs.has(cls):
        return []
    problems = []
    hints = typing.get_type_hints(cls)
    for field in attrs.fields(cls):
        if field.name not in raw:
            continue
        value, hint = raw[field.name], hints[field.name]
        path = f"{where}.{field.name}" if where else field.name
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin in (typing.Union, types.UnionType) and value is not None:  # X | None: look at X
            hint = next(arg for arg in args if arg is not type(None))
            origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is list:
            if type(value) is not list:
                problems.append(f"{path}: expected a list")
            else:
                for index, item in enumerate(value):
                    problems += _lists_are_lists(item, args[0], f"{path}[{index}]")
        elif origin is dict and isinstance(value, dict) and attrs.has(args[1]):
            for key, item in value.items():
                problems += _lists_are_lists(item, args[1], f"{path}.{key}")
        elif origin is dict and isinstance(value, dict) and typing.get_origin(args[1]) is list:
            problems += [
                f"{path}.{key}: expected a list" for key, item in value.items() if type(item) is not list
            ]
        elif attrs.has(hint):
            problems += _lists_are_lists(value, hint, path)
    return problems


_EXPECTED = {
    "expected str": "expected a string",
    "expected int": "expected a whole number",
    "expected bool": "expected true or false",
    "expected list": "expected a list",
    "expected dict": "expected a table",
}


def _describe(message: str) -> str:
    """``servers.github.listeners[1].path: expected a string`` from a cattrs message."""
    text, _, where = message.rpartition(" @ ")
    path = re.sub(r"\['([^']*)'\]", r".\1", where.removeprefix("$")).lstrip(".")
    for needle, plain in _EXPECTED.items():
        if needle in text:
            text = plain
    if text.startswith("required field missing"):
        text = "required, and missing"
    elif text.startswith("extra fields found"):
        text = "unknown keys " + text.removeprefix("extra fields found").strip() + " (check the spelling)"
    return f"{path}: {text}" if path else text


def structure(data: Any) -> ConfigFile:
    """The file's data as :class:`ConfigFile`.

    Raises:
        ConfigError: every problem found, one per line, each naming its field.
    """
    if problems := _lists_are_lists(data, ConfigFile, "") + _misplaced(data):
        raise ConfigError("\n".join(problems))
    try:
        return _converter.structure(data, ConfigFile)
    except cattrs.BaseValidationError as exc:
        problems = [_describe(message) for message in cattrs.transform_error(exc)]
        raise ConfigError("\n".join(problems)) from None


def _misplaced(data: Any) -> list[str]:
    """A server's own setting written on a shared listener's table, with where it goes instead."""
    listeners = data.get("listeners") if isinstance(data, dict) else None
    if not isinstance(listeners, dict):
        return []
    known = {field.name for field in attrs.fields(SharedListenerEntry)}
    return [
        f"listeners.{name}.path: each server has its own path; set prefix here "
        f'(servers at PREFIX/NAME/mcp) or path in a [[servers.NAME.listeners]] with shared = "{name}"'
        if key == "path"
        else f"listeners.{name}.{key}: a setting of each server, not of the socket; set it in the "
        f'[[servers.NAME.listeners]] tables with shared = "{name}"'
        for name, table in listeners.items()
        if isinstance(table, dict)
        for key in table
        if key in MOUNT_FIELDS - known
    ]
