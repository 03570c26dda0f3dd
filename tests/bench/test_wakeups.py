"""bench/wakeups.py times round trips between two processes answered three ways, and says so.

No timing is judged (performance is the benchmark's business, never a test's): what is checked is
that every way completes its round trips (the script exits 0) and the table names each with its
runs. It runs as a process of its own, under a deadline: it forks.
"""

from __future__ import annotations

import sys

import trio

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
from wakeups import KINDS


async def test_the_table_has_a_line_per_way_with_each_runs_figure() -> None:
    with trio.fail_after(60):
        result = await trio.run_process(
            [sys.executable, "bench/wakeups.py", "--round-trips", "50", "--runs", "2"],
            cwd=REPO,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert result.returncode == 0, result.stderr.decode()[-4000:]
    cells = [
        [cell.strip() for cell in line.strip("|").split("|")] for line in result.stdout.decode().splitlines()
    ]
    assert [row[0] for row in cells[2:]] == list(KINDS)
    for _, median, runs in cells[2:]:
        assert float(median) > 0 and len(runs.split(", ")) == 2
