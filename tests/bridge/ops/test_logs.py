"""The process's log output (bridge/_ops/logs.py)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import logging
from bridge._ops.logs import configure_logging
configure_logging({level!r})
logging.getLogger("httpx2").info("GET /jwks 200")
logging.getLogger("httpx2").warning("connection pool full")
logging.getLogger("bridge").info("listening")
"""


def _stderr(level: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(level=level)], capture_output=True, timeout=30, check=True
    )
    return done.stderr.decode()


def test_the_http_clients_own_info_lines_are_left_out_but_its_warnings_and_the_bridges_lines_are_kept() -> (
    None
):
    output = _stderr("info")
    assert "GET /jwks 200" not in output
    assert "connection pool full" in output
    assert "listening" in output


def test_at_debug_level_the_http_clients_info_lines_show_too() -> None:
    assert "GET /jwks 200" in _stderr("debug")
