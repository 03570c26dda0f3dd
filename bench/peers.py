"""The Streamable HTTP and WebSocket peers the bridge is compared with, installed for the benchmark only.

supergateway and punkpeye's mcp-proxy come from npm into the git-ignored ``bench/.node``;
sparfenyuk's mcp-proxy from PyPI into the git-ignored venv ``bench/.pyvenv``. Each is a
:class:`PeerTarget`: a :class:`~relays.RelayTarget` on a fixed port, ready when a TCP connect
succeeds (targets.py lists the rows).
"""

from __future__ import annotations

import glob
import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from relays import (
    HTTP_PATH,
    LOOPBACK,
    READY_POLL_S,
    READY_TIMEOUT_S,
    REPO,
    SERVER_COMMAND,
    RelayTarget,
    StderrLog,
    accepts,
)
from wire import BenchError

NODE_PREFIX = REPO / "bench" / ".node"  # git-ignored; npm installs the node peers here, for the bench only
# Pinned so that runs compare: the releases measured in docs/performance.md. Package name →
# (version, entry point inside the package).
NPM_PEERS = {
    "supergateway": ("4.0.0", "dist/index.js"),
    "mcp-proxy": ("6.7.19", "dist/bin/mcp-proxy.mjs"),  # punkpeye/mcp-proxy
}
SUPERGATEWAY_WS_PATH = "/message"  # its --messagePath default, where stdio→WS serves the WebSocket
NPM_TIMEOUT_S = 300.0  # a first install fetches ~150 packages; it took ~5 s here
PY_PREFIX = REPO / "bench" / ".pyvenv"  # git-ignored venv for the PyPI peers, never the project's venv
PYPI_PEERS = {"mcp-proxy": "0.13.0"}  # sparfenyuk/mcp-proxy
PIP_TIMEOUT_S = 300.0  # a first install fetches ~40 packages; it took ~10 s here


def npm_entry(package: str) -> Path:
    return NODE_PREFIX / "node_modules" / package / NPM_PEERS[package][1]


