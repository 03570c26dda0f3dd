"""The ``mcp-bridge`` command line: ``serve`` (the default) and ``connect``."""

from __future__ import annotations

import argparse
import contextlib
import grp
import json
import logging
import os
import pwd
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from importlib import metadata
from typing import Any, TypeVar

import trio

from channels import (
    AddressError,
    ConnectOptions,
    CredentialError,
    HttpOptions,
    ListenError,
    ListenOptions,
    TcpAddress,
    TokenSet,
    address_schemes,
    client_token_from_env,
    client_token_from_file,
    parse_address,
    tokens_from_credential,
    tokens_from_env,
    tokens_from_file,
)

from .._child.process import ChildSpec
from .._child.supervisor import CrashLoop, RestartPolicy
from .._daemon.daemon import ServeConfig
from .._errors import ChildStartError, ConfigError
from .._limits import Limits, parse_duration, parse_size
from .._ops.admin import admin_address
from .._ops.fleet import run_fleet
from .._ops.logs import configure_logging
from .._ops.memory import return_large_blocks_to_the_system
from .._relay.tap import Tap
from . import config as config_file
from .connect import EXIT_UNAVAILABLE, run_connect

logger = logging.getLogger("bridge")

T = TypeVar("T")

EXIT_OK = 0
EXIT_FAILURE = 1  # a runtime failure (serve), or a lost connection (connect)
EXIT_USAGE = 2  # argparse's own code for a malformed command line
EXIT_CRASH_LOOP = 75  # EX_TEMPFAIL: the shared child kept crashing; systemd's policy takes over
EXIT_CONFIG = 78  # EX_CONFIG (sysexits.h): a setting that cannot work; systemd won't retry it

SERVE_EPILOG = """\
examples:
  mcp-bridge --listen unix:/run/mcp.sock -- npx -y @modelcontextprotocol/server-everything
  mcp-bridge --listen unix:/tmp/mcp.sock --listen tcp:127.0.0.1:7300 -- python3 server.py
  mcp-bridge --listen ws://127.0.0.1:7301/mcp -- python3 server.py
  mcp-bridge --listen wss://0.0.0.0:7301/mcp --tls-cert cert.pem --tls-key key.pem \
             --token-file /etc/mcp-bridge/tokens -- python3 server.py
  mcp-bridge connect unix:/tmp/mcp.sock          # from any stdio MCP client

--child auto (the default) asks the server its protocol era: legacy servers get one
child per connection; modern ones one shared child for modern clients, while
legacy clients get their own. SIGTERM or SIGINT stops gracefully (in-flight
requests finish within --drain-timeout); a second signal stops at once. SIGHUP
makes TLS listeners read their certificate files again and, with --config,
reloads the file (mcp-bridge check-config FILE validates one).

exit codes: 0 stopped cleanly, 1 runtime failure, 2 usage error, 69 cannot connect,
75 the shared child kept crashing, 78 configuration error (bad address, socket in use,
command not found, bad value).
"""

CONNECT_EPILOG = """\
examples:
  mcp-bridge connect unix:/run/mcp.sock
  mcp-bridge connect tcp:127.0.0.1:7300
  mcp-bridge connect wss://mcp.example:7301/mcp --token-file ~/.config/mcp/token

stdin and stdout speak newline-delimited JSON-RPC, exactly like a stdio MCP server;
logs go to stderr. EOF on stdin half-closes the connection, so replies still in
flight arrive before it exits (on TLS and WebSocket, which cannot half-close, it
waits for the replies it still expects, then closes). A token is never taken on
the command line, where other users could read it. exit codes: 0 done, 1 connection
lost or closed by the bridge, 2 usage error, 69 cannot connect, 77 access denied
(token, Origin or certificate refused), 78 bad address or option.
"""


def _version() -> str:
    try:
        return metadata.version("mcp-bridge")
    except metadata.PackageNotFoundError:
        return "unknown"


def _parsed_by(parse: Callable[..., T], field: str) -> Callable[[str], T]:
    """An argparse ``type=`` that runs one of _limits' parsers and reports its error as usage."""

    def convert(text: str) -> T:
        try:
            return parse(text, field=field)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def _size(field: str) -> Callable[[str], int]:
    return _parsed_by(parse_size, field)


