"""The soak and fault suite (bench/soak.py) holds every guarantee for about a minute.

All six configurations at once, a handful of clients each, a child killed every 15 s in each, and
every fault of the suite running beside them; docs/soak.md lists what runs and what is checked.
The soak's own verdict is its exit status and the ``checks`` of its JSON summary; this test also
makes sure the run did what it claims (calls, kills and bad inputs in every configuration), so
that it cannot pass by doing nothing.
"""

from __future__ import annotations

import json
import sys

import trio

from conftest import REPO

DURATION_S = 40  # load; the run then drains, settles and stops: about 60 s in all
CLIENTS = 3  # per configuration
KILL_EVERY_S = 15  # two or three kills per configuration
BOUND_S = 115  # the whole run, with its drain and SIGTERM budgets, on a loaded 2-core machine


async def test_every_guarantee_holds_through_a_soak_of_every_configuration_under_faults(tmp_path):
    out = tmp_path / "soak.json"
    command = [sys.executable, "bench/soak.py", "--duration", str(DURATION_S), "--clients", str(CLIENTS)]
    command += ["--kill-every", str(KILL_EVERY_S), "--json", str(out)]
    with trio.fail_after(BOUND_S):
        result = await trio.run_process(
            command, cwd=REPO, capture_stdout=True, capture_stderr=True, check=False
        )
    report = result.stdout.decode() + result.stderr.decode()[-3000:]
    summary = json.loads(out.read_text())
    assert set(summary["configs"]) == {
        "unix-per-connection",
        "unix-shared",
        "tcp",
        "ws",
        "http-legacy",
        "http-2026",
    }, report
    for name, config in summary["configs"].items():
        assert config["calls"] > 0 and config["results"] > 0, (name, report)
        assert config["faults"].get("child killed", 0) >= 1, (name, report)
        assert sum(config["bad_inputs"].values()) > 0, (name, report)
        assert config["faults"].get("vanished mid-request", 0) > 0, (name, report)
    assert (
        summary["configs"]["http-legacy"]["faults"].get("stream dropped and resumed with Last-Event-ID", 0)
        > 0
    )
    failed = [f"{c['config']}: {c['check']}: {c['detail']}" for c in summary["checks"] if not c["ok"]]
    assert not failed, report
    assert result.returncode == 0, report
