"""What the parsers share: value types for argparse's ``type=``, and the options every command takes.

A value type turns the text of one option into its value, or raises
:class:`argparse.ArgumentTypeError`, which argparse reports as a usage error (exit 2) naming the
option.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from importlib import metadata
from typing import TypeVar

from .._errors import ConfigError
from .._limits import parse_duration, parse_size

T = TypeVar("T")


def version() -> str:
    """The installed distribution's version, or "unknown" when run from an uninstalled tree."""
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
    parser.add_argument("--version", action="version", version=f"mcp-bridge {version()}")
