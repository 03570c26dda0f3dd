"""The benchmark still runs: a quick pass over the baseline, trio and bridge rows (ws:// and tls: too).

No timing is asserted (performance is judged from the full benchmark, never in tests); what is
checked is that every row completes, which means every reply was verified (id and content) and the
bridge stopped cleanly on SIGTERM, that every row returns string request ids exactly as sent, and
that the start-up of ``mcp-bridge --version`` was timed.
"""

from __future__ import annotations

import json
import sys

import trio

from conftest import REPO

# Not the supergateway rows: they install supergateway from npm, a download a test must not need.
ROWS = "direct,socat-unix,trio-unix,bridge-unix,bridge-tcp,bridge-prespawn,bridge-auto,bridge-shared,bridge-ws,bridge-tls"


async def test_the_benchmark_runs_every_row_and_verifies_every_reply(tmp_path):
    out = tmp_path / "bench.json"
    with trio.fail_after(300):
        result = await trio.run_process(
            [sys.executable, "bench/run.py", "--quick", "--rows", ROWS, "--out", str(out)],
            cwd=REPO,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    report = result.stdout.decode() + result.stderr.decode()[-4000:]
    assert result.returncode == 0, report
    document = json.loads(out.read_text())
    assert [row["name"] for row in document["rows"]] == ROWS.split(","), report
    # Timed, both; which is the larger is a timing, which tests never judge (a loaded machine once
    # took longer for `python -c pass` than for `mcp-bridge --version`).
    assert document["startup"]["version_ms"] > 0 and document["startup"]["python_ms"] > 0, document["startup"]
    for row in document["rows"]:
        assert row["results"], row
        assert not any("error" in result for result in row["results"].values()), report
        assert row["results"]["string_ids"]["intact"], row["results"]["string_ids"]
