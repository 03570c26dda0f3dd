"""The ``mcp-bridge`` command line: dispatch to ``serve`` (the default), ``connect`` or ``check-config``.

:func:`main` is the console script's entry point. A command line that asks only for the version is
answered here (:mod:`.version`), before trio, the parsers and the daemon are imported; every
other one goes to :func:`.commands.dispatch`, which parses, runs the command under trio and turns
what escapes into an exit code (:mod:`.exits`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .exits import (
    EXIT_CONFIG,
    EXIT_CRASH_LOOP,
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
)
from .version import asks_only_for_version, version_line


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mcp-bridge``; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if asks_only_for_version(args):
        print(version_line())
        return EXIT_OK
    # The parsers, trio and the daemon: imported only for a command line that needs them; what
    # they import for nothing (OpenSSL...), only on first use (lazy_imports).
    from .lazy_imports import defer_imports

    defer_imports()
    from .commands import dispatch

    return dispatch(args)


# The exit codes stay importable from the entry point, where bridge._errors' docstring points.
__all__ = [
    "EXIT_CONFIG",
    "EXIT_CRASH_LOOP",
    "EXIT_FAILURE",
    "EXIT_OK",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "main",
]