def _duration(field: str) -> Callable[[str], float]:
    return _parsed_by(parse_duration, field)


def _positive(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return int(text)


def _count(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    return int(text)


def _mode(text: str) -> int:
    try:
        mode = int(text, 8)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected octal permission bits such as 0600, got {text!r}"
        ) from None
    if mode & ~0o777 or mode & 0o007:
        raise argparse.ArgumentTypeError(
            f"{text}: socket mode must be within 0770 (no access for others); use 0600 or 0660"
        )
    return mode


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="log verbosity on stderr (default: info)",
    )
    parser.add_argument(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="text for people (default), or json: one JSON object per line, for log shippers",
    )
    parser.add_argument("--version", action="version", version=f"mcp-bridge {_version()}")


def serve_parser() -> argparse.ArgumentParser:
    limits = Limits()
    parser = argparse.ArgumentParser(
        prog="mcp-bridge",
        usage="mcp-bridge [serve] --listen ADDRESS [--listen ADDRESS ...] [options] -- COMMAND [ARGS...]\n"
        "       mcp-bridge [serve] --config FILE [options]\n"
        "       mcp-bridge check-config FILE",
        description="Launch a stdio MCP server and serve it on Unix sockets, TCP, TLS and WebSocket.",
        epilog=SERVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    schemes = ", ".join(f"{scheme}:" for scheme in address_schemes())
    parser.add_argument(
        "--listen",
        action="append",
        default=[],
        metavar="ADDRESS",
        help=f"where to accept clients ({schemes}); repeat for several",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="serve the servers a TOML file describes (or a client's mcpServers JSON, *.json), "
        "instead of --listen and a command",
    )
    parser.add_argument(
        "--socket-dir",
        default="/run/mcp-bridge",
        metavar="DIR",
        help="with an mcpServers JSON file: where each server's Unix socket goes (default: %(default)s)",
    )
    child = parser.add_argument_group("child process")
    child.add_argument("--name", default="server", help="the server's name in logs")
    child.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a variable in the child's environment (repeatable)",
    )
    child.add_argument(
        "--pass-env",
        action="append",
        default=[],
        metavar="NAME",
        help="pass a variable of the bridge's environment on to the child "
        "(repeatable; HOME, PATH, USER, LANG and a few more always are)",
    )
    child.add_argument("--cwd", metavar="DIR", help="the child's working directory")
    child.add_argument(
        "--child",
        choices=["per-connection", "shared", "auto"],
        default="auto",
        help="one child per connection, one shared by every client (supervised, "
        "restarted with backoff), or auto (default): probe the server with "
        "server/discover; legacy: per-connection; modern or dual-era: "
        "modern clients share one child, legacy clients get their own",
    )
    child.add_argument(
        "--start",
        choices=["eager", "lazy"],
        default="eager",
        help="shared and auto modes: start (and probe) the child before "
        "accepting (eager, default) or on the first connection (lazy)",
    )
    child.add_argument(
        "--restart-limit",
        type=_count,
        default=RestartPolicy().crash_limit,
        metavar="N",
        help="shared child: give up (exit 75) after more than N "
        "unexpected exits within --restart-window (default: "
        f"{RestartPolicy().crash_limit})",
    )
    child.add_argument(
        "--restart-window",
        type=_duration("--restart-window"),
        default=RestartPolicy().crash_window,
        metavar="DURATION",
        help=f"(default: {RestartPolicy().crash_window:g}s)",
    )
    child.add_argument(
        "--prespawn",
        type=_count,
        default=0,
        metavar="N",
        help="keep N children started ahead of connections, so that a new "
        "connection does not wait for a process start (default: 0)",
    )
    security = parser.add_argument_group("security")
    security.add_argument(
        "--socket-mode",
        type=_mode,
        default=0o600,
        metavar="MODE",
        help="permissions of Unix socket files (default: 0600)",
    )
    security.add_argument(
        "--socket-group",
        metavar="GROUP",
        help="group of Unix socket files (name or id), e.g. with --socket-mode 0660",
    )
    security.add_argument(
        "--allow-uid",
        action="append",
        default=[],
        metavar="UID",
        help="Unix sockets: serve only peers with this uid (name or id; "
        "repeatable; with --allow-gid, either admits)",
    )
    security.add_argument(
        "--allow-gid",
        action="append",
        default=[],
        metavar="GID",
        help="Unix sockets: serve only peers with this primary gid (name or id; repeatable)",
    )
    security.add_argument(
        "--token-file",
        action="append",
        default=[],
        metavar="PATH",
        help="network listeners (tcp:, tls:, ws://, wss://) require a bearer "
        "token from this file (one per line; repeatable, so tokens can "
        "be rotated; the file must not be readable by others)",
    )
    security.add_argument(
        "--token-env",
        action="append",
        default=[],
        metavar="NAME",
        help="... or from this environment variable (repeatable)",
    )
    security.add_argument(
        "--token-credential",
        action="append",
        default=[],
        metavar="NAME",
        help="... or from this systemd credential (LoadCredential=NAME:...)",
    )
    security.add_argument(
        "--tls-cert", metavar="PATH", help="certificate chain (PEM) for tls: and wss:// listeners"
    )
    security.add_argument("--tls-key", metavar="PATH", help="its private key (PEM)")
    security.add_argument(
        "--tls-client-ca",
        metavar="PATH",
        help="require TLS clients to present a certificate signed by these "
        "CAs (mTLS); that authenticates them",
    )
    security.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="WebSocket and HTTP: also accept this Origin, e.g. https://app.example "
        "(repeatable; loopback origins are accepted on loopback binds; "
        "requests without Origin always are)",
    )
    security.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST",
        help="WebSocket and HTTP: also accept this Host name (repeatable; by default "
        "loopback names on loopback binds, any name elsewhere)",
    )
    web = parser.add_argument_group("Streamable HTTP listeners")
    web.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let browser pages from this origin call the endpoint (CORS; repeatable; off by default)",
    )
    web.add_argument(
        "--trust-proxy",
        action="store_true",
        help="behind a reverse proxy: check X-Forwarded-Host instead of Host and log "
        "X-Forwarded-For as the client (only if nothing but the proxy can reach the listener)",
    )
    web.add_argument(
        "--oauth-metadata",
        metavar="FILE",
        help="serve this JSON OAuth protected-resource metadata document (RFC 9728) at "
        "/.well-known/oauth-protected-resource/PATH and name it in 401 answers",
    )
    web.add_argument(
        "--session-idle-timeout",
        type=_duration("--session-idle-timeout"),
        default=HttpOptions().session_idle_timeout,
        metavar="DURATION",
        help="end a legacy session idle this long, stopping its child "
        f"(default: {HttpOptions().session_idle_timeout:g}s)",
    )
    web.add_argument(
        "--max-sessions",
        type=_positive,
        default=HttpOptions().max_sessions,
        metavar="N",
        help=f"legacy sessions at once per HTTP address (default: {HttpOptions().max_sessions})",
    )
    security.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="allow network listeners on non-loopback addresses without "
        "authentication (tokens or client certificates)",
    )
    bounds = parser.add_argument_group("limits and timeouts")
    bounds.add_argument(
        "--max-message",
        type=_size("--max-message"),
        metavar="SIZE",
        default=limits.max_client_message,
        help="longest message from a client (default: 4MiB)",
    )
    bounds.add_argument(
        "--max-child-message",
        type=_size("--max-child-message"),
        metavar="SIZE",
        default=limits.max_child_message,
        help="longest message from the child (default: 16MiB)",
    )
    bounds.add_argument(
        "--max-connections",
        type=_positive,
        default=limits.max_connections,
        metavar="N",
        help=f"connections served at once (default: {limits.max_connections})",
    )
    bounds.add_argument(
        "--max-in-flight",
        type=_positive,
        default=limits.max_in_flight,
        metavar="N",
        help=f"requests in flight per connection (default: {limits.max_in_flight})",
    )
    for flag, attribute, what in (
        ("--send-timeout", "send_timeout", "a client may take to accept one write"),
        ("--half-close-timeout", "half_close_timeout", "replies may take after a client's EOF"),
        ("--drain-timeout", "drain_timeout", "in-flight requests may take on SIGTERM"),
        ("--stop-stdin-timeout", "stop_stdin_timeout", "a child may take to exit after stdin closes"),
        ("--stop-term-timeout", "stop_term_timeout", "a child may take to exit after SIGTERM"),
    ):
        default = getattr(limits, attribute)
        bounds.add_argument(
            flag,
            dest=attribute,
            type=_duration(flag),
            default=default,
            metavar="DURATION",
            help=f"how long {what} (default: {default:g}s)",
        )
    bounds.add_argument(
        "--handshake-timeout",
        type=_duration("--handshake-timeout"),
        default=ListenOptions().handshake_timeout,
        metavar="DURATION",
        help="how long a client may take for its TLS handshake, WebSocket "
        "upgrade and authentication (default: "
        f"{ListenOptions().handshake_timeout:g}s)",
    )
    bounds.add_argument(
        "--ping-interval",
        type=_duration("--ping-interval"),
        default=ListenOptions().ping_interval,
        metavar="DURATION",
        help=f"WebSocket keepalive ping period (default: {ListenOptions().ping_interval:g}s)",
    )
    bounds.add_argument(
        "--ping-timeout",
        type=_duration("--ping-timeout"),
        default=ListenOptions().ping_timeout,
        metavar="DURATION",
        help=f"close a WebSocket whose pong takes longer (default: {ListenOptions().ping_timeout:g}s)",
    )
    parser.add_argument(
        "--admin",
        metavar="ADDRESS",
        help="serve /healthz, /readyz and /metrics (Prometheus) over HTTP on this loopback "
        "address, e.g. tcp:127.0.0.1:9100",
    )
    parser.add_argument(
        "--tap",
        metavar="FILE",
        help="debugging: append every message to and from clients to FILE as JSON Lines "
        "(created 0600; off by default)",
    )
    bounds.add_argument(
        "--request-timeout",
        type=_duration("--request-timeout"),
        default=None,
        metavar="DURATION",
        help="answer a request still running after this with -32001 and cancel it "
        "at the child (default: no limit)",
    )
    _add_common(parser)
    return parser


