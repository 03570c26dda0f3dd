"""``mcp-bridge --version``, answered before the daemon is imported.

A command line that asks only for the version (``mcp-bridge --version``, ``mcp-bridge connect
--version``) needs neither trio nor the parsers: :func:`.main.main` answers it from here, with the
text argparse's ``version`` action prints, in about the interpreter's own start-up time.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import Any

# The commands whose parsers take --version (each adds the common options, arguments.add_common).
COMMANDS = ("serve", "connect", "check-config")


def version() -> str:
    """The installed distribution's version, or "unknown" when run from an uninstalled tree."""
    # importlib.metadata (and the email package it reads metadata with) loads only when asked.
    metadata = importlib.import_module("importlib.metadata")
    try:
        return str(metadata.version("mcp-bridge"))
    except metadata.PackageNotFoundError:
        return "unknown"


def asks_only_for_version(args: Sequence[str]) -> bool:
    """True for ``--version`` alone, after a command or none; anything else goes to the parsers."""
    return list(args[-1:]) == ["--version"] and (len(args) == 1 or (len(args) == 2 and args[0] in COMMANDS))


def version_line() -> str:
    """What ``--version`` prints, from here or from the parsers (:class:`VersionAction`)."""
    return f"mcp-bridge {version()}"


class VersionAction(argparse.Action):
    """argparse's ``version`` action, reading the version only when ``--version`` is given."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        kwargs.setdefault("help", "show program's version number and exit")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        print(version_line())
        parser.exit()
