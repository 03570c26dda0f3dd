"""``mcp-bridge --version``, answered before the daemon is imported.

A command line that asks only for the version (``mcp-bridge --version``, ``mcp-bridge connect
--version``) needs neither trio nor the parsers: :func:`.main.main` answers it from here, with the
text argparse's ``version`` action prints, in about the interpreter's own start-up time.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import metadata

# The commands whose parsers take --version (each adds the common options, arguments.add_common).
COMMANDS = ("serve", "connect", "check-config")


def version() -> str:
    """The installed distribution's version, or "unknown" when run from an uninstalled tree."""
    try:
        return metadata.version("mcp-bridge")
    except metadata.PackageNotFoundError:
        return "unknown"


def asks_only_for_version(args: Sequence[str]) -> bool:
    """True for ``--version`` alone, after a command or none; anything else goes to the parsers."""
    return list(args[-1:]) == ["--version"] and (len(args) == 1 or (len(args) == 2 and args[0] in COMMANDS))


def version_line() -> str:
    """What ``--version`` prints (argparse's ``version`` action prints the same)."""
    return f"mcp-bridge {version()}"