def connect_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-bridge connect",
        description="Relay stdin/stdout to a bridge, so a stdio-only MCP client can use it.",
        epilog=CONNECT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("address", metavar="ADDRESS", help="the bridge's address, e.g. unix:/run/mcp.sock")
    parser.add_argument(
        "--max-message",
        type=_size("--max-message"),
        metavar="SIZE",
        default=ConnectOptions().max_message_bytes,
        help="longest message accepted in either direction (default: 16MiB)",
    )
    credentials = parser.add_mutually_exclusive_group()
    credentials.add_argument(
        "--token-file", metavar="PATH", help="present the bearer token in this file (its first token)"
    )
    credentials.add_argument(
        "--token-env", metavar="NAME", help="present the bearer token in this environment variable"
    )
    parser.add_argument(
        "--tls-ca", metavar="PATH", help="tls: and wss://: trust these CAs (PEM) instead of the system's"
    )
    parser.add_argument(
        "--tls-cert", metavar="PATH", help="tls: and wss://: present this client certificate (PEM; mTLS)"
    )
    parser.add_argument("--tls-key", metavar="PATH", help="the client certificate's key (PEM)")
    parser.add_argument(
        "--handshake-timeout",
        type=_duration("--handshake-timeout"),
        default=ConnectOptions().handshake_timeout,
        metavar="DURATION",
        help="how long connecting, TLS and the WebSocket upgrade may take "
        f"(default: {ConnectOptions().handshake_timeout:g}s)",
    )
    _add_common(parser)
    return parser


