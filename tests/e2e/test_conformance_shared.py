"""The official MCP conformance suite against a server mounted on a shared listener.

All three runs of tests/e2e/test_conformance.py once more, against the same child mounted on a
shared listener (``--config`` with ``[listeners.public]``) at ``/servers/conformance/mcp`` beside
two other servers, with an empty baseline: a server on a shared port conforms as one on a port of
its own, sessions, event streams and the 2026-07-28 header checks included. How the suite is
installed and run: tests/conformance_runs.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import attrs
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

from conftest import EXAMPLE_SERVER, bridge_process

SHARED_RUNS = RUNS  # every suite and era, on the shared listener too
EMPTY_BASELINE = "server: []\n"  # no expected failure at all


def shared_listener_config(path: Path) -> None:
    """The conformance child as server ``conformance`` on a shared listener (with PRESPAWN), with
    two example servers (one shared child, a child per session) mounted beside it."""
    servers = {
        "conformance": ([sys.executable, str(EVERYTHING_SERVER)], "auto", f"prespawn = {PRESPAWN}\n"),
        "first": ([sys.executable, str(EXAMPLE_SERVER)], "shared", ""),
        "second": ([sys.executable, str(EXAMPLE_SERVER)], "per-connection", ""),
    }
    text = '[listeners.public]\nkind = "http"\naddress = "127.0.0.1:0"\n'
    for name, (command, child, more) in servers.items():
        text += (
            f"[servers.{name}]\ncommand = {json.dumps(command)}\nchild = {json.dumps(child)}\n{more}"
            f'[[servers.{name}.listeners]]\nshared = "public"\n'
        )
    path.write_text(text)


@pytest.mark.parametrize("suite_run", SHARED_RUNS.values(), ids=SHARED_RUNS.keys())
async def test_the_conformance_suite_finds_no_failure_at_a_server_mounted_on_a_shared_listener_beside_two_others(
    suite_run: SuiteRun, tmp_path: Path
) -> None:
    require_conformance_suite()
    config = tmp_path / "servers.toml"
    shared_listener_config(config)
    baseline = tmp_path / "empty-baseline.yml"
    baseline.write_text(EMPTY_BASELINE)
    run = attrs.evolve(suite_run, baseline=baseline)
    results = tmp_path / "results"
    log = tmp_path / "conformance.log"
    with trio.fail_after(START_TIMEOUT + RUN_TIMEOUT + 30):
        async with bridge_process("--config", str(config), listeners=3) as bridge:
            (url,) = [address for address in bridge.addresses if address.endswith("/servers/conformance/mcp")]
            argv = run.argv(url, results)
            status = await run_suite(argv, log)
    fail_unless_passed(status, argv, log, results, bridge.stderr_lines, " at a shared listener's mount")
