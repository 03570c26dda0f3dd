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

The last test runs all three once more, against the same child mounted on a shared listener
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

``tests/conformance/install.sh`` installs the suites and a Node.js 22 (they need it; Debian has
20) into the git-ignored ``tests/conformance/.node``; ``.ci/run`` runs it before pytest, and the
fixture below runs it too (quick when all is there). Without npm the tests are skipped, except in
CI (``CI`` set), where they fail: a conformance run that silently did not happen is not a pass.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
import trio

from conftest import EXAMPLE_SERVER, REPO, bridge_process

CONFORMANCE = REPO / "tests" / "conformance"
INSTALL = CONFORMANCE / "install.sh"
NODE = CONFORMANCE / ".node" / "node" / "node_modules" / ".bin" / "node"
EVERYTHING_SERVER = REPO / "tests" / "everything_server.py"
INSTALL_TIMEOUT = 600  # a cold install fetches ~45 MB (Node 22) and ~240 packages; ~11 s here
RUN_TIMEOUT = (
    300  # a run against the SDK's own HTTP server takes 2-6 s; suite 0.2 gives a scenario 30 s at most
)
START_TIMEOUT = 30  # the bridge's "listening on" line
# Children kept started ahead of the sessions that get one of their own (--prespawn). The suite's
# server-initialize scenario opens two 2025-11-25 sessions one after the other, the second a bare
# initialize it gives 5 s (AbortSignal.timeout(5e3) in the suite 0.2's dist/index.js); each gets a
# child of its own, and the everything server takes ~0.6 s to start here idle but 3-20 s at
# loads of 10-20 (measured: tests/everything_server.py from exec to its initialize reply), which
# the 5 s then included. Two started ahead: one for each of that scenario's sessions.
PRESPAWN = "2"
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")  # the suite colours its baseline verdict whatever NO_COLOR says


@attrs.frozen
class SuiteRun:
    """One invocation of the suite: which install, at which protocol version, against which baseline."""

    suite: str  # the install prefix under tests/conformance/.node
    spec_version: str
    baseline: Path

    @property
    def entry(self) -> Path:
        return (
            CONFORMANCE
            / ".node"
            / self.suite
            / "node_modules/@modelcontextprotocol/conformance/dist/index.js"
        )

    def argv(self, url: str, results: Path) -> list[str]:
        return [
            str(NODE),
            str(self.entry),
            "server",
            "--url",
            url,
            "--suite",
            "all",
            "--spec-version",
            self.spec_version,
            "--expected-failures",
            str(self.baseline),
            "--output-dir",
            str(results),
        ]


RUNS = {
    "suite 0.1 at 2025-11-25": SuiteRun(
        "suite-0.1", "2025-11-25", CONFORMANCE / "baseline-0.1-2025-11-25.yml"
    ),
    "suite 0.2 at 2025-11-25": SuiteRun(
        "suite-0.2", "2025-11-25", CONFORMANCE / "baseline-0.2-2025-11-25.yml"
    ),
    "suite 0.2 at 2026-07-28": SuiteRun(
        "suite-0.2", "2026-07-28", CONFORMANCE / "baseline-0.2-2026-07-28.yml"
    ),
}


@pytest.fixture(scope="session")
def conformance_suite() -> None:
    """The suites and Node 22 in tests/conformance/.node, installed if missing; skipped without
    npm outside CI, failed without it in CI."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        reason = f"the MCP conformance suite is installed with npm; not found: {', '.join(missing)}"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set: .ci/run must install it, see tests/conformance/install.sh)")
        pytest.skip(reason)
    try:
        result = subprocess.run(
            ["bash", str(INSTALL)], capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{INSTALL} took over {INSTALL_TIMEOUT} s")
    if result.returncode != 0:
        pytest.fail(f"{INSTALL} failed (status {result.returncode}):\n{result.stdout}{result.stderr}")


def failed_checks(results: Path) -> str:
    """Every check of status FAILURE or WARNING (both fail a run that has a baseline) in the
    suite's ``checks.json`` files, one per line."""
    lines = []
    for checks_file in sorted(results.glob("*/checks.json")):
        scenario = checks_file.parent.name
        for check in json.loads(checks_file.read_text()):
            if check.get("status") in ("FAILURE", "WARNING"):
                message = check.get("errorMessage") or check.get("description")
                lines.append(f"  {scenario}: {check['status']} {check.get('id')}: {message}")
    return "\n".join(lines) or "  (none recorded)"


def summary(log: Path) -> str:
    """The suite's output from its summary on (the lines before only name each scenario as it
    starts), without colour codes; the last 100 lines if it printed no summary."""
    text = ANSI_ESCAPE.sub("", log.read_text(errors="replace"))
    start = text.find("=== SUMMARY ===")
    return text[start:] if start >= 0 else "\n".join(text.splitlines()[-100:])


async def run_suite(argv: list[str], log: Path) -> int | None:
    """Run the suite with its output in ``log``; its exit status, or None if it ran over RUN_TIMEOUT."""
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost"}  # loopback only, whatever proxy is set
    with log.open("wb") as out:
        process = await trio.lowlevel.open_process(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        try:
            with trio.move_on_after(RUN_TIMEOUT):
                return await process.wait()
            return None
        finally:
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()


@pytest.mark.parametrize("run", RUNS.values(), ids=RUNS.keys())
async def test_the_conformance_suite_finds_no_failure_outside_its_baseline_at_the_bridges_http_listener(
    run: SuiteRun, conformance_suite: None, tmp_path: Path
) -> None:
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
    if status != 0:
        outcome = f"ran over {RUN_TIMEOUT} s" if status is None else f"exited {status}"
        pytest.fail(
            f"the conformance suite {outcome}: {' '.join(argv)}\n"
            f"(full output in {log}, checks in {results})\n\n"
            f"--- its summary ---\n{summary(log)}\n"
            f"--- failed checks (a WARNING fails a run that has a baseline) ---\n{failed_checks(results)}\n\n"
            "--- the bridge's log (last 60 lines) ---\n" + "\n".join(bridge.stderr_lines[-60:]),
            pytrace=False,
        )


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
    suite_run: SuiteRun, conformance_suite: None, tmp_path: Path
) -> None:
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
    if status != 0:
        outcome = f"ran over {RUN_TIMEOUT} s" if status is None else f"exited {status}"
        pytest.fail(
            f"the conformance suite {outcome} at a shared listener's mount: {' '.join(argv)}\n"
            f"(full output in {log}, checks in {results})\n\n"
            f"--- its summary ---\n{summary(log)}\n"
            f"--- failed checks (a WARNING fails a run that has a baseline) ---\n{failed_checks(results)}\n\n"
            "--- the bridge's log (last 60 lines) ---\n" + "\n".join(bridge.stderr_lines[-60:]),
            pytrace=False,
        )
