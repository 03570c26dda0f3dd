"""``mcp-bridge --version``, answered before the daemon is imported.

A command line that asks only for the version (``mcp-bridge --version``, ``mcp-bridge connect
--version``) needs neither trio nor the parsers: :func:`.main.main` answers it from here, with the
text argparse's ``version`` action prints, in about the interpreter's own start-up time.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from .._version import __version__

# The commands whose parsers take --version (each adds the common options, arguments.add_common).
COMMANDS = ("serve", "connect", "check-config")


def asks_only_for_version(args: Sequence[str]) -> bool:
    """True for ``--version`` alone, after a command or none; anything else goes to the parsers."""
    return list(args[-1:]) == ["--version"] and (len(args) == 1 or (len(args) == 2 and args[0] in COMMANDS))


def version_line() -> str:
    """What ``--version`` prints, from here or from the parsers (:class:`VersionAction`)."""
    return f"mcp-bridge {__version__}"


class VersionAction(argparse.Action):
    """argparse's ``version`` action, reading the version only when ``--version`` is given."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        kwargs.setdefault("help", "show program's version number and exit")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        print(version_line())
        parser.exit()
