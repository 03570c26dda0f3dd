"""Before and after, with neither always first: runs of ``bench/run.py --baseline`` in both orders.

Run from the repository's root::

    python bench/alternate.py --baseline CHECKOUT [--runs 6] [--rows bridge-unix,bridge-tcp]
                              [--scenarios sequential,pipelined] [--quick] [--keep DIR]

``bench/run.py --baseline`` serves each bridge row from this checkout and then, right after, from
CHECKOUT. On a VM whose speed drifts, or that falls into a different mode between two rows (the
Performance page's "The latest runs" has an example), the row that always runs first is not
measured like the one that always runs second. This tool runs ``bench/run.py`` ``--runs`` times,
every other run with ``--baseline-first``, and prints, for each bridge row and each figure of the
summary table (``bench/medians.py``) that the runs measured, both trees' medians and in how many
runs this checkout's figure was the better one (lower, but for calls/s). ``--keep`` keeps each
run's JSON in DIR (``run1.json``, ...); ``bench/run.py``'s progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from medians import COLUMNS, figure
from relays import REPO
from targets import BASELINE_SUFFIX

DEFAULT_RUNS = 6  # three in each order
HIGHER_IS_BETTER = frozenset({"pipelined calls/s"})


def pairs(runs: Sequence[dict], row: str) -> list[tuple[str, str, list[float], list[float], int]]:
    """For each figure measured on ``row`` in both trees: (header, format, this checkout's figures,
    the baseline's, how many runs this checkout's was the better), over the runs that have both."""
    compared = []
    for header, scenario, read, spec in COLUMNS:
        ours, theirs, better = [], [], 0
        for run in runs:
            mine = figure(run, row, scenario, read)
            base = figure(run, row + BASELINE_SUFFIX, scenario, read)
            if mine is None or base is None:
                continue
            ours.append(mine)
            theirs.append(base)
            better += mine > base if header in HIGHER_IS_BETTER else mine < base
        if ours:
            compared.append((header, spec, ours, theirs, better))
    return compared


def table(runs: Sequence[dict]) -> str:
    lines = ["| row | figure | this checkout | baseline | this checkout better in |", "|---|---|--:|--:|--:|"]
    rows = [entry["name"] for entry in runs[0]["rows"] if not entry["name"].endswith(BASELINE_SUFFIX)]
    for row in rows:
        for header, spec, ours, theirs, better in pairs(runs, row):
            ours_median = format(statistics.median(ours), spec)
            theirs_median = format(statistics.median(theirs), spec)
            lines.append(f"| {row} | {header} | {ours_median} | {theirs_median} | {better} of {len(ours)} |")
    return "\n".join(lines)


def run_both_orders(options: argparse.Namespace, directory: Path) -> list[dict]:
    """``bench/run.py`` ``options.runs`` times, the baseline first in every other run."""
    documents = []
    for number in range(1, options.runs + 1):
        out = directory / f"run{number}.json"
        command = [sys.executable, "bench/run.py", "--baseline", str(options.baseline), "--out", str(out)]
        command += ["--rows", options.rows] + (
            ["--scenarios", options.scenarios] if options.scenarios else []
        )
        command += (["--quick"] if options.quick else []) + (["--baseline-first"] if number % 2 == 0 else [])
        print(f"[alternate] run {number} of {options.runs}: {' '.join(command[1:])}", file=sys.stderr)
        # Exit status 1 means some cell failed: that cell is left out of the comparison, not the run.
        subprocess.run(command, cwd=REPO, stdout=subprocess.DEVNULL, check=False)
        if not out.exists():
            raise SystemExit(f"bench/run.py wrote no results in run {number}: see its output above")
        documents.append(json.loads(out.read_text()))
    return documents


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, metavar="CHECKOUT", help="as bench/run.py's")
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help=f"default {DEFAULT_RUNS}")
    parser.add_argument("--rows", default="bridge-unix,bridge-tcp,bridge-ws,bridge-http,bridge-http-2026")
    parser.add_argument("--scenarios", help="as bench/run.py's (default: all)")
    parser.add_argument("--quick", action="store_true", help="bench/run.py --quick: a smoke run")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep each run's JSON in DIR")
    options = parser.parse_args()
    if options.runs < 2:
        parser.error("--runs: at least 2, one in each order")
    options.baseline = options.baseline.resolve()
    if options.keep is not None:
        options.keep.mkdir(parents=True, exist_ok=True)
        print(table(run_both_orders(options, options.keep)))
        return
    with tempfile.TemporaryDirectory(prefix="mcp-bridge-alternate-") as directory:
        print(table(run_both_orders(options, Path(directory))))


if __name__ == "__main__":
    main()
