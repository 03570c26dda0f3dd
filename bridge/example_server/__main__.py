"""``python3 -m bridge.example_server`` (or ``python3 bridge/example_server``): the command line.

Parses the fault switches (the package docstring lists them), then feeds stdin to a
:class:`~bridge.example_server.server.Server` line by line until it ends.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

if not __package__:  # the directory was run (python3 bridge/example_server): import from its tree
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import bridge.example_server as package
from bridge.example_server.server import Server


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parse the command line (the fault switches the module docstring lists)."""
    parser = argparse.ArgumentParser(description=(package.__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--crash-after",
        type=int,
        metavar="N",
        help="answer N requests, then exit with status 3 when the next one arrives",
    )
    parser.add_argument(
        "--crash-once-file",
        metavar="PATH",
        help="with --crash-after: crash only if PATH does not exist, creating it "
        "(so the restarted process serves on)",
    )
    parser.add_argument(
        "--modern-after-crash",
        action="store_true",
        help="with --crash-once-file: a process started after the crash serves "
        "only the 2026-07-28 era (refuses initialize)",
    )
    parser.add_argument(
        "--junk-every", type=int, metavar="N", help="write a non-JSON line to stdout before every Nth reply"
    )
    parser.add_argument(
        "--stderr-flood", type=int, metavar="N", default=0, help="write N lines to stderr at start"
    )
    parser.add_argument("--ignore-stdin-eof", action="store_true", help="keep running after stdin closes")
    parser.add_argument("--ignore-sigterm", action="store_true", help="ignore SIGTERM")
    parser.add_argument(
        "--close-stdout-after", type=int, metavar="N", help="close stdout after N replies but stay alive"
    )
    parser.add_argument(
        "--era",
        choices=("dual", "legacy", "modern"),
        default="dual",
        help="protocol eras served: both (default), only the initialize handshake, "
        "or only the 2026-07-28 stateless era",
    )
    parser.add_argument(
        "--discover-hang",
        action="store_true",
        help="never answer server/discover (later requests are answered)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Serve stdin until it ends (or forever, with ``--ignore-stdin-eof``); return the exit code."""
    options = parse_args(sys.argv[1:] if argv is None else argv)
    if options.modern_after_crash and options.crash_once_file and os.path.exists(options.crash_once_file):
        options.era = "modern"
    if options.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for number in range(options.stderr_flood):
        sys.stderr.write(f"example server: stderr line {number}\n")
    sys.stderr.flush()
    server = Server(options)
    for line in sys.stdin.buffer:
        server.feed(line)
    if options.ignore_stdin_eof:
        while True:
            time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