def installed_npm_version(package: str) -> str | None:
    try:
        return json.loads((NODE_PREFIX / "node_modules" / package / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def ensure_npm_package(package: str) -> Path:
    """Install ``package`` (pinned in NPM_PEERS) into bench/.node unless that version is there;
    return its entry point."""
    version = NPM_PEERS[package][0]
    entry = npm_entry(package)
    if not entry.exists() or installed_npm_version(package) != version:
        npm = shutil.which("npm")
        if npm is None:
            raise BenchError(f"npm not found: {package} cannot be installed (it needs Node.js and npm)")
        print(f"  installing {package}@{version} into {NODE_PREFIX}", file=sys.stderr, flush=True)
        try:
            result = subprocess.run(
                [npm, "install", "--prefix", str(NODE_PREFIX), "--no-audit", "--no-fund",
                 f"{package}@{version}"],
                check=False, capture_output=True, text=True, timeout=NPM_TIMEOUT_S,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise BenchError(f"npm install {package} took over {NPM_TIMEOUT_S:g} s") from None
        if result.returncode != 0 or not entry.exists():
            last = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise BenchError(f"npm install {package} failed (status {result.returncode}): {last}")
    if shutil.which("node") is None:
        raise BenchError(f"node not found: {package} needs Node.js")
    return entry


def installed_pypi_version(package: str) -> str | None:
    name = package.replace("-", "_")
    found = glob.glob(str(PY_PREFIX / "lib" / "python*" / "site-packages" / f"{name}-*.dist-info"))
    return Path(found[0]).name.removesuffix(".dist-info").split("-", 1)[1] if len(found) == 1 else None


def ensure_pypi_tool(package: str) -> Path:
    """Install ``package`` (pinned in PYPI_PEERS) into the venv bench/.pyvenv (made with this
    interpreter when missing) unless that version is there; return the venv's bin directory."""
    version = PYPI_PEERS[package]
    bin_dir = PY_PREFIX / "bin"
    if installed_pypi_version(package) == version and (bin_dir / package).exists():
        return bin_dir
    print(f"  installing {package}=={version} into {PY_PREFIX}", file=sys.stderr, flush=True)
    steps = [[sys.executable, "-m", "venv", str(PY_PREFIX)]] if not (bin_dir / "python").exists() else []
    steps.append([str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                  f"{package}=={version}"])  # fmt: skip
    for step in steps:
        try:
            result = subprocess.run(step, check=False, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise BenchError(f"{shlex.join(step[1:4])} took over {PIP_TIMEOUT_S:g} s") from None
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise BenchError(f"installing {package} failed (status {result.returncode}): {last}")
    if installed_pypi_version(package) != version:
        raise BenchError(f"installing {package}=={version} left version {installed_pypi_version(package)}")
    return bin_dir


class PeerTarget(RelayTarget):
    """A relay installed for the benchmark only: it takes a fixed port on its command line and is
    ready when a TCP connect to that port succeeds (none of them says so on stderr: supergateway
    and punkpeye's mcp-proxy log on stdout, and only before they listen; the quiet log levels say
    nothing). stdin is a pipe that stays open until stop() (supergateway exits when it closes);
    stdout goes to /dev/null (written by the peer, so paid for by it, but never read, which would
    cost the client); stderr is drained and kept as for the other relays. The relay, for CPU and
    memory, is the peer's own process (all its threads), never the example server(s) it starts.
    """

    def __init__(self, name: str, transport: str, kind: str, path: str) -> None:
        super().__init__(name, transport, kind)
        if transport == "ws":
            self.ws_path = path
        else:
            self.http_path = path

    def install(self) -> None:
        """Make sure the peer is installed (called by start(), so a failure fails only its row)."""
        raise NotImplementedError

    def start(self) -> None:
        self.install()
        self.proc = subprocess.Popen(
            self.command, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        self._log = StderrLog(self.proc.stderr, re.compile(r"(?!)"))  # drains; readiness is below
        self.address = (LOOPBACK, self.port)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not accepts(self.address):
            if self.proc.poll() is not None:
                raise BenchError(f"{self.kind} exited (status {self.proc.returncode}) before listening: "
                                 f"{self._last_line()}")  # fmt: skip
            if time.monotonic() > deadline:
                raise BenchError(
                    f"{self.kind} did not listen on port {self.port} within {READY_TIMEOUT_S:g} s"
                )
            time.sleep(READY_POLL_S)

    def relay_pids(self) -> list[int]:
        return [self.proc.pid]  # node or python, all its threads; not the example server(s) it spawns

    def stop(self) -> list[str]:
        if self.proc is not None and self.proc.stdin:
            self.proc.stdin.close()
        return super().stop()


class SupergatewayTarget(PeerTarget):
    """supergateway: stdio→WebSocket (ONE example server for every client; it logs every message,
    each way, on stdout at its default log level) or stateful stdio→Streamable HTTP (one example
    server per session)."""

    def __init__(self, name: str, transport: str, quiet: bool = False) -> None:
        self.quiet = quiet  # --logLevel none: no per-message logging (and no log at all)
        path = SUPERGATEWAY_WS_PATH if transport == "ws" else HTTP_PATH
        super().__init__(name, transport, "supergateway", path)

    def _command(self) -> list[str]:
        if self.transport == "ws":
            output = ["--outputTransport", "ws"]
        else:
            output = ["--outputTransport", "streamableHttp", "--stateful", "--streamableHttpPath", HTTP_PATH]
        return [shutil.which("node") or "node", str(npm_entry("supergateway")),
                "--stdio", shlex.join(SERVER_COMMAND), *output, "--port", str(self.port),
                *(("--logLevel", "none") if self.quiet else ())]  # fmt: skip

    def install(self) -> None:
        ensure_npm_package("supergateway")


class McpProxyNpmTarget(PeerTarget):
    """punkpeye's mcp-proxy (npm): one MCP client on ONE example server, started before it listens;
    each HTTP session gets a proxy server that forwards to that client. Bound to loopback (its
    default host is ``::``); otherwise its defaults (it logs nothing per message)."""

    def __init__(self, name: str) -> None:
        super().__init__(name, "http", "mcp-proxy", HTTP_PATH)

    def _command(self) -> list[str]:
        return [shutil.which("node") or "node", str(npm_entry("mcp-proxy")),
                "--host", LOOPBACK, "--port", str(self.port), "--", *SERVER_COMMAND]  # fmt: skip

    def install(self) -> None:
        ensure_npm_package("mcp-proxy")


class McpProxyPyTarget(PeerTarget):
    """sparfenyuk's mcp-proxy (PyPI): one MCP client session on ONE example server, started before
    it listens, behind the Python SDK's Streamable HTTP session manager (JSON responses) on
    uvicorn. ``--log-level WARNING``: at its default (INFO) uvicorn logs every request."""

    def __init__(self, name: str) -> None:
        super().__init__(name, "http", "mcp-proxy", HTTP_PATH)

    def _command(self) -> list[str]:
        return [str(PY_PREFIX / "bin" / "mcp-proxy"), "--host", LOOPBACK, "--port", str(self.port),
                "--log-level", "WARNING", "--", *SERVER_COMMAND]  # fmt: skip

    def install(self) -> None:
        ensure_pypi_tool("mcp-proxy")
