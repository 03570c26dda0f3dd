"""The configuration file (``--config FILE``): many servers, each with its listeners, in TOML.

:func:`read` reads the file (TOML, or a client's ``mcpServers`` JSON) and structures it
(:mod:`.schema` is its shape, :mod:`.mcp_servers` the JSON form); :func:`plan` turns its entries
into one :class:`ServeConfig` per server, with the command line's own rules for tokens, metadata
documents, sizes and durations, and the shared listeners with what is mounted on them
(:mod:`.shared_listeners`). Every error names the field it is about.
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from typing import Any

import attrs

from channels import HttpOptions, ListenOptions, OAuthSettings, TcpKeepalive, parse_address

from .._child.process import ChildSpec
from .._child.restarts import RestartPolicy
from .._child.sandbox import Sandbox
from .._daemon.config import IDLE_STOP, PROBE_TIMEOUT, ServeConfig
from .._errors import ConfigError
from .._limits import Limits, parse_duration, parse_size
from .._ops.plan import FleetPlan, Mount, SharedListener
from .._relay.scopes import ToolScopes, tool_rules
from .loaders import load_resource_metadata, load_tokens
from .mcp_servers import DEFAULT_SOCKET_DIR, from_mcp_servers, listen_on
from .oauth_options import check_audience, oauth_keys
from .sandbox_options import sandbox_paths
from .schema import (
    CHILD_MODES,
    KIND_FIELDS,
    LISTENER_KINDS,
    ConfigFile,
    LimitsEntry,
    ListenerEntry,
    SandboxEntry,
    SharedListenerEntry,
    structure,
)
from .shared_listeners import check_mount, check_routes, shared_listeners


def read(
    path: str, socket_dir: str = DEFAULT_SOCKET_DIR, listen: Mapping[str, Any] | None = None
) -> ConfigFile:
    """Read ``path``: TOML, or a client's ``mcpServers`` JSON (by its ``.json`` name).

    ``listen``: a shared listener's table (``--listen URL`` beside ``--config``) every server is
    mounted on, as ``[listeners.listen]``; an mcpServers file's servers then get no Unix socket.

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
        data = from_mcp_servers(data, socket_dir, unix=listen is None)
    else:
        try:
            data = tomllib.loads(raw.decode())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"--config {path}: not TOML ({exc})") from None
    return structure(data if listen is None else listen_on(data, dict(listen)))


def _listener(entry: ListenerEntry, where: str) -> tuple[str, ListenOptions]:
    """The address text and the options of one listener.

    Raises:
        ConfigError: a field the kind needs is missing, or one is unusable.
    """

    def need(field: str) -> str:
        value = getattr(entry, field)
        if not value:
            raise ConfigError(f"{where}.{field}: required for kind = {entry.kind!r}")
        return str(value)

    if entry.kind is None:
        raise ConfigError(
            f'{where}.kind: required (one of {", ".join(LISTENER_KINDS)}), or shared = "NAME" to be '
            "mounted on a [listeners.NAME]"
        )
    if entry.kind in KIND_FIELDS:
        unset = ListenerEntry(kind=entry.kind)
        for field in attrs.fields(ListenerEntry):
            if (
                field.name not in ("kind", "shared")
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
        parsed = parse_address(address)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    oauth = _oauth(entry, where)
    check_audience(oauth, parsed, where)
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
        oauth=oauth,
        http=_http_options(entry, where),
    )
    if entry.kind in ("tls", "wss", "https") and (entry.tls_cert is None or entry.tls_key is None):
        raise ConfigError(f"{where}: kind = {entry.kind!r} needs tls_cert and tls_key")
    return address, options


def _mount(entry: ListenerEntry, where: str, server: str, listeners: Mapping[str, SharedListener]) -> Mount:
    """A server's mount on a shared listener, with the server's own options for it.

    Raises:
        ConfigError: see :func:`.shared_listeners.check_mount`; an OAuth audience it cannot infer.
    """
    check_mount(entry, where, server, listeners)
    listener = listeners[str(entry.shared)]
    endpoint = entry.path if entry.path is not None else listener.default_path(server)
    oauth = _oauth(entry, where)
    if listener.url.startswith("http+fd:"):
        if oauth is not None and not oauth.audiences:
            raise ConfigError(
                f"{where}.oauth_audience: required on a socket-activated listener (its public URI)"
            )
    else:
        check_audience(oauth, parse_address(f"{listener.url}{endpoint}"), where)
    shared = listener.options
    options = ListenOptions(
        tokens=load_tokens(entry.token_file, entry.token_env, entry.token_credential),
        allow_origins=shared.allow_origins,  # the socket's Host and Origin checks, in every mount's guard
        allow_hosts=shared.allow_hosts,
        allow_non_loopback=entry.insecure_no_auth,
        oauth=oauth,
        http=attrs.evolve(_http_options(entry, where), trust_proxy=shared.http.trust_proxy),
    )
    return Mount(listener=str(entry.shared), path=entry.path, options=options)


def _oauth(entry: ListenerEntry, where: str) -> OAuthSettings | None:
    """The listener's OAuth settings (``oauth_*`` keys), or ``None``.

    Raises:
        ConfigError: as the command line's options, naming the field.
    """
    oauth = oauth_keys(entry, where)
    if oauth is None or oauth.audiences or entry.kind != "fd":
        return oauth
    if entry.protocol != "http":
        raise ConfigError(
            f'{where}.oauth_issuer: OAuth is for protocol = "http" (newline channels take token_file)'
        )
    raise ConfigError(
        f"{where}.oauth_audience: required with a socket-activated listener, whose public URI the bridge "
        'cannot tell; for example oauth_audience = ["https://mcp.example.com/mcp"]'
    )


