"""What the parsers share: value types for argparse's ``type=``, and the options every command takes.

A value type turns the text of one option into its value, or raises
:class:`argparse.ArgumentTypeError`, which argparse reports as a usage error (exit 2) naming the
option.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

from channels import ListenOptions, TcpKeepalive

from .._errors import ConfigError
from .._limits import parse_duration, parse_size
from .version import VersionAction

T = TypeVar("T")


def _parsed_by(parse: Callable[..., T], field: str) -> Callable[[str], T]:
    """An argparse ``type=`` that runs one of _limits' parsers and reports its error as usage."""

    def convert(text: str) -> T:
        try:
            return parse(text, field=field)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def size(field: str) -> Callable[[str], int]:
    """A size such as ``4MiB`` for the option ``field``."""
    return _parsed_by(parse_size, field)


def duration(field: str) -> Callable[[str], float]:
    """A duration such as ``30s`` for the option ``field``."""
    return _parsed_by(parse_duration, field)


def positive(text: str) -> int:
    """A whole number, at least 1."""
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return int(text)


def count(text: str) -> int:
    """A whole number, 0 included."""
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    return int(text)


def socket_mode(text: str) -> int:
    """Octal permission bits for Unix socket files, none of them for others."""
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


def keepalive(text: str) -> TcpKeepalive | None:
    """``IDLE,INTERVAL,COUNT`` (TCP keepalive timings), or ``off``."""
    try:
        return TcpKeepalive.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_listener_timeouts(bounds: argparse._ArgumentGroup) -> None:
    """The listeners' own timeouts: handshake, WebSocket keepalive, idle connections, TCP keepalive."""
    defaults = ListenOptions()
    for flag, default, what in (
        (
            "--handshake-timeout",
            defaults.handshake_timeout,
            "how long a client may take for its TLS handshake, WebSocket upgrade and authentication",
        ),
        ("--ping-interval", defaults.ping_interval, "WebSocket keepalive ping period"),
        ("--ping-timeout", defaults.ping_timeout, "close a WebSocket whose pong takes longer"),
    ):
        bounds.add_argument(
            flag,
            type=duration(flag),
            default=default,
            metavar="DURATION",
            help=f"{what} (default: {default:g}s)",
        )
    bounds.add_argument(
        "--idle-timeout",
        type=duration("--idle-timeout"),
        default=None,
        metavar="DURATION",
        help="close a unix:, tcp: or tls: connection (stopping its child) after this long with no "
        "traffic either way and no request in flight; 0 for never (default: never on unix:, "
        "1h on tcp: and tls:)",
    )
    bounds.add_argument(
        "--tcp-keepalive",
        type=keepalive,
        default=defaults.tcp_keepalive,
        metavar="IDLE,INTERVAL,COUNT",
        help="TCP keepalive on accepted tcp: and tls: connections, in seconds and probes, or off "
        "(default: 300,100,3: a vanished peer is noticed within about 10 minutes)",
    )


def add_common(parser: argparse.ArgumentParser) -> None:
    """The options of every command: logging, and ``--version``."""
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
    parser.add_argument("--version", action=VersionAction)
