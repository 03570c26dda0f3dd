"""The configuration file (``--config FILE``): many servers, each with its listeners, in TOML.

The file's shape::

    [servers.github]
    command = ["npx", "-y", "@modelcontextprotocol/server-github"]
    env = { GITHUB_TOKEN_FILE = "/run/credentials/mcp-bridge@github.service/token" }
    child = "auto"

    [[servers.github.listeners]]
    kind = "unix"
    path = "/run/mcp-bridge/github.sock"

    [[servers.github.listeners]]
    kind = "http"
    address = "127.0.0.1:7302"
    path = "/mcp"
    token_file = ["/etc/mcp-bridge/tokens"]

A desktop client's ``mcpServers`` JSON (``{"mcpServers": {"name": {"command": ..., "args": [...],
"env": {...}}}}``) is read too: each server gets a Unix socket ``SOCKET_DIR/NAME.sock``.

attrs classes describe the file; cattrs structures it at this edge, with unknown keys refused.
Every error names the path of the bad field and what was expected
(``servers.github.listeners[1].path: expected a string``). Sizes and durations are written as on
the command line ("4MiB", "30s").
"""

from __future__ import annotations

import json
import os
import re
import tomllib
import typing
from collections.abc import Mapping
from typing import Any

import attrs
import cattrs

from channels import HttpOptions, ListenOptions, parse_address

from .._child.process import ChildSpec
from .._child.supervisor import RestartPolicy
from .._daemon.daemon import ServeConfig
from .._errors import ConfigError
from .._limits import Limits, parse_duration, parse_size

LISTENER_KINDS = ("unix", "tcp", "tls", "ws", "wss", "http", "https", "fd")
CHILD_MODES = ("per-connection", "shared", "auto")
# Where the servers of an imported mcpServers file get their sockets, unless told otherwise.
DEFAULT_SOCKET_DIR = "/run/mcp-bridge"
# The keys of a desktop client's mcpServers entries that mean something for a launched server.
MCP_SERVERS_KEYS = frozenset({"command", "args", "env", "cwd", "disabled", "type"})
_TOKENS = {"token_file", "token_env", "token_credential", "insecure_no_auth"}
_TLS = {"tls_cert", "tls_key", "tls_client_ca"}
_WEB = {"allow_origin", "allow_host"}
_HTTP = {"cors_origin", "trust_proxy", "oauth_metadata", "session_idle_timeout", "max_sessions"}
# Per listener kind, the fields that apply: anything else set is refused, as the command line
# refuses an option no listener would use.
KIND_FIELDS = {
    "unix": {"path", "socket_mode", "socket_group", "allow_uid", "allow_gid"},
    "tcp": {"address", *_TOKENS},
    "tls": {"address", *_TOKENS, *_TLS},
    "ws": {"address", "path", *_TOKENS, *_WEB},
    "wss": {"address", "path", *_TOKENS, *_WEB, *_TLS},
    "http": {"address", "path", *_TOKENS, *_WEB, *_HTTP},
    "https": {"address", "path", *_TOKENS, *_WEB, *_TLS, *_HTTP},
    "fd": {"name", "protocol", "path", "allow_uid", "allow_gid", *_TOKENS, *_WEB, *_HTTP},
}


@attrs.frozen
class ListenerEntry:
    """One ``[[servers.NAME.listeners]]`` table."""

    kind: str
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


@attrs.frozen
class ServerEntry:
    """One ``[servers.NAME]`` table."""

    command: list[str]
    listeners: list[ListenerEntry]
    env: dict[str, str] = attrs.field(factory=dict)
    pass_env: list[str] = attrs.field(factory=list)
    cwd: str | None = None
    child: str = "auto"
    start: str = "eager"
    prespawn: int = 0
    restart_limit: int = RestartPolicy().crash_limit
    restart_window: str | None = None
    limits: LimitsEntry = LimitsEntry()


@attrs.frozen
class ConfigFile:
    """The whole file."""

    servers: dict[str, ServerEntry]


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
        if origin is list:
            if type(value) is not list:
                problems.append(f"{path}: expected a list")
            else:
                for index, item in enumerate(value):
                    problems += _lists_are_lists(item, args[0], f"{path}[{index}]")
        elif origin is dict and isinstance(value, dict) and attrs.has(args[1]):
            for key, item in value.items():
                problems += _lists_are_lists(item, args[1], f"{path}.{key}")
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
    if problems := _lists_are_lists(data, ConfigFile, ""):
        raise ConfigError("\n".join(problems))
    try:
        return _converter.structure(data, ConfigFile)
    except cattrs.BaseValidationError as exc:
        problems = [_describe(message) for message in cattrs.transform_error(exc)]
        raise ConfigError("\n".join(problems)) from None