def _http_options(entry: ListenerEntry, where: str) -> HttpOptions:
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
        sse_after=(
            parse_duration(entry.sse_after, field=f"{where}.sse_after")
            if entry.sse_after is not None
            else defaults.sse_after
        ),
        trust_proxy=entry.trust_proxy,
        cors_origins=frozenset(entry.cors_origin),
        resource_metadata=load_resource_metadata(entry.oauth_metadata, f"{where}.oauth_metadata"),
    )


# Limits that belong to the listeners (ListenOptions), not to Limits.
LISTENER_TIMEOUTS = ("handshake_timeout", "ping_interval", "ping_timeout", "idle_timeout")


def _limits(entry: LimitsEntry, where: str) -> tuple[Limits, dict[str, Any]]:
    """The ``Limits``, and the listener timeouts (``handshake_timeout``...) that were given."""
    defaults = Limits()
    values: dict[str, Any] = {}
    for field in attrs.fields(LimitsEntry):
        value = getattr(entry, field.name)
        if value is None or field.name in LISTENER_TIMEOUTS or field.name == "tcp_keepalive":
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
    if entry.tcp_keepalive is not None:
        try:
            timeouts["tcp_keepalive"] = TcpKeepalive.parse(entry.tcp_keepalive)
        except ValueError as exc:
            raise ConfigError(f"{where}.tcp_keepalive: {exc}") from None
    return attrs.evolve(defaults, **values), timeouts


def _sandbox(entry: SandboxEntry | None, where: str, secrets: list[str]) -> Sandbox | None:
    """A server's ``sandbox = {...}``, hiding the file's secrets (every token file, TLS key)."""
    if entry is None:
        return None
    return Sandbox(
        network=entry.network,
        read_write=sandbox_paths(entry.rw, f"{where}.rw"),
        read_only=sandbox_paths(entry.ro, f"{where}.ro"),
        hide=[os.path.abspath(path) for path in secrets],
        bwrap=entry.bwrap,
    )


def serve_configs(config: ConfigFile) -> dict[str, ServeConfig]:
    """One :class:`ServeConfig` per server, by name (without mounts: see :func:`plan`)."""
    return dict(plan(config).servers)


def plan(config: ConfigFile) -> FleetPlan:
    """One :class:`ServeConfig` per server, the shared listeners, and each server's mounts.

    Raises:
        ConfigError: a value that cannot work, naming its field.
    """
    if not config.servers:
        raise ConfigError("servers: the file defines no server")
    result = {}
    listeners = shared_listeners(config.listeners)
    mounts: dict[str, tuple[Mount, ...]] = {}
    entries: list[ListenerEntry | SharedListenerEntry] = [
        *(entry for server in config.servers.values() for entry in server.listeners),
        *config.listeners.values(),
    ]
    secrets = [
        path
        for entry in entries
        for path in (*entry.token_file, entry.tls_key, entry.oauth_client_file)
        if path
    ]
    for name, server in config.servers.items():
        where = f"servers.{name}"
        if not server.command:
            raise ConfigError(f"{where}.command: expected the command and its arguments, got none")
        if not server.listeners:
            raise ConfigError(
                f"{where}.listeners: a server needs at least one listener (its own, or "
                '{ shared = "NAME" } to be mounted on a [listeners.NAME])'
            )
        if server.child not in CHILD_MODES:
            raise ConfigError(f"{where}.child: expected one of {', '.join(CHILD_MODES)}")
        if server.start not in ("eager", "lazy", "on-demand"):
            raise ConfigError(f'{where}.start: expected "eager", "lazy" or "on-demand"')
        idle_stop = IDLE_STOP
        if server.idle_stop is not None:
            if server.start != "on-demand":
                raise ConfigError(f'{where}.idle_stop: only with start = "on-demand"')
            idle_stop = parse_duration(server.idle_stop, field=f"{where}.idle_stop")
            if idle_stop <= 0:
                raise ConfigError(f"{where}.idle_stop: expected a positive duration such as 10m")
        probe_timeout = PROBE_TIMEOUT
        if server.probe_timeout is not None:
            if server.child != "auto":
                raise ConfigError(f'{where}.probe_timeout: only with child = "auto" (the probe decides)')
            probe_timeout = parse_duration(server.probe_timeout, field=f"{where}.probe_timeout")
            if probe_timeout <= 0:
                raise ConfigError(f"{where}.probe_timeout: expected a positive duration such as 10s")
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
            if entry.shared is not None:
                mount = _mount(entry, f"{where}.listeners[{index}]", name, listeners)
                mounts[name] = (*mounts.get(name, ()), mount)
                continue
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
                argv=server.command,
                name=name,
                env=server.env,
                pass_env=server.pass_env,
                cwd=server.cwd,
                sandbox=_sandbox(server.sandbox, f"{where}.sandbox", secrets),
            ),
            limits=limits,
            prespawn=server.prespawn,
            child_mode=server.child,
            start=server.start,
            idle_stop=idle_stop,
            probe_timeout=probe_timeout,
            restart_policy=RestartPolicy(crash_limit=server.restart_limit, crash_window=window),
            tool_scopes=ToolScopes(tool_rules(server.tool_scopes, f"{where}.tool_scopes")),
        )
    result_plan = FleetPlan(servers=result, listeners=listeners, mounts=mounts)
    check_routes(result_plan)
    return result_plan
