"""The official MCP conformance suite (``@modelcontextprotocol/conformance``, npm) against the
bridge's Streamable HTTP listener, with the suite's "everything" server as the stdio child.

The suite tests servers over HTTP only. Here it drives ``python -m bridge --listen
http://127.0.0.1:0/mcp --prespawn 2 -- python tests/everything_server.py``, so each scenario
crosses the bridge's HTTP front end, its relaying, and a real SDK server on stdio (the warm pool
keeps a child's start-up out of the suite's 5 s for an initialize: PRESPAWN below). Three
runs, each with its own expected-failures file (``tests/conformance/baseline-*.yml``):

* suite 0.1.16 (the npm "latest") at protocol 2025-11-25: every scenario it has (``--suite all``);
* suite 0.2.0-alpha at 2025-11-25: the same era with that suite's newer checks, and
  ``server-session-lifecycle``, which only it has;
* suite 0.2.0-alpha at 2026-07-28: the stateless era (``server-stateless``, ``caching``,
  ``http-header-validation``, ``input-required-result-*``...).

tests/e2e/test_conformance_shared.py runs all three once more, against the same child mounted on a shared listener
(``--config`` with ``[listeners.public]``) at ``/servers/conformance/mcp`` beside two other servers,
with an empty baseline: a server on a shared port conforms as one on a port of its own, sessions,
event streams and the 2026-07-28 header checks included.

``--suite all`` includes the suites' "pending" scenarios (``server-sse-polling``,
``http-header-validation``, ``http-custom-header-server-validation``...): they are the ones that
test the HTTP transport itself. ``--spec-version`` leaves out extension scenarios (tasks, skills),
which the child does not implement. The suite exits 0 when every failure is listed in the
baseline and every listed one still fails; with a baseline, a WARNING (a SHOULD not met) counts
as a failure too. A failure here shows the suite's summary, every failed check with its
message, and the bridge's log.

How the suite is installed and run: tests/conformance_runs.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio
from conformance_runs import (
    EVERYTHING_SERVER,
    PRESPAWN,
    RUN_TIMEOUT,
    RUNS,
    START_TIMEOUT,
    SuiteRun,
    fail_unless_passed,
    require_conformance_suite,
    run_suite,
)

from conftest import bridge_process


@pytest.mark.parametrize("run", RUNS.values(), ids=RUNS.keys())
async def test_the_conformance_suite_finds_no_failure_outside_its_baseline_at_the_bridges_http_listener(
    run: SuiteRun, tmp_path: Path
) -> None:
    require_conformance_suite()
    results = tmp_path / "results"
    log = tmp_path / "conformance.log"
    with trio.fail_after(START_TIMEOUT + RUN_TIMEOUT + 30):
        async with bridge_process(
            "--listen",
            "http://127.0.0.1:0/mcp",
            "--prespawn",
            PRESPAWN,
            "--",
            sys.executable,
            str(EVERYTHING_SERVER),
        ) as bridge:
            argv = run.argv(bridge.addresses[0], results)
            status = await run_suite(argv, log)
    fail_unless_passed(status, argv, log, results, bridge.stderr_lines)
