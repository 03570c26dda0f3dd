"""bench/alternate.py compares two trees over runs of bench/run.py in both orders.

The tool behind the "nothing else slower" line of docs/performance.md. No timing is judged here:
what is checked is the comparison it prints (pairs from the same run, which way is better) and
that its runs really alternate which tree goes first.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench_tables import bench_table

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
from alternate import pairs


def run(figures: dict[str, tuple[float, float]]) -> dict:
    """A run as ``bench/run.py --out`` writes it: ``bridge-unix`` and its baseline, with a
    sequential p50 and pipelined calls/s each (this checkout's, the baseline's)."""
    (p50, base_p50), (calls, base_calls) = figures["p50"], figures["calls"]

    def results(p50: float, calls: float) -> dict:
        return {
            "sequential": {"p50_us": p50},
            "pipelined": {"calls_per_s": calls, "cpu_us_per_call": {"relay": None}},
        }

    return {
        "rows": [
            {"name": "bridge-unix", "results": results(p50, calls)},
            {"name": "bridge-unix@baseline", "results": results(base_p50, base_calls)},
        ]
    }


def test_each_figure_is_compared_within_a_run_lower_better_but_for_calls_per_second() -> None:
    runs = [
        run({"p50": (190, 200), "calls": (50_000, 60_000)}),  # faster round trip, fewer calls/s
        run({"p50": (210, 200), "calls": (70_000, 60_000)}),  # slower round trip, more calls/s
        run({"p50": (180, 220), "calls": (65_000, 55_000)}),  # better at both
    ]
    compared = {
        header: (ours, theirs, better) for header, _, ours, theirs, better in pairs(runs, "bridge-unix")
    }
    assert compared == {
        "seq p50 µs": ([190, 210, 180], [200, 200, 220], 2),
        "pipelined calls/s": ([50_000, 70_000, 65_000], [60_000, 60_000, 55_000], 2),
    }  # no relay CPU: a figure neither tree has is left out


def test_a_run_where_one_tree_failed_a_cell_is_left_out_of_that_cells_pairs() -> None:
    runs = [run({"p50": (190, 200), "calls": (1, 2)}), run({"p50": (180, 170), "calls": (3, 4)})]
    runs[1]["rows"][1]["results"]["sequential"] = {"error": "timed out"}
    (_, _, ours, theirs, better), _ = pairs(runs, "bridge-unix")
    assert (ours, theirs, better) == ([190], [200], 1)


async def test_its_runs_alternate_which_tree_goes_first(tmp_path: Path) -> None:
    cells = await bench_table(
        "bench/alternate.py", "--baseline", str(REPO), "--runs", "2", "--quick", "--rows", "bridge-unix",
        "--scenarios", "sequential", "--keep", str(tmp_path),
    )  # fmt: skip
    orders = [
        [row["name"] for row in json.loads((tmp_path / f"run{n}.json").read_text())["rows"]] for n in (1, 2)
    ]
    assert orders == [["bridge-unix", "bridge-unix@baseline"], ["bridge-unix@baseline", "bridge-unix"]]
    assert cells[2][:2] == ["bridge-unix", "seq p50 µs"] and cells[2][4].endswith("of 2")