def resolve_group(text: str, *, flag: str = "--socket-group") -> int:
    """A group id from a name or a number.

    Raises:
        ConfigError: no such group, naming ``flag`` (an option, or a configuration field).
    """
    if text.isascii() and text.isdigit():
        return int(text)
    try:
        return grp.getgrnam(text).gr_gid
    except KeyError:
        raise ConfigError(f"{flag}: no group named {text!r}") from None


def resolve_user(text: str, *, flag: str = "--allow-uid") -> int:
    """A user id from a name or a number.

    Raises:
        ConfigError: no such user, naming ``flag`` (an option, or a configuration field).
    """
    if text.isascii() and text.isdigit():
        return int(text)
    try:
        return pwd.getpwnam(text).pw_uid
    except KeyError:
        raise ConfigError(f"{flag}: no user named {text!r}") from None


def _check_command(spec: ChildSpec) -> None:
    command = spec.argv[0]
    if "\0" in command:
        raise ConfigError(f"command {command!r} holds a NUL character")
    if os.sep in command:
        path = os.path.join(spec.cwd or os.getcwd(), command)
        if not os.access(path, os.X_OK) or os.path.isdir(path):
            raise ConfigError(f"command {command!r} is not an executable file")
    elif shutil.which(command, path=spec.environment(os.environ).get("PATH")) is None:
        raise ConfigError(f"command {command!r} not found in PATH")


