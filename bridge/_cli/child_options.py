"""The child process's options: its environment, mode and era probe, start and stop, restarts.

:func:`add_child` adds them to :func:`.serve_parser.serve_parser`'s "child process" group. The
defaults come from the records they end up in (:class:`RestartPolicy`, :data:`IDLE_STOP`,
:data:`PROBE_TIMEOUT`), so that ``--help`` shows the values the daemon really uses.
"""

from __future__ import annotations

import argparse

from .._child.restarts import RestartPolicy
from .._daemon.config import IDLE_STOP, PROBE_TIMEOUT
from .arguments import count, duration


def add_child(child: argparse._ArgumentGroup) -> None:
    """How the child is started: its environment, the child mode, restarts, prespawning."""
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
        "--probe-timeout",
        type=duration("--probe-timeout"),
        metavar="DURATION",
        help=f"with --child auto: how long the era probe waits for the child (default: {PROBE_TIMEOUT:g}s)",
    )
    child.add_argument(
        "--start",
        choices=["eager", "lazy", "on-demand"],
        default="eager",
        help="start (and probe) the shared child before accepting (eager, default), on the "
        "first connection (lazy), or on the first connection and stop it (and empty "
        "--prespawn's pool) after --idle-stop with none (on-demand)",
    )
    child.add_argument(
        "--idle-stop",
        type=duration("--idle-stop"),
        metavar="DURATION",
        help=f"with --start on-demand: stop the child after this long with no client "
        f"(default: {IDLE_STOP / 60:g}m)",
    )
    child.add_argument(
        "--restart-limit",
        type=count,
        default=RestartPolicy().crash_limit,
        metavar="N",
        help="shared child: give up (exit 75) after more than N "
        "unexpected exits within --restart-window (default: "
        f"{RestartPolicy().crash_limit})",
    )
    child.add_argument(
        "--restart-window",
        type=duration("--restart-window"),
        default=RestartPolicy().crash_window,
        metavar="DURATION",
        help=f"(default: {RestartPolicy().crash_window:g}s)",
    )
    child.add_argument(
        "--prespawn",
        type=count,
        default=0,
        metavar="N",
        help="keep N children started ahead of connections, so that a new "
        "connection does not wait for a process start (default: 0)",
    )
