"""A bench script run to its end, and the Markdown table it printed, for tests/bench."""

from __future__ import annotations

import sys

import trio

from conftest import REPO

TIMEOUT = 60  # seconds: a small run of one script, on a loaded CI machine


async def bench_table(*args: str) -> list[list[str]]:
    """Run ``python ARGS`` from the repository's root; the cells of each line it printed.

    The script must exit 0 (its stderr's end is the failure's message).
    """
    with trio.fail_after(TIMEOUT):
        result = await trio.run_process(
            [sys.executable, *args], cwd=REPO, capture_stdout=True, capture_stderr=True, check=False
        )
    assert result.returncode == 0, result.stderr.decode()[-4000:]
    return [
        [cell.strip() for cell in line.strip("|").split("|")] for line in result.stdout.decode().splitlines()
    ]
