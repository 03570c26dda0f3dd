"""``mcp-bridge connect``'s command line: its parser, and the :class:`ConnectOptions` it gives.

The relay itself, stdio on one side and a channel on the other, is :mod:`.connect`.
"""

from __future__ import annotations

import argparse

from channels import ConnectOptions, CredentialError, client_token_from_env, client_token_from_file

from .._errors import ConfigError
from .arguments import add_common, duration, size

# A raw string, printed as written (RawDescriptionHelpFormatter).
CONNECT_EPILOG = r"""examples:
  mcp-bridge connect unix:/run/mcp.sock
  mcp-bridge connect tcp:127.0.0.1:7300
  mcp-bridge connect http://127.0.0.1:7302/mcp
  mcp-bridge connect wss://mcp.example:7301/mcp --token-file ~/.config/mcp/token

stdin and stdout speak newline-delimited JSON-RPC, exactly like a stdio MCP server;
logs go to stderr. EOF on stdin half-closes the connection, so replies still in
flight arrive before it exits (on TLS and WebSocket, which cannot half-close, it
waits for the replies it still expects, then closes). A token is never taken on
the command line, where other users could read it. exit codes: 0 done, 1 connection
lost or closed by the bridge, 2 usage error, 69 cannot connect, 77 access denied
(token, Origin or certificate refused), 78 bad address or option.
"""


def connect_parser() -> argparse.ArgumentParser:
    """The parser of ``mcp-bridge connect ADDRESS``."""
    parser = argparse.ArgumentParser(
        prog="mcp-bridge connect",
        description="Relay stdin/stdout to a bridge on a Unix socket, TCP, TLS or WebSocket, or to any MCP\n"
        "server over Streamable HTTP, so that a stdio-only MCP client can use it.",
        epilog=CONNECT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("address", metavar="ADDRESS", help="the bridge's address, e.g. unix:/run/mcp.sock")
    parser.add_argument(
        "--max-message",
        type=size("--max-message"),
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
        "--tls-ca",
        metavar="PATH",
        help="tls:, wss:// and https://: trust these CAs (PEM) instead of the system's",
    )
    parser.add_argument(
        "--tls-cert",
        metavar="PATH",
        help="tls:, wss:// and https://: present this client certificate (PEM; mTLS)",
    )
    parser.add_argument("--tls-key", metavar="PATH", help="the client certificate's key (PEM)")
    parser.add_argument(
        "--handshake-timeout",
        type=duration("--handshake-timeout"),
        default=ConnectOptions().handshake_timeout,
        metavar="DURATION",
        help="how long connecting, TLS and the WebSocket upgrade may take "
        f"(default: {ConnectOptions().handshake_timeout:g}s)",
    )
    add_common(parser)
    return parser


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
