"""The code passes its own static checks: mypy in strict mode, ruff's lint rules and its formatter
(configured in pyproject.toml). Run as tests so that CI fails on them like on anything else."""

from __future__ import annotations

import subprocess
import sys

import trio

from conftest import REPO

TIMEOUT = 300  # a cold mypy run over both packages takes about 30 s here
CHECKED = ["channels", "bridge", "tests", "bench", "examples"]


async def run(*argv: str) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(TIMEOUT):
        return await trio.run_process(
            [sys.executable, "-m", *argv], cwd=REPO, check=False, capture_stdout=True, capture_stderr=True
        )


async def test_channels_and_bridge_pass_mypy_in_strict_mode() -> None:
    result = await run("mypy")  # files and strictness from [tool.mypy]
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


async def test_the_code_passes_ruffs_lint_rules() -> None:
    result = await run("ruff", "check", *CHECKED)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


async def test_the_code_is_formatted_as_ruff_formats_it() -> None:
    result = await run("ruff", "format", "--check", *CHECKED)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