def read(path: str, socket_dir: str = DEFAULT_SOCKET_DIR) -> ConfigFile:
    """Read ``path``: TOML, or a client's ``mcpServers`` JSON (by its ``.json`` name).

    Raises:
        ConfigError: unreadable, not TOML/JSON, or not the expected shape (naming the field).
    """
    try:
        with open(path, "rb") as file:
            raw = file.read()
    except OSError as exc:
        raise ConfigError(f"--config {path}: {exc.strerror}") from None
    if path.endswith(".json"):
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ConfigError(f"--config {path}: not JSON ({exc})") from None
        return structure(_from_mcp_servers(data, socket_dir))
    try:
        data = tomllib.loads(raw.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--config {path}: not TOML ({exc})") from None
    return structure(data)


def _from_mcp_servers(data: Any, socket_dir: str) -> dict[str, Any]:
    """Turn ``{"mcpServers": {...}}`` into this file's shape."""
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers"), dict):
        raise ConfigError('expected a JSON object with an "mcpServers" object in it')
    servers: dict[str, Any] = {}
    for name, entry in data["mcpServers"].items():
        where = f"mcpServers.{name}"
        if not name or "/" in name or name in (".", "..") or "\0" in name:
            raise ConfigError(f"{where}: a server name becomes a socket file name: no '/', not . or ..")
        if isinstance(entry, dict) and entry.get("disabled") is True:
            continue  # the clients' own switch: a disabled server is not served either
        if isinstance(entry, dict) and "url" in entry:
            raise ConfigError(
                f"{where}: a remote server (url) is not one mcp-bridge launches; remove it from the file"
            )
        if isinstance(entry, dict) and (unknown := set(entry) - MCP_SERVERS_KEYS):
            raise ConfigError(
                f"{where}: unknown keys ({', '.join(sorted(unknown))}); "
                f"expected {', '.join(sorted(MCP_SERVERS_KEYS))}"
            )
        if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
            if isinstance(entry, dict) and "url" in entry:
                raise ConfigError(
                    f"{where}: a remote server (url) is not one mcp-bridge launches; remove it from the file"
                )
            raise ConfigError(f"{where}.command: expected a string")
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
            raise ConfigError(f"{where}.args: expected a list of strings")
        servers[name] = {
            "command": [entry["command"], *args],
            "env": entry.get("env", {}),
            "listeners": [{"kind": "unix", "path": os.path.join(socket_dir, f"{name}.sock")}],
        }
        if "cwd" in entry:
            servers[name]["cwd"] = entry["cwd"]
    return {"servers": servers}


def _listener(entry: ListenerEntry, where: str) -> tuple[str, ListenOptions]:
    """The address text and the options of one listener.

    Raises:
        ConfigError: a field the kind needs is missing, or one is unusable.
    """
    from .main import load_tokens  # the command line's own rules

    def need(field: str) -> str:
        value = getattr(entry, field)
        if not value:
            raise ConfigError(f"{where}.{field}: required for kind = {entry.kind!r}")
        return str(value)

    if entry.kind in KIND_FIELDS:
        unset = ListenerEntry(kind=entry.kind)
        for field in attrs.fields(ListenerEntry):
            if (
                field.name != "kind"
                and field.name not in KIND_FIELDS[entry.kind]
                and getattr(entry, field.name) != getattr(unset, field.name)
            ):
                raise ConfigError(f"{where}.{field.name}: not used by kind = {entry.kind!r}; remove it")
    if entry.kind == "unix":
        address = f"unix:{need('path')}"
    elif entry.kind in ("tcp", "tls"):
        address = f"{entry.kind}:{need('address')}"
    elif entry.kind in ("ws", "wss", "http", "https"):
        address = f"{entry.kind}://{need('address')}{entry.path or '/'}"
    elif entry.kind == "fd" and entry.protocol in (None, "newline"):
        if entry.path is not None:
            raise ConfigError(f'{where}.path: only for protocol = "http"')
        address = f"fd:{need('name')}"
    elif entry.kind == "fd" and entry.protocol == "http":
        address = f"http+fd:{need('name')}{entry.path or '/mcp'}"
    elif entry.kind == "fd":
        raise ConfigError(f'{where}.protocol: expected "newline" (the default) or "http"')
    else:
        raise ConfigError(f"{where}.kind: expected one of {', '.join(LISTENER_KINDS)}")
    try:
        parse_address(address)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    mode = 0o600
    if entry.socket_mode is not None:
        try:
            mode = int(entry.socket_mode, 8)
        except ValueError:
            raise ConfigError(f'{where}.socket_mode: expected octal bits such as "0660"') from None
        if mode & ~0o770:
            raise ConfigError(f'{where}.socket_mode: at most "0770" (no access for others)')
    tokens = load_tokens(entry.token_file, entry.token_env, entry.token_credential)
    options = ListenOptions(
        socket_mode=mode,
        socket_group=entry.socket_group,  # ids: the file's types refuse names
        allow_uids=frozenset(entry.allow_uid),
        allow_gids=frozenset(entry.allow_gid),
        tokens=tokens,
        tls_cert=entry.tls_cert,
        tls_key=entry.tls_key,
        tls_client_ca=entry.tls_client_ca,
        allow_origins=frozenset(entry.allow_origin),
        allow_hosts=frozenset(entry.allow_host),
        allow_non_loopback=entry.insecure_no_auth,
        http=_http_options(entry, where),
    )
    if entry.kind in ("tls", "wss", "https") and (entry.tls_cert is None or entry.tls_key is None):
        raise ConfigError(f"{where}: kind = {entry.kind!r} needs tls_cert and tls_key")
    return address, options


def _http_options(entry: ListenerEntry, where: str) -> HttpOptions:
    from .main import load_resource_metadata

    defaults = HttpOptions()
    if entry.max_sessions is not None and entry.max_sessions < 1:
        raise ConfigError(f"{where}.max_sessions: expected a positive whole number")
    return HttpOptions(
        session_idle_timeout=(
            parse_duration(entry.session_idle_timeout, field=f"{where}.session_idle_timeout")
            if entry.session_idle_timeout is not None
            else defaults.session_idle_timeout
        ),
        max_sessions=entry.max_sessions if entry.max_sessions is not None else defaults.max_sessions,
        trust_proxy=entry.trust_proxy,
        cors_origins=frozenset(entry.cors_origin),
        resource_metadata=load_resource_metadata(entry.oauth_metadata, f"{where}.oauth_metadata"),
    )


# Limits that belong to the listeners (ListenOptions), not to Limits.
LISTENER_TIMEOUTS = ("handshake_timeout", "ping_interval", "ping_timeout")


def _limits(entry: LimitsEntry, where: str) -> tuple[Limits, dict[str, Any]]:
    """The ``Limits``, and the listener timeouts (``handshake_timeout``...) that were given."""
    defaults = Limits()
    values: dict[str, Any] = {}
    for field in attrs.fields(LimitsEntry):
        value = getattr(entry, field.name)
        if value is None or field.name in LISTENER_TIMEOUTS:
            continue
        if field.name in ("max_message", "max_child_message"):
            name = "max_client_message" if field.name == "max_message" else field.name
            values[name] = parse_size(value, field=f"{where}.{field.name}")
        elif field.name in ("max_connections", "max_in_flight"):
            values[field.name] = value
        else:
            values[field.name] = parse_duration(value, field=f"{where}.{field.name}")
    timeouts: dict[str, Any] = {
        name: parse_duration(getattr(entry, name), field=f"{where}.{name}")
        for name in LISTENER_TIMEOUTS
        if getattr(entry, name) is not None
    }
    return attrs.evolve(defaults, **values), timeouts


def serve_configs(config: ConfigFile) -> dict[str, ServeConfig]:
    """One :class:`ServeConfig` per server, by name.

    Raises:
        ConfigError: a value that cannot work, naming its field.
    """
    if not config.servers:
        raise ConfigError("servers: the file defines no server")
    result = {}
    for name, server in config.servers.items():
        where = f"servers.{name}"
        if not server.command:
            raise ConfigError(f"{where}.command: expected the command and its arguments, got none")
        if not server.listeners:
            raise ConfigError(f"{where}.listeners: a server needs at least one listener")
        if server.child not in CHILD_MODES:
            raise ConfigError(f"{where}.child: expected one of {', '.join(CHILD_MODES)}")
        if server.start not in ("eager", "lazy"):
            raise ConfigError(f'{where}.start: expected "eager" or "lazy"')
        for field, least in (("prespawn", 0), ("restart_limit", 0)):
            if getattr(server, field) < least:
                raise ConfigError(f"{where}.{field}: expected a whole number, at least {least}")
        for field in ("max_connections", "max_in_flight"):
            value = getattr(server.limits, field)
            if value is not None and value < 1:
                raise ConfigError(f"{where}.limits.{field}: expected a positive whole number")
        if server.prespawn and server.child == "shared":
            raise ConfigError(f'{where}.prespawn: for per-connection mode; child = "shared" has one child')
        if server.cwd is not None and not os.path.isdir(server.cwd):
            raise ConfigError(f"{where}.cwd: {server.cwd!r} is not a directory")
        if any("\0" in part for part in server.command):
            raise ConfigError(f"{where}.command: holds a NUL character")
        limits, timeouts = _limits(server.limits, f"{where}.limits")
        addresses, options = [], []
        for index, entry in enumerate(server.listeners):
            address, listen_options = _listener(entry, f"{where}.listeners[{index}]")
            listen_options = attrs.evolve(listen_options, **timeouts)
            addresses.append(address)
            options.append(listen_options)
        window = (
            parse_duration(server.restart_window, field=f"{where}.restart_window")
            if server.restart_window is not None
            else RestartPolicy().crash_window
        )
        result[name] = ServeConfig(
            listen=addresses,
            listener_options=tuple(options),
            child=ChildSpec(
                argv=server.command, name=name, env=server.env, pass_env=server.pass_env, cwd=server.cwd
            ),
            limits=limits,
            prespawn=server.prespawn,
            child_mode=server.child,
            start=server.start,
            restart_policy=RestartPolicy(crash_limit=server.restart_limit, crash_window=window),
        )
    return result


def describe(configs: Mapping[str, ServeConfig]) -> list[str]:
    """One line per server, for ``check-config``."""
    return [
        f"{name}: {' '.join(config.child.argv)} on "
        + ", ".join(str(address) for address in config.listen)
        + f" ({config.child_mode})"
        for name, config in configs.items()
    ]
