"""The many-servers benchmark (bench/many_servers.py) still runs: its two bridge rows, scaled down.

No timing or memory is asserted (those are judged from the full run, docs/performance.md); what
is checked is that both rows complete, which means every session opened on its server's path and
every reply was verified, and that each row counted the relay processes it says it has.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from conftest import REPO

TIMEOUT = 120  # four bridge processes and three example servers each side; ~5 s here
SERVERS = 3
ROWS = "bridge-one-port,bridge-10-ports"  # not the peers: installing them is a download a test must not need


async def test_the_many_servers_benchmark_runs_both_bridge_rows_and_verifies_every_reply(
    tmp_path: Path,
) -> None:
    out = tmp_path / "many.json"
    argv = ["bench/many_servers.py", "--quick", "--rows", ROWS, "--servers", str(SERVERS), "--clients", "6"]
    with trio.fail_after(TIMEOUT):
        result = await trio.run_process(
            [sys.executable, *argv, "--out", str(out)],
            cwd=REPO,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    report = result.stdout.decode() + result.stderr.decode()[-4000:]
    assert result.returncode == 0, report
    rows = {row["name"]: row for row in json.loads(out.read_text())["rows"]}
    assert list(rows) == ROWS.split(","), report
    assert rows["bridge-one-port"]["relay_memory"]["processes"] == 1, report
    assert rows["bridge-10-ports"]["relay_memory"]["processes"] == SERVERS, report
    for row in rows.values():
        assert row["calls"] == 6 * 20 and row["notes"] == [], row
