"""bench/medians.py reduces several runs of bench/run.py to one table of medians and ranges.

The tool behind the summary tables of docs/performance.md. Its input is what ``run.py --out``
writes; the runs here are written in that shape by the test (a real run is the smoke test's).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench_tables import bench_table

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
from medians import COLUMNS


def run(rows: dict[str, dict]) -> dict:
    """A run as ``bench/run.py --out`` writes it, reduced to what the table reads."""
    return {"rows": [{"name": name, "results": results} for name, results in rows.items()]}


def results(p50: float, calls: float, cpu: float, echo: float | str, rss_kb: int | None) -> dict:
    echo_result = {"error": echo} if isinstance(echo, str) else {"median_ms": echo}
    memory = None if rss_kb is None else {"rss_kb": rss_kb}
    return {
        "sequential": {"p50_us": p50},
        "pipelined": {"calls_per_s": calls, "cpu_us_per_call": {"relay": cpu}},
        "echo_16MiB": echo_result,
        "concurrent": {"relay_memory": memory},
    }


def written(tmp_path: Path, runs: list[dict]) -> list[str]:
    """Each run in a file of its own, as ``--out`` leaves them; their paths."""
    paths = [tmp_path / f"run{number}.json" for number in range(len(runs))]
    for path, document in zip(paths, runs, strict=True):
        path.write_text(json.dumps(document))
    return [str(path) for path in paths]


async def test_each_cell_is_the_median_of_the_runs_with_their_lowest_and_highest(tmp_path: Path) -> None:
    runs = [
        run(
            {
                "bridge-unix": results(190, 60_000, 9.0, 210, 25_088),
                "direct": results(100, 90_000, 0, 180, None),
            }
        ),
        run(
            {
                "bridge-unix": results(200, 50_000, 12.0, 200, 25_600),
                "direct": results(110, 80_000, 0, 190, None),
            }
        ),
        run(
            {
                "bridge-unix": results(180, 55_000, 10.0, 230, 24_576),
                "direct": results(90, 70_000, 0, 170, None),
            }
        ),
    ]
    cells = await bench_table("bench/medians.py", *written(tmp_path, runs))
    assert cells[0] == ["row", *(name for name, *_ in COLUMNS)]
    assert cells[2] == [
        "bridge-unix", "190.0 (180.0–200.0)", "55,000 (50,000–60,000)", "10.0 (9.0–12.0)",
        "210.0 (200.0–230.0)", "24.50 (24.00–25.00)",
    ]  # fmt: skip
    assert cells[3][0] == "direct" and cells[3][-1] == "–"  # no relay: no RSS of its own


async def test_a_cell_that_failed_in_some_runs_takes_the_others_and_one_that_failed_in_all_shows_why(
    tmp_path: Path,
) -> None:
    runs = [
        run({"peer": results(700, 2_000, 400, "HTTP 413 Payload Too Large", 190_000)}),
        run(
            {
                "peer": results(710, 2_100, 410, "HTTP 413 Payload Too Large", 191_000),
                "late": results(1, 1, 1, 1, 1),
            }
        ),
    ]
    runs[0]["rows"][0]["results"]["sequential"] = {"error": "timed out"}
    cells = await bench_table("bench/medians.py", *written(tmp_path, runs))
    assert [row[0] for row in cells[2:]] == ["peer"]  # the rows of the first run
    assert cells[2][1] == "710.0"  # the one run where it did not fail
    assert cells[2][4].startswith("error: HTTP 413")
