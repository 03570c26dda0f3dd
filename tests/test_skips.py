"""A skipped test says why: the reason reaches the summary even from inside a trio test.

pytest-trio loses the reason of a skip that leaves a nursery; tests/conftest.py puts it back.
Run as a real pytest process on a test file of its own, with the project's conftest.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO

TIMEOUT = 120  # seconds: one pytest start-up that imports trio, bridge and channels

INNER = """
import pytest
import trio


async def test_skips_from_inside_a_nursery():
    async with trio.open_nursery():
        pytest.skip("nginx is not installed (apt-get install nginx)")


@pytest.fixture
async def proxy():
    pytest.skip("caddy is not installed (apt-get install caddy)")


async def test_skips_from_an_async_fixture(proxy):
    pass
"""


def test_a_skip_inside_a_trio_test_or_fixture_keeps_its_reason_and_place_in_the_summary(
    tmp_path: Path,
) -> None:
    (tmp_path / "conftest.py").write_text((REPO / "tests" / "conftest.py").read_text())
    (tmp_path / "test_inner.py").write_text(INNER)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "trio",
            "-o",
            "trio_mode=true",
            "-ra",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "test_inner.py:8: nginx is not installed (apt-get install nginx)" in result.stdout, result.stdout
    assert "test_inner.py:13: caddy is not installed (apt-get install caddy)" in result.stdout, result.stdout
    assert ": Skipped\n" not in result.stdout, result.stdout
