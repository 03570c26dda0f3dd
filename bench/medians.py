"""Medians of several runs of ``bench/run.py``: the summary table of the Performance page.

Run from the repository's root, with the files ``bench/run.py --out`` wrote::

    python bench/medians.py RUN.json [RUN.json ...]

Prints one Markdown table, a line per row in the first run's order: sequential p50, pipelined
calls/s, relay CPU per pipelined call, the 16 MiB echo and the relay's RSS with the concurrent
scenario's clients connected, each as its median over the runs with the lowest and highest in
brackets. A cell that failed in a run, or a row a run did not have, is left out of that cell's
figures; a cell with none shows the first run's error, or a dash where the row has no such figure
(no relay, no RSS of its own). Only runs of the same machine and session compare
(docs/benchmark.md, "Reading the numbers").
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

from report import short_error

KIB_PER_MIB = 1024


def _relay_rss_mib(result: dict) -> float | None:
    memory = result["relay_memory"]
    return None if memory is None else memory["rss_kb"] / KIB_PER_MIB


# (header, scenario, the figure read from its result, its format)
COLUMNS: tuple[tuple[str, str, Callable[[dict], float | None], str], ...] = (
    ("seq p50 µs", "sequential", lambda result: result["p50_us"], ",.1f"),
    ("pipelined calls/s", "pipelined", lambda result: result["calls_per_s"], ",.0f"),
    ("relay CPU µs/call", "pipelined", lambda result: result["cpu_us_per_call"]["relay"], ",.1f"),
    ("16 MiB echo ms", "echo_16MiB", lambda result: result["median_ms"], ",.1f"),
    ("RSS@50 MiB", "concurrent", _relay_rss_mib, ".2f"),
)


def figure(run: dict, row: str, scenario: str, read: Callable[[dict], float | None]) -> float | None:
    """One cell's figure in one run; ``None`` where the run has no such row or cell, or it failed."""
    for entry in run["rows"]:
        result = entry["results"].get(scenario) if entry["name"] == row else None
        if result is not None and "error" not in result:
            return read(result)
    return None


def figures(
    runs: Sequence[dict], row: str, scenario: str, read: Callable[[dict], float | None]
) -> list[float]:
    """The figure of one cell in each run that has it (not an error, not ``None``)."""
    return [value for run in runs if (value := figure(run, row, scenario, read)) is not None]


def first_error(runs: Sequence[dict], row: str, scenario: str) -> str | None:
    """The error of this cell in the first run where it failed."""
    for run in runs:
        for entry in run["rows"]:
            if entry["name"] == row and "error" in (result := entry["results"].get(scenario) or {}):
                return result["error"]
    return None


def cell(values: list[float], spec: str, error: str | None = None) -> str:
    """The median with the lowest and highest in brackets, the median alone for one value; with no
    value, the error or a dash."""
    if not values:
        return "–" if error is None else short_error(error)
    median = format(statistics.median(values), spec)
    if len(values) == 1:
        return median
    return f"{median} ({format(min(values), spec)}–{format(max(values), spec)})"


def table(runs: Sequence[dict]) -> str:
    header = ["row", *(name for name, *_ in COLUMNS)]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "--:|" * len(COLUMNS)]
    for row in [entry["name"] for entry in runs[0]["rows"]]:
        cells = [
            cell(figures(runs, row, scenario, read), spec, first_error(runs, row, scenario))
            for _, scenario, read, spec in COLUMNS
        ]
        lines.append("| " + " | ".join([row, *cells]) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="files written by bench/run.py --out")
    options = parser.parse_args()
    print(table([json.loads(path.read_text()) for path in options.runs]))


if __name__ == "__main__":
    main()
