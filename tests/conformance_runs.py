"""The official MCP conformance suite (``@modelcontextprotocol/conformance``, npm), as the tests in
tests/e2e/test_conformance*.py run it: its installs, its runs and what to show of a failed one.

Two test files, so that pytest-xdist (``--dist loadfile``) runs the bridge's own listener and the
shared listener on different workers: six suite runs of 10 to 60 s each.

``tests/conformance/install.sh`` installs the suites and a Node.js 22 (they need it; Debian has
20) into the git-ignored ``tests/conformance/.node``; ``.ci/run`` runs it before pytest, and
:func:`require_conformance_suite` runs it too (quick when all is there). Without npm the tests are
skipped, except in CI (``CI`` set), where they fail: a conformance run that silently did not happen
is not a pass.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import attrs
import pytest
import trio

from conftest import REPO

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


@functools.cache
def _install() -> subprocess.CompletedProcess[str] | None:
    """install.sh, run once per process (quick when all is there); None if it ran too long."""
    try:
        return subprocess.run(
            ["bash", str(INSTALL)], capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        return None


def require_conformance_suite() -> None:
    """The suites and Node 22 in tests/conformance/.node, installed if missing; skip without npm
    outside CI, fail without it in CI."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        reason = f"the MCP conformance suite is installed with npm; not found: {', '.join(missing)}"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set: .ci/run must install it, see tests/conformance/install.sh)")
        pytest.skip(reason)
    result = _install()
    if result is None:
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


def fail_unless_passed(
    status: int | None, argv: list[str], log: Path, results: Path, bridge_log: list[str], where: str = ""
) -> None:
    """Fail the test unless the suite exited 0, with what says why: the suite's summary, every
    failed check and the end of the bridge's log. ``where`` names the endpoint if not the listener."""
    if status == 0:
        return
    outcome = f"ran over {RUN_TIMEOUT} s" if status is None else f"exited {status}"
    pytest.fail(
        f"the conformance suite {outcome}{where}: {' '.join(argv)}\n"
        f"(full output in {log}, checks in {results})\n\n"
        f"--- its summary ---\n{summary(log)}\n"
        f"--- failed checks (a WARNING fails a run that has a baseline) ---\n{failed_checks(results)}\n\n"
        "--- the bridge's log (last 60 lines) ---\n" + "\n".join(bridge_log[-60:]),
        pytrace=False,
    )
