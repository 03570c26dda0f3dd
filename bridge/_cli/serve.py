"""``mcp-bridge [serve]`` and ``check-config``: from parsed options to running daemons.

:func:`build_serve_config` turns the command line into a :class:`ServeConfig`, refusing options
no listener would use; :func:`servers_to_run` picks the command line or the ``--config`` file;
:func:`serve` runs the fleet with its tap; :func:`check_config` validates a file and starts
nothing. Error reporting and exit codes are :mod:`.main`'s.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from channels import AddressError, HttpOptions, ListenOptions, parse_address

from .._child.process import ChildSpec
from .._child.restarts import RestartPolicy
from .._daemon.config import IDLE_STOP, PROBE_TIMEOUT, ServeConfig
from .._errors import ConfigError
from .._limits import Limits
from .._ops.fleet import run_fleet
from .._ops.logs import configure_logging
from .._ops.plan import FleetPlan
from .arguments import add_common
from .describe import describe
from .exits import EXIT_CONFIG, EXIT_OK
from .fleet_file import LISTEN_FLAGS, check_command, listen_table, read_config
from .loaders import load_resource_metadata, load_tokens, resolve_group, resolve_user
from .mcp_servers import DEFAULT_SOCKET_DIR
from .oauth_options import build_oauth, check_audience, flag_name
from .sandbox_options import build_sandbox
from .scope_options import build_tool_scopes
from .serve_parser import serve_parser

if TYPE_CHECKING:
    from channels import TcpAddress  # the admin endpoint's address (channels loads tcp on first use)

    from .._relay.tap import Tap  # loads with --tap only

logger = logging.getLogger("bridge")

NETWORK_SCHEMES = frozenset({"tcp", "tls", "ws", "wss", "http", "https"})
TLS_SCHEMES = frozenset({"tls", "wss", "https"})
WEB_SCHEMES = frozenset({"ws", "wss", "http", "https"})
HTTP_SCHEMES = frozenset({"http", "https"})


def build_serve_config(options: argparse.Namespace, command: Sequence[str]) -> ServeConfig:
    """Turn parsed options into a :class:`ServeConfig`.

    Raises:
        ConfigError: naming the option and the fix.
    """
    if not command:
        raise ConfigError("no server command: put it after '--', e.g. -- python3 server.py")
    try:
        addresses = tuple(parse_address(text) for text in options.listen)
    except AddressError as exc:
        raise ConfigError(f"--listen {exc}") from None
    env = {}
    for item in options.env:
        name, equals, value = item.partition("=")
        if not equals or not name:
            raise ConfigError(f"--env {item!r}: expected NAME=VALUE")
        env[name] = value
    if options.cwd is not None and not os.path.isdir(options.cwd):
        raise ConfigError(f"--cwd {options.cwd!r}: not a directory")
    sandbox = build_sandbox(options)
    if sandbox is not None:
        secrets = [*options.token_file, options.tls_key, options.tap, options.oauth_client_file]
        sandbox = attrs.evolve(sandbox, hide=[os.path.abspath(path) for path in secrets if path])
    spec = ChildSpec(
        argv=list(command),
        name=options.name,
        env=env,
        pass_env=list(options.pass_env),
        cwd=options.cwd,
        sandbox=sandbox,
    )
    check_command(spec)
    if sandbox is not None:
        from .._child.bwrap import check_sandbox  # loads with --sandbox only

        check_sandbox(sandbox)
    limits = Limits(
        max_client_message=options.max_message,
        max_child_message=options.max_child_message,
        max_connections=options.max_connections,
        max_in_flight=options.max_in_flight,
        send_timeout=options.send_timeout,
        half_close_timeout=options.half_close_timeout,
        drain_timeout=options.drain_timeout,
        stop_stdin_timeout=options.stop_stdin_timeout,
        stop_term_timeout=options.stop_term_timeout,
        request_timeout=options.request_timeout,
    )
    _check_security_options(options, {address.scheme for address in addresses})
    oauth = build_oauth(
        issuers=options.oauth_issuer,
        audiences=options.oauth_audience,
        scopes=options.oauth_scope,
        introspection=options.oauth_introspection,
        client_file=options.oauth_client_file,
        name=flag_name,
    )
    for address in addresses:
        check_audience(oauth, address, f"--listen {address}")
    group = None if options.socket_group is None else resolve_group(options.socket_group)
    listen_options = ListenOptions(
        socket_mode=options.socket_mode,
        socket_group=group,
        allow_non_loopback=options.insecure_no_auth,
        allow_uids=frozenset(resolve_user(text) for text in options.allow_uid),
        allow_gids=frozenset(resolve_group(text, flag="--allow-gid") for text in options.allow_gid),
        tokens=load_tokens(options.token_file, options.token_env, options.token_credential),
        tls_cert=options.tls_cert,
        tls_key=options.tls_key,
        tls_client_ca=options.tls_client_ca,
        allow_origins=frozenset(options.allow_origin),
        allow_hosts=frozenset(options.allow_host),
        handshake_timeout=options.handshake_timeout,
        ping_interval=options.ping_interval,
        ping_timeout=options.ping_timeout,
        idle_timeout=options.idle_timeout,
        tcp_keepalive=options.tcp_keepalive,
        oauth=oauth,
        http=HttpOptions(
            session_idle_timeout=options.session_idle_timeout,
            max_sessions=options.max_sessions,
            sse_after=options.sse_after,
            trust_proxy=options.trust_proxy,
            cors_origins=frozenset(options.cors_origin),
            resource_metadata=load_resource_metadata(options.oauth_metadata, "--oauth-metadata"),
        ),
    )
    if options.prespawn and options.child == "shared":
        raise ConfigError(
            "--prespawn keeps children for per-connection mode; with --child shared "
            "there is one child, started before the listeners accept"
        )
    if options.idle_stop is not None and options.start != "on-demand":
        raise ConfigError("--idle-stop: only with --start on-demand (the child is stopped when idle)")
    if options.idle_stop is not None and options.idle_stop <= 0:
        raise ConfigError(f"--idle-stop: expected a positive duration such as 10m, not {options.idle_stop:g}")
    if options.probe_timeout is not None and options.child != "auto":
        raise ConfigError("--probe-timeout: only with --child auto (the probe chooses the child mode)")
    if options.probe_timeout is not None and options.probe_timeout <= 0:
        raise ConfigError(
            f"--probe-timeout: expected a positive duration such as 10s, not {options.probe_timeout:g}"
        )
    policy = RestartPolicy(crash_limit=options.restart_limit, crash_window=options.restart_window)
    return ServeConfig(
        listen=addresses,
        child=spec,
        limits=limits,
        listen_options=listen_options,
        prespawn=options.prespawn,
        child_mode=options.child,
        restart_policy=policy,
        start=options.start,
        idle_stop=options.idle_stop if options.idle_stop is not None else IDLE_STOP,
        probe_timeout=options.probe_timeout if options.probe_timeout is not None else PROBE_TIMEOUT,
        tool_scopes=build_tool_scopes(options.tool_scope),
    )


def _check_security_options(options: argparse.Namespace, schemes: set[str]) -> None:
    """Refuse security options that no listener would use.

    An operator who passes them believes they protect something.

    Raises:
        ConfigError: naming the option and the listeners it needs.
    """
    if (
        options.token_file or options.token_env or options.token_credential
    ) and not schemes & NETWORK_SCHEMES:
        raise ConfigError(
            "bearer tokens protect tcp:, tls:, ws://, wss://, http:// and https:// listeners, and "
            "there is none; Unix sockets rely on their file mode and --allow-uid"
        )
    tls_flags = [
        flag
        for flag, value in (
            ("--tls-cert", options.tls_cert),
            ("--tls-key", options.tls_key),
            ("--tls-client-ca", options.tls_client_ca),
        )
        if value
    ]
    if tls_flags and not schemes & TLS_SCHEMES:
        raise ConfigError(f"{tls_flags[0]} is for tls:, wss:// and https:// listeners, and there is none")
    if (options.tls_cert is None) != (options.tls_key is None):
        raise ConfigError("--tls-cert and --tls-key go together: pass both")
    if schemes & TLS_SCHEMES and options.tls_cert is None:
        raise ConfigError(
            "tls:, wss:// and https:// listeners need a certificate: pass --tls-cert PATH and --tls-key PATH"
        )
    web_flags = [
        flag
        for flag, value in (("--allow-origin", options.allow_origin), ("--allow-host", options.allow_host))
        if value
    ]
    if web_flags and not schemes & WEB_SCHEMES:
        raise ConfigError(
            f"{web_flags[0]} is for ws://, wss://, http:// and https:// listeners, and there is none"
        )
    http_flags = [
        flag
        for flag, value in (
            ("--cors-origin", options.cors_origin),
            ("--trust-proxy", options.trust_proxy),
            ("--oauth-metadata", options.oauth_metadata),
        )
        if value
    ]
    if http_flags and not schemes & HTTP_SCHEMES:
        raise ConfigError(f"{http_flags[0]} is for http:// and https:// listeners, and there is none")
    oauth_flags = [
        flag
        for flag, value in (
            ("--oauth-issuer", options.oauth_issuer),
            ("--oauth-audience", options.oauth_audience),
            ("--oauth-scope", options.oauth_scope),
            ("--oauth-introspection", options.oauth_introspection),
            ("--oauth-client-file", options.oauth_client_file),
        )
        if value
    ]
    if oauth_flags and not schemes & (WEB_SCHEMES | {"http+fd"}):
        raise ConfigError(
            f"{oauth_flags[0]} is for ws://, wss://, http:// and https:// listeners, and there is none"
        )


def servers_to_run(
    options: argparse.Namespace, command: Sequence[str]
) -> tuple[FleetPlan, Callable[[], FleetPlan] | None]:
    """The servers to run, and how to read them again on SIGHUP.

    The reader is ``None`` for a server from the command line: nothing to reread. ``--config``
    with one ``--listen http://HOST:PORT`` serves every server of the file on that port
    (:func:`.mcp_servers.listen_on`).

    Raises:
        ConfigError: ``--config`` with a command or another ``--listen``, or a bad value.
    """
    if options.config is None:
        config = build_serve_config(options, command)
        return FleetPlan({config.child.name: config}), None
    listen = listen_table(options) if options.listen else None
    if command or (options.listen and listen is None):
        raise ConfigError(
            "--config FILE describes the servers and their listeners: drop --listen "
            "and the command after '--' (or give one --listen http://HOST:PORT, or ws://HOST:PORT, "
            "to serve every server of the file on that port)"
        )
    defaults = vars(serve_parser().parse_args([]))
    process_wide = {"config", "socket_dir", "admin", "tap", "log_level", "log_format", "listen"}
    if listen is not None:
        process_wide |= set(LISTEN_FLAGS)
    ignored = sorted(
        name
        for name, value in vars(options).items()
        if name not in process_wide and value != defaults.get(name)
    )
    if ignored:
        flags = ", ".join("--" + name.replace("_", "-") for name in ignored)
        raise ConfigError(f"{flags}: with --config, set this in the file (per server or listener)")

    def read() -> FleetPlan:
        return read_config(options.config, options.socket_dir, options.tap, listen=listen)

    return read(), read


async def serve(
    configs: ServeConfig | Mapping[str, ServeConfig] | FleetPlan,
    tap_path: str | None = None,
    admin: TcpAddress | None = None,
    reread: Callable[[], FleetPlan | Mapping[str, ServeConfig]] | None = None,
) -> int:
    """Run one daemon per server, with signal handling; return the exit code.

    The first SIGTERM/SIGINT stops every daemon gracefully, the second stops them at once; SIGHUP
    calls ``reread`` and applies what changed (see :mod:`bridge._ops.fleet`).
    """
    if isinstance(configs, ServeConfig):
        configs = {configs.child.name: configs}
    with _open_tap(tap_path) as tap:
        return await run_fleet(configs, tap=tap, admin=admin, reread=reread)


@contextlib.contextmanager
def _open_tap(path: str | None) -> Iterator[Tap | None]:
    """The ``--tap`` file, created owner-only (messages may hold secrets) and appended to.

    Raises:
        ConfigError: it cannot be opened.
    """
    if path is None:
        yield None
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise ConfigError(f"--tap {path}: {exc.strerror}") from None
    from .._relay.tap import Tap  # imported only with --tap

    with open(fd, "w", encoding="utf-8") as file:
        yield Tap(file)


def check_config(argv: Sequence[str]) -> int:
    """``mcp-bridge check-config FILE``: validate a configuration file without starting anything."""
    parser = argparse.ArgumentParser(
        prog="mcp-bridge check-config", description="Validate a configuration file; start nothing."
    )
    parser.add_argument("file", metavar="FILE", help="TOML, or a client's mcpServers JSON (*.json)")
    parser.add_argument(
        "--socket-dir",
        default=DEFAULT_SOCKET_DIR,
        metavar="DIR",
        help="for mcpServers JSON: where each server's socket goes",
    )
    add_common(parser)
    options = parser.parse_args(argv)
    configure_logging(options.log_level, options.log_format)
    try:
        fleet = read_config(options.file, options.socket_dir, strict=True)
    except ConfigError as exc:
        for line in str(exc).splitlines():
            logger.error("%s", line)
        return EXIT_CONFIG
    for line in describe(fleet):
        print(line)
    return EXIT_OK