NETWORK_SCHEMES = frozenset({"tcp", "tls", "ws", "wss", "http", "https"})
TLS_SCHEMES = frozenset({"tls", "wss", "https"})
WEB_SCHEMES = frozenset({"ws", "wss", "http", "https"})
HTTP_SCHEMES = frozenset({"http", "https"})


def _load_tokens(options: argparse.Namespace) -> TokenSet | None:
    """Every token from --token-file, --token-env and --token-credential, or ``None``.

    Raises:
        ConfigError: a source cannot be used (the message names it, never a token).
    """
    return load_tokens(options.token_file, options.token_env, options.token_credential)


def load_tokens(
    files: Sequence[str], variables: Sequence[str], credentials: Sequence[str]
) -> TokenSet | None:
    """Every token from these files, environment variables and systemd credentials, or ``None``.

    Raises:
        ConfigError: a source cannot be used (the message names it, never a token).
    """
    loaders = (
        [partial(tokens_from_file, path) for path in files]
        + [partial(tokens_from_env, name) for name in variables]
        + [partial(tokens_from_credential, name) for name in credentials]
    )
    tokens: TokenSet | None = None
    for load in loaders:
        try:
            loaded = load()
        except CredentialError as exc:
            raise ConfigError(f"bearer token: {exc}") from None
        tokens = loaded if tokens is None else tokens | loaded
    return tokens


