"""The package as users get it: ``python -m build`` makes an sdist and a wheel, and the wheel alone works.

The wheel is installed into a fresh virtual environment (with its dependencies, from the package
index as pip is set up here), away from the source tree, so that a module or data file missing from
the wheel fails here rather than on a user's machine.
"""

from __future__ import annotations

import json
import sys
import tarfile
import tomllib
import zipfile
from functools import partial
from pathlib import Path

import pytest
import trio

from bridge import __version__

from conftest import REPO, bridge_process

# A build in an isolated environment fetches setuptools; installing the wheel fetches (or finds in
# pip's cache) trio, websockets, attrs, cattrs, h11, httptools and orjson.
BUILD_TIMEOUT = 300
RUN_TIMEOUT = 30  # seconds for the installed command to start, serve two requests and stop

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "packaging-test", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
ECHO = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "echo", "arguments": {"text": "hi"}},
}


async def run(*argv: str | Path, cwd: Path, stdin: bytes = b"", timeout: float = BUILD_TIMEOUT) -> bytes:
    with trio.fail_after(timeout):
        result = await trio.run_process(
            [str(arg) for arg in argv],
            cwd=cwd,
            stdin=stdin,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert result.returncode == 0, (argv, result.stdout.decode(), result.stderr.decode())
    return bytes(result.stdout)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel, built once for this module's tests."""
    out = tmp_path_factory.mktemp("dist")
    # No --sdist --wheel: build makes the sdist, then the wheel from the unpacked sdist, so a file
    # missing from the sdist fails too, and no build/ folder is left in the source tree (where
    # setuptools would keep modules that were since moved away and put them in later wheels).
    trio.run(partial(run, sys.executable, "-m", "build", "--outdir", out, REPO, cwd=REPO))
    return out


def only(folder: Path, pattern: str) -> Path:
    (found,) = folder.glob(pattern)
    return found


def test_the_build_makes_an_sdist_and_a_wheel_with_every_module_of_both_packages(dist: Path) -> None:
    wheel = only(dist, "mcp_bridge-*.whl")
    sdist = only(dist, "mcp_bridge-*.tar.gz")
    sources = {
        path.relative_to(REPO).as_posix()
        for package in ("bridge", "channels")
        for path in (REPO / package).rglob("*")
        if path.suffix in (".py", ".typed")
    }
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    assert sources - in_wheel == set()
    with tarfile.open(sdist) as archive:
        in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert sources - in_sdist == set()
    assert {"pyproject.toml", "README.md"} <= in_sdist


def test_the_wheels_metadata_says_what_it_serves_and_names_its_entry_point(dist: Path) -> None:
    wheel = zipfile.ZipFile(only(dist, "mcp_bridge-*.whl"))
    (metadata_name,) = [name for name in wheel.namelist() if name.endswith(".dist-info/METADATA")]
    metadata = wheel.read(metadata_name).decode()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert f"Summary: {project['description']}" in metadata
    assert "Streamable HTTP" in project["description"]
    assert f"Version: {__version__}" in metadata.splitlines()  # pyproject reads bridge/_version.py
    assert "Classifier: Framework :: Trio" in metadata
    assert "Keywords:" in metadata
    (entry_points,) = [name for name in wheel.namelist() if name.endswith(".dist-info/entry_points.txt")]
    assert "mcp-bridge = bridge._cli.main:main" in wheel.read(entry_points).decode()


async def test_the_wheel_installed_alone_runs_the_command_and_serves_the_bundled_example_server(
    dist: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    await run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    await run(venv / "bin" / "pip", "install", "-q", only(dist, "mcp_bridge-*.whl"), cwd=tmp_path)
    version = await run(venv / "bin" / "mcp-bridge", "--version", cwd=tmp_path, timeout=RUN_TIMEOUT)
    assert version.decode().split() == ["mcp-bridge", __version__]

    # Served through the installed command, from a folder that has no source tree in it.
    sock = tmp_path / "mcp.sock"
    command = [str(venv / "bin" / "mcp-bridge")]
    child = ["--", str(venv / "bin" / "python"), "-m", "bridge.example_server"]
    with trio.fail_after(RUN_TIMEOUT):
        async with bridge_process(
            "--listen", f"unix:{sock}", *child, command=command, cwd=tmp_path
        ) as daemon:
            lines = b"".join(json.dumps(m).encode() + b"\n" for m in (INITIALIZE, INITIALIZED, ECHO))
            out = await run(
                *command, "connect", f"unix:{sock}", cwd=tmp_path, stdin=lines, timeout=RUN_TIMEOUT
            )
    assert daemon.process.returncode == 0, daemon.log()
    replies = [json.loads(line) for line in out.splitlines()]
    assert [reply["id"] for reply in replies] == [1, 2]
    assert replies[0]["result"]["serverInfo"]["name"]
    assert replies[1]["result"]["content"][0]["text"] == "hi"
