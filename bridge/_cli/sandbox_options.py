"""``--sandbox`` and its options: the command line's and the configuration file's, to :class:`Sandbox`.

Paths are made absolute and must exist (bwrap cannot bind what is not there). A sandbox option
without ``--sandbox`` is refused: an operator who passes ``--sandbox-rw`` believes the child is
sandboxed. The start-up check (:func:`~bridge._child.sandbox.check_sandbox`) is :mod:`.serve`'s.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from .._child.sandbox import Sandbox
from .._errors import ConfigError


def add_sandbox(group: argparse._ArgumentGroup) -> None:
    """The sandbox options (docs/security.md, "Sandboxing children")."""
    group.add_argument(
        "--sandbox",
        action="store_true",
        help="run each child under bubblewrap (bwrap): the system read-only, /home, /root, $HOME "
        "and /run hidden, a private /tmp, no network, new PID namespace; exit 78 if bwrap is "
        "missing or cannot sandbox here",
    )
    group.add_argument(
        "--sandbox-rw",
        action="append",
        default=[],
        metavar="PATH",
        help="with --sandbox: let the child write PATH (repeatable)",
    )
    group.add_argument(
        "--sandbox-ro",
        action="append",
        default=[],
        metavar="PATH",
        help="with --sandbox: let the child read PATH, e.g. under a hidden /home (repeatable)",
    )
    group.add_argument(
        "--sandbox-network",
        action="store_true",
        help="with --sandbox: keep the host's network (default: only a loopback of its own)",
    )
    group.add_argument(
        "--sandbox-bwrap",
        default="bwrap",
        metavar="PATH",
        help="with --sandbox: the bwrap executable (default: bwrap, looked up in PATH)",
    )


def sandbox_paths(paths: Sequence[str], where: str) -> tuple[str, ...]:
    """``paths`` made absolute (normalised), each checked to exist.

    Raises:
        ConfigError: a path holds NUL or does not exist.
    """
    result = []
    for path in paths:
        if "\0" in path or not path:
            raise ConfigError(f"{where} {path!r}: expected a path")
        absolute = os.path.abspath(path)
        if not os.path.exists(absolute):
            raise ConfigError(
                f"{where} {path!r}: no such file or directory (bwrap can bind only what exists)"
            )
        result.append(absolute)
    return tuple(result)


def build_sandbox(options: argparse.Namespace) -> Sandbox | None:
    """The command line's sandbox, or ``None`` without ``--sandbox``.

    Raises:
        ConfigError: a sandbox option without ``--sandbox``, or a path that does not exist.
    """
    given = [
        flag
        for flag, value in (
            ("--sandbox-rw", options.sandbox_rw),
            ("--sandbox-ro", options.sandbox_ro),
            ("--sandbox-network", options.sandbox_network),
            ("--sandbox-bwrap", options.sandbox_bwrap != "bwrap"),
        )
        if value
    ]
    if not options.sandbox:
        if given:
            raise ConfigError(f"{given[0]} applies to a sandboxed child: add --sandbox")
        return None
    return Sandbox(
        network=options.sandbox_network,
        read_write=sandbox_paths(options.sandbox_rw, "--sandbox-rw"),
        read_only=sandbox_paths(options.sandbox_ro, "--sandbox-ro"),
        bwrap=options.sandbox_bwrap,
    )