def load_resource_metadata(path: str | None, field: str) -> dict[str, Any] | None:
    """Read an OAuth protected-resource metadata document (a JSON object), or ``None``.

    Raises:
        ConfigError: the file cannot be read or is not a JSON object, naming ``field``.
    """
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as file:
            document = json.load(file)
    except OSError as exc:
        raise ConfigError(f"{field} {path!r}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ConfigError(f"{field} {path!r}: not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise ConfigError(
            f"{field} {path!r}: expected a JSON object such as "
            '{"authorization_servers": ["https://auth.example"]}'
        )
    return document


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
    spec = ChildSpec(
        argv=list(command), name=options.name, env=env, pass_env=list(options.pass_env), cwd=options.cwd
    )
    _check_command(spec)
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
    group = None if options.socket_group is None else resolve_group(options.socket_group)
    listen_options = ListenOptions(
        socket_mode=options.socket_mode,
        socket_group=group,
        allow_non_loopback=options.insecure_no_auth,
        allow_uids=frozenset(resolve_user(text) for text in options.allow_uid),
        allow_gids=frozenset(resolve_group(text, flag="--allow-gid") for text in options.allow_gid),
        tokens=_load_tokens(options),
        tls_cert=options.tls_cert,
        tls_key=options.tls_key,
        tls_client_ca=options.tls_client_ca,
        allow_origins=frozenset(options.allow_origin),
        allow_hosts=frozenset(options.allow_host),
        handshake_timeout=options.handshake_timeout,
        ping_interval=options.ping_interval,
        ping_timeout=options.ping_timeout,
        http=HttpOptions(
            session_idle_timeout=options.session_idle_timeout,
            max_sessions=options.max_sessions,
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
    )


def build_connect_options(options: argparse.Namespace) -> ConnectOptions:
    """Turn ``connect``'s parsed options into :class:`ConnectOptions`.

    Raises:
        ConfigError: an unusable token source or certificate option.
    """
    try:
        if options.token_file is not None:
            token: str | None = client_token_from_file(options.token_file)
        elif options.token_env is not None:
            token = client_token_from_env(options.token_env)
        else:
            token = None
    except CredentialError as exc:
        raise ConfigError(f"bearer token: {exc}") from None
    if options.tls_key is not None and options.tls_cert is None:
        raise ConfigError("--tls-key needs --tls-cert")
    return ConnectOptions(
        max_message_bytes=options.max_message,
        token=token,
        tls_ca=options.tls_ca,
        tls_cert=options.tls_cert,
        tls_key=options.tls_key,
        handshake_timeout=options.handshake_timeout,
    )


async def serve(
    configs: ServeConfig | Mapping[str, ServeConfig],
    tap_path: str | None = None,
    admin: TcpAddress | None = None,
    reread: Callable[[], Mapping[str, ServeConfig]] | None = None,
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
        default=config_file.DEFAULT_SOCKET_DIR,
        metavar="DIR",
        help="for mcpServers JSON: where each server's socket goes",
    )
    _add_common(parser)
    options = parser.parse_args(argv)
    configure_logging(options.log_level, options.log_format)
    try:
        configs = config_file.serve_configs(config_file.read(options.file, options.socket_dir))
        for config in configs.values():
            _check_command(config.child)
    except ConfigError as exc:
        for line in str(exc).splitlines():
            logger.error("%s", line)
        return EXIT_CONFIG
    for line in config_file.describe(configs):
        print(line)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mcp-bridge``; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["connect"]:
        options = connect_parser().parse_args(args[1:])
        configure_logging(options.log_level, options.log_format)
        try:
            address = parse_address(options.address)
            connect_options = build_connect_options(options)
        except (AddressError, ConfigError) as exc:
            logger.error("%s", exc)
            return EXIT_CONFIG
        return trio.run(run_connect, address, connect_options)
    if args[:1] == ["check-config"]:
        return check_config(args[1:])
    if args[:1] == ["serve"]:
        args = args[1:]
    command: list[str] = []
    if "--" in args:
        split = args.index("--")
        args, command = args[:split], args[split + 1 :]
    parser = serve_parser()
    options = parser.parse_args(args)
    return_large_blocks_to_the_system()
    if options.config is None and not options.listen:
        parser.error("one of --listen ADDRESS (with a command after '--') or --config FILE is required")
    configure_logging(options.log_level, options.log_format)
    try:
        configs, reread = _configs(options, command)
        admin = admin_address(options.admin) if options.admin is not None else None
        return trio.run(serve, configs, options.tap, admin, reread)
    except Exception as exc:
        leaves = list(_leaves(exc))
        if any(isinstance(leaf, CrashLoop) for leaf in leaves):
            logger.error("%s", next(leaf for leaf in leaves if isinstance(leaf, CrashLoop)))
            return EXIT_CRASH_LOOP
        if all(isinstance(leaf, (ListenError, ConfigError, ChildStartError)) for leaf in leaves):
            for leaf in leaves:
                logger.error("%s", leaf)
            return EXIT_CONFIG
        logger.error("mcp-bridge failed", exc_info=exc)
        return EXIT_FAILURE


def _configs(
    options: argparse.Namespace, command: Sequence[str]
) -> tuple[dict[str, ServeConfig], Callable[[], dict[str, ServeConfig]] | None]:
    """The servers to run, by name, and how to read them again on SIGHUP.

    The reader is ``None`` for a server from the command line: nothing to reread.

    Raises:
        ConfigError: both ``--config`` and ``--listen`` given, or a bad value.
    """
    if options.config is None:
        config = build_serve_config(options, command)
        return {config.child.name: config}, None
    if options.listen or command:
        raise ConfigError(
            "--config FILE describes the servers and their listeners: drop --listen "
            "and the command after '--'"
        )
    defaults = vars(serve_parser().parse_args([]))
    process_wide = {"config", "socket_dir", "admin", "tap", "log_level", "log_format", "listen"}
    ignored = sorted(
        name
        for name, value in vars(options).items()
        if name not in process_wide and value != defaults.get(name)
    )
    if ignored:
        flags = ", ".join("--" + name.replace("_", "-") for name in ignored)
        raise ConfigError(f"{flags}: with --config, set this in the file (per server or listener)")

    def read() -> dict[str, ServeConfig]:
        configs = config_file.serve_configs(config_file.read(options.config, options.socket_dir))
        for config in configs.values():
            _check_command(config.child)
        return configs

    return read(), read


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups; trio wraps what escapes a nursery."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


__all__ = [
    "EXIT_CONFIG",
    "EXIT_CRASH_LOOP",
    "EXIT_FAILURE",
    "EXIT_OK",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "main",
]
