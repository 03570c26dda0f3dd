"""How long ``mcp-bridge --version`` takes, against the interpreter's own start, and its peak memory.

Run from the repository root (``bench/run.py`` runs it too, and prints it above its tables)::

    python bench/startup.py [--runs 21]

Each run is a fresh process: the console script ``mcp-bridge`` installed beside this interpreter
(``pip install -e .`` puts it there), then ``python -c pass`` with the same interpreter, alternating
so that a machine that speeds up or slows down during the runs affects both alike. The figures are
medians of wall time from ``fork`` to exit (``time.perf_counter`` around ``subprocess.run``), and the
largest peak RSS (``ru_maxrss`` of the finished child) seen for each command.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

RUNS = 21  # odd, so the median is one run's figure; ~10 s in all on the 2-core benchmark VM
WARMUP_RUNS = 2  # unmeasured, so that the first measured run does not pay for a cold page cache


# Runs a command and prints its peak RSS in KiB: RUSAGE_CHILDREN of a process with one child is
# that child's own ru_maxrss (this process's would include the benchmark's)
_PEAK_RSS = (
    "import resource, subprocess, sys; "
    "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def _one_run(command: list[str]) -> float:
    """Wall seconds of one run of ``command``, which must succeed."""
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def measure(runs: int = RUNS) -> dict:
    """Median wall ms of ``mcp-bridge --version`` and of ``python -c pass``, and peak RSS MiB."""
    script = str(Path(sys.executable).with_name("mcp-bridge"))
    commands = {"version": [script, "--version"], "python": [sys.executable, "-c", "pass"]}
    walls: dict[str, list[float]] = {name: [] for name in commands}
    peaks = {name: _peak_rss_mib(command) for name, command in commands.items()}
    for _ in range(WARMUP_RUNS):
        for command in commands.values():
            _one_run(command)
    for _ in range(runs):
        for name, command in commands.items():
            walls[name].append(_one_run(command))
    return {
        "runs": runs,
        "version_ms": statistics.median(walls["version"]) * 1e3,
        "python_ms": statistics.median(walls["python"]) * 1e3,
        "version_peak_rss_mib": peaks["version"],
        "python_peak_rss_mib": peaks["python"],
        "command": commands["version"],
    }


def _peak_rss_mib(command: list[str]) -> float:
    """Peak RSS of one run of ``command``, in MiB."""
    result = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, *command], check=True, capture_output=True, text=True
    )
    return int(result.stdout.strip()) / 1024


def render(figures: dict) -> str:
    return (
        f"startup: `mcp-bridge --version` {figures['version_ms']:.0f} ms "
        f"(`python -c pass` {figures['python_ms']:.0f} ms), median of {figures['runs']}; "
        f"peak RSS {figures['version_peak_rss_mib']:.1f} MiB "
        f"(`python -c pass` {figures['python_peak_rss_mib']:.1f} MiB)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS, help=f"measured runs of each (default {RUNS})")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    options = parser.parse_args(argv)
    figures = measure(options.runs)
    print(json.dumps(figures, indent=2) if options.json else render(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
