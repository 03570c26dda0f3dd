"""The child process's options (``add_child``): where ``--help`` shows them, and their defaults.

What each option does to a ServeConfig is tested beside its feature (test_on_demand_options.py,
test_probe_timeout_options.py, test_cli.py); here, that the group is whole and in its order, and
that its defaults are the ones the daemon uses.
"""

from __future__ import annotations

import argparse

from bridge._child.restarts import RestartPolicy
from bridge._cli.child_options import add_child
from bridge._cli.serve_parser import serve_parser
from bridge._daemon.config import IDLE_STOP, PROBE_TIMEOUT

CHILD_FLAGS = [
    "--name",
    "--env",
    "--pass-env",
    "--cwd",
    "--child",
    "--probe-timeout",
    "--start",
    "--idle-stop",
    "--restart-limit",
    "--restart-window",
    "--prespawn",
]


def child_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="child-options")
    add_child(parser.add_argument_group("child process"))
    return parser


def test_serve_help_lists_the_child_options_in_their_own_group_in_order() -> None:
    text = serve_parser().format_help()
    section = text.split("\nchild process:\n", 1)[1].split("\n\n", 1)[0]
    flags = [line.split()[0].rstrip(",") for line in section.splitlines() if line.startswith("  --")]
    assert flags == CHILD_FLAGS


def test_the_child_options_default_to_what_the_daemon_uses_and_help_says_so() -> None:
    parser = child_parser()
    options = parser.parse_args([])
    policy = RestartPolicy()
    assert (options.child, options.start, options.prespawn) == ("auto", "eager", 0)
    assert (options.restart_limit, options.restart_window) == (policy.crash_limit, policy.crash_window)
    # None: not given, so that the serve command can refuse it where it does not apply.
    assert options.idle_stop is None and options.probe_timeout is None
    text = " ".join(parser.format_help().split())
    assert f"(default: {IDLE_STOP / 60:g}m)" in text and f"(default: {PROBE_TIMEOUT:g}s)" in text
    assert f"(default: {policy.crash_limit})" in text and f"(default: {policy.crash_window:g}s)" in text
