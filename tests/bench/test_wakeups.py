"""bench/wakeups.py times round trips between two processes answered three ways, and says so.

No timing is judged (performance is the benchmark's business, never a test's): what is checked is
that every way completes its round trips (the script exits 0) and the table names each with its
runs. It runs as a process of its own, under a deadline: it forks.
"""

from __future__ import annotations

import sys

from bench_tables import bench_table

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
from wakeups import KINDS


async def test_the_table_has_a_line_per_way_with_each_runs_figure() -> None:
    cells = await bench_table("bench/wakeups.py", "--round-trips", "50", "--runs", "2")
    assert [row[0] for row in cells[2:]] == list(KINDS)
    for _, median, runs in cells[2:]:
        assert float(median) > 0 and len(runs.split(", ")) == 2
