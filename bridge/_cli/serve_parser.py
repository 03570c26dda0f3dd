"""The parser of ``mcp-bridge [serve]``, built one option group at a time.

:func:`serve_parser` assembles it; each ``_add_*`` function adds one group's options: the
listeners, the child process (:mod:`.child_options`), its sandbox (:mod:`.sandbox_options`),
security (Unix peers, credentials, network access), Streamable HTTP, limits and timeouts,
operations. Defaults come from the records they end up in (:class:`Limits`, :class:`ListenOptions`,
:class:`HttpOptions`), so that ``--help`` shows the values the daemon really uses.
"""

from __future__ import annotations

import argparse

from channels import HttpOptions, address_schemes

from .._limits import Limits
from .arguments import add_common, add_listener_timeouts, duration, positive, size, socket_mode
from .child_options import add_child
from .mcp_servers import DEFAULT_SOCKET_DIR
from .oauth_options import add_oauth
from .sandbox_options import add_sandbox
from .scope_options import add_tool_scopes

# A raw string, printed as written (RawDescriptionHelpFormatter): the "\" ending a line is the
# shell's, and the line after it lines up under the first option.
SERVE_EPILOG = r"""examples:
  mcp-bridge --listen unix:/run/mcp.sock -- npx -y @modelcontextprotocol/server-everything
  mcp-bridge --listen unix:/tmp/mcp.sock --listen tcp:127.0.0.1:7300 -- python3 server.py
  mcp-bridge --listen ws://127.0.0.1:7301/mcp -- python3 server.py
  mcp-bridge --listen http://127.0.0.1:7302/mcp -- python3 server.py
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

# What ``parser.add_argument_group`` returns; the ``_add_*`` functions fill one in.
Group = argparse._ArgumentGroup


def serve_parser() -> argparse.ArgumentParser:
    """The parser of ``mcp-bridge [serve]``: every option, with its default and help."""
    parser = argparse.ArgumentParser(
        prog="mcp-bridge",
        usage="mcp-bridge [serve] --listen ADDRESS [--listen ADDRESS ...] [options] -- COMMAND [ARGS...]\n"
        "       mcp-bridge [serve] --config FILE [options]\n"
        "       mcp-bridge check-config FILE",
        description="Launch a stdio MCP server and serve it to many clients on Unix sockets, TCP, TLS,\n"
        "WebSocket and Streamable HTTP.",
        epilog=SERVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_listeners(parser)
    add_child(parser.add_argument_group("child process"))
    add_sandbox(parser.add_argument_group("sandbox (bubblewrap)"))
    security = parser.add_argument_group("security")
    _add_unix_access(security)
    _add_credentials(security)
    _add_network_access(security)
    add_tool_scopes(security)
    _add_http(parser.add_argument_group("Streamable HTTP listeners"))
    add_oauth(parser.add_argument_group("OAuth 2.1 access tokens (HTTP and WebSocket listeners)"))
    bounds = parser.add_argument_group("limits and timeouts")
    _add_limits(bounds)
    _add_timeouts(bounds)
    _add_operations(parser)
    add_common(parser)
    return parser


def _add_listeners(parser: argparse.ArgumentParser) -> None:
    """Where to serve: ``--listen`` addresses, or a ``--config`` file."""
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
        default=DEFAULT_SOCKET_DIR,
        metavar="DIR",
        help="with an mcpServers JSON file: where each server's Unix socket goes (default: %(default)s)",
    )


def _add_unix_access(security: Group) -> None:
    """Who may use a Unix socket: its file mode and group, and the peers' uids and gids."""
    security.add_argument(
        "--socket-mode",
        type=socket_mode,
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


def _add_credentials(security: Group) -> None:
    """What network clients present: bearer tokens, and TLS certificates."""
    security.add_argument(
        "--token-file",
        action="append",
        default=[],
        metavar="PATH",
        help="network listeners (tcp:, tls:, ws://, wss://, http://, https://) require a bearer "
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
        "--tls-cert", metavar="PATH", help="certificate chain (PEM) for tls:, wss:// and https:// listeners"
    )
    security.add_argument("--tls-key", metavar="PATH", help="its private key (PEM)")
    security.add_argument(
        "--tls-client-ca",
        metavar="PATH",
        help="require TLS clients to present a certificate signed by these "
        "CAs (mTLS); that authenticates them",
    )


def _add_network_access(security: Group) -> None:
    """Which web clients are let in (Origin, Host), and serving non-loopback without auth."""
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
    security.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="allow network listeners on non-loopback addresses without "
        "authentication (tokens or client certificates)",
    )


def _add_http(web: Group) -> None:
    """Streamable HTTP only: CORS, a reverse proxy, OAuth metadata, legacy sessions."""
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
        "/.well-known/oauth-protected-resource/PATH and name it in 401 answers "
        "(with --oauth-issuer, instead of the generated one)",
    )
    web.add_argument(
        "--session-idle-timeout",
        type=duration("--session-idle-timeout"),
        default=HttpOptions().session_idle_timeout,
        metavar="DURATION",
        help="end a legacy session idle this long, stopping its child "
        f"(default: {HttpOptions().session_idle_timeout:g}s)",
    )
    web.add_argument(
        "--max-sessions",
        type=positive,
        default=HttpOptions().max_sessions,
        metavar="N",
        help=f"legacy sessions at once per HTTP address (default: {HttpOptions().max_sessions})",
    )
    web.add_argument(
        "--sse-after",
        type=duration("--sse-after"),
        default=HttpOptions().sse_after,
        metavar="DURATION",
        help="answer a POST with an event stream (keep-alive comments) once its answer takes this "
        "long with nothing to send before it; quicker answers are one JSON body "
        f"(default: {HttpOptions().sse_after:g}s)",
    )


def _add_limits(bounds: Group) -> None:
    """Message sizes, connections and requests in flight."""
    limits = Limits()
    bounds.add_argument(
        "--max-message",
        type=size("--max-message"),
        metavar="SIZE",
        default=limits.max_client_message,
        help="longest message from a client (default: 4MiB)",
    )
    bounds.add_argument(
        "--max-child-message",
        type=size("--max-child-message"),
        metavar="SIZE",
        default=limits.max_child_message,
        help="longest message from the child (default: 16MiB)",
    )
    bounds.add_argument(
        "--max-connections",
        type=positive,
        default=limits.max_connections,
        metavar="N",
        help=f"connections served at once (default: {limits.max_connections})",
    )
    bounds.add_argument(
        "--max-in-flight",
        type=positive,
        default=limits.max_in_flight,
        metavar="N",
        help=f"requests in flight per connection (default: {limits.max_in_flight})",
    )


def _add_timeouts(bounds: Group) -> None:
    """How long clients, children, handshakes, keepalives and requests may take."""
    limits = Limits()
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
            type=duration(flag),
            default=default,
            metavar="DURATION",
            help=f"how long {what} (default: {default:g}s)",
        )
    add_listener_timeouts(bounds)
    bounds.add_argument(
        "--request-timeout",
        type=duration("--request-timeout"),
        default=None,
        metavar="DURATION",
        help="answer a request still running after this with -32001 and cancel it "
        "at the child (default: no limit)",
    )


def _add_operations(parser: argparse.ArgumentParser) -> None:
    """Process-wide: the admin endpoint, and the message tap."""
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
