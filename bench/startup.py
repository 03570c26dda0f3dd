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

REPO = Path(__file__).resolve().parent.parent

RUNS = 21  # odd, so the median is one run's figure; ~10 s in all on the 2-core benchmark VM
WARMUP_RUNS = 2  # unmeasured, so that the first measured run does not pay for a cold page cache


# Runs a command and prints its peak RSS in KiB: RUSAGE_CHILDREN of a process with one child is
# that child's own ru_maxrss (this process's would include the benchmark's)
_PEAK_RSS = (
    "import resource, subprocess, sys; "
    "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def _one_run(command: list[str], cwd: Path) -> float:
    """Wall seconds of one run of ``command`` in ``cwd``, which must succeed."""
    started = time.perf_counter()
    subprocess.run(command, check=True, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def measure(runs: int = RUNS, baseline: Path | None = None) -> dict:
    """Median wall ms of ``mcp-bridge --version`` and of ``python -c pass``, and peak RSS MiB.

    With ``baseline`` (another checkout), also ``python -m bridge --version`` run there
    (``baseline_ms``), and here (``module_ms``) to compare it with.
    """
    script = str(Path(sys.executable).with_name("mcp-bridge"))
    module = [sys.executable, "-m", "bridge", "--version"]
    commands = {"version": ([script, "--version"], REPO), "python": ([sys.executable, "-c", "pass"], REPO)}
    if baseline is not None:
        commands |= {"module": (module, REPO), "baseline": (module, baseline)}
    walls: dict[str, list[float]] = {name: [] for name in commands}
    peaks = {name: _peak_rss_mib(*command) for name, command in commands.items()}
    for _ in range(WARMUP_RUNS):
        for command in commands.values():
            _one_run(*command)
    for _ in range(runs):
        for name, command in commands.items():
            walls[name].append(_one_run(*command))
    figures = {"runs": runs, "command": commands["version"][0]}
    for name in commands:
        figures[f"{name}_ms"] = statistics.median(walls[name]) * 1e3
        figures[f"{name}_peak_rss_mib"] = peaks[name]
    return figures


def _peak_rss_mib(command: list[str], cwd: Path) -> float:
    """Peak RSS of one run of ``command`` in ``cwd``, in MiB."""
    result = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, *command], check=True, cwd=cwd, capture_output=True, text=True
    )
    return int(result.stdout.strip()) / 1024


def render(figures: dict) -> str:
    text = (
        f"startup: `mcp-bridge --version` {figures['version_ms']:.0f} ms "
        f"(`python -c pass` {figures['python_ms']:.0f} ms), median of {figures['runs']}; "
        f"peak RSS {figures['version_peak_rss_mib']:.1f} MiB "
        f"(`python -c pass` {figures['python_peak_rss_mib']:.1f} MiB)"
    )
    if "baseline_ms" in figures:
        text += (
            f"; `python -m bridge --version` {figures['module_ms']:.0f} ms and "
            f"{figures['module_peak_rss_mib']:.1f} MiB, at the baseline {figures['baseline_ms']:.0f} ms "
            f"and {figures['baseline_peak_rss_mib']:.1f} MiB"
        )
    return text


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
