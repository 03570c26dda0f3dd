"""A bridge logs no traceback unnoticed: a test whose bridge logged one fails, unless marked.

tests/conftest.py watches the bridge's and the channels' loggers in the test's process, the log
of every bridge ``bridge_process`` started, and the stderr of the commands tests/commands.py runs
(``note_tracebacks``). Run as a real pytest process on a test file of its
own, with the project's conftest.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO

TIMEOUT = 120  # seconds: one pytest start-up that imports trio, bridge and channels

# Says where it listens, logs a traceback as the bridge's logging would, waits for SIGTERM.
FAKE_BRIDGE = r"""
import sys, time
sys.stderr.write("INFO bridge.daemon: listening on unix:/nowhere.sock\n")
sys.stderr.write("ERROR bridge.daemon: internal error\n")
sys.stderr.write("Traceback (most recent call last):\n  File 'x', line 1\nValueError: boom\n")
sys.stderr.flush()
time.sleep(60)
"""

INNER = """
import logging
import sys
from pathlib import Path

import pytest
import trio

from conftest import bridge_process, note_tracebacks

# Stands in for a bridge process (fake_bridge.py, beside this file).
FAKE_BRIDGE = [sys.executable, str(Path(__file__).parent / "fake_bridge.py")]


def log_a_traceback(name):
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger(name).exception("internal error")


def test_bridge_logger_traceback():
    log_a_traceback("bridge.daemon")


def test_channels_logger_traceback():
    log_a_traceback("channels.http")


@pytest.mark.logs_tracebacks("meant to")
def test_marked_traceback():
    log_a_traceback("bridge.daemon")


def test_other_logger_traceback():
    log_a_traceback("some.library")


def test_command_traceback():  # the stderr of a command run to its end (commands.run_bridge)
    note_tracebacks("ERROR bridge: failed\\nTraceback (most recent call last):\\nKeyError: 1\\n")


def test_child_traceback():  # a child's stderr, as the bridge logs it: tagged, not the bridge's
    note_tracebacks("INFO bridge.child: [server pid 7] Traceback (most recent call last):\\n")


async def test_bridge_process_traceback():
    with trio.fail_after(30):
        async with bridge_process(command=FAKE_BRIDGE) as bridge:
            while not any(line.startswith("ValueError") for line in bridge.stderr_lines):
                await trio.sleep(0.01)
"""


def test_a_traceback_in_a_bridges_log_fails_its_test_unless_the_test_is_marked(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text((REPO / "tests" / "conftest.py").read_text())
    (tmp_path / "test_inner.py").write_text(INNER)
    (tmp_path / "fake_bridge.py").write_text(FAKE_BRIDGE)
    result = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-p", "trio", "-o", "trio_mode=true", "-rA", "-q"),
            "test_inner.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    # The summary's lines; a test that passed and then failed its teardown has both, PASSED first.
    outcomes = re.findall(r"^(PASSED|ERROR|FAILED) test_inner\.py::(\w+)", result.stdout, re.MULTILINE)
    summary = {name: outcome for outcome, name in outcomes}
    assert summary == {
        "test_bridge_logger_traceback": "ERROR",
        "test_channels_logger_traceback": "ERROR",
        "test_marked_traceback": "PASSED",
        "test_other_logger_traceback": "PASSED",
        "test_bridge_process_traceback": "ERROR",
        "test_command_traceback": "ERROR",
        "test_child_traceback": "PASSED",
    }, result.stdout + result.stderr
    # Each failure quotes the log from the message before the traceback on.
    quoted = re.findall(r"^E +(.*)$", result.stdout, re.M)
    for message in ("ERROR bridge.daemon: internal error", "ERROR bridge: failed"):
        at = quoted.index(message)
        assert quoted[at - 1 : at + 2] == [
            "Failed: a bridge process logged a traceback:",
            message,
            "Traceback (most recent call last):",
        ], quoted
