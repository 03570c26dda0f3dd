"""The things the benchmark talks to (``TARGET_NAMES``), behind one small interface.

Every target offers ``start()``, ``connect() -> Conn`` (a fresh session, not yet initialized),
``relay_pids()`` (the processes whose own CPU and memory are charged to the relay), ``server_pids()``
(the example-server processes), and ``stop() -> notes``.

* ``direct``: each session is a fresh example server on pipes; there is no relay.
* ``socat-*``: ``socat UNIX-LISTEN|TCP-LISTEN:...,fork,backlog=128 EXEC:...``. The relay is the
  listening socat plus its forked per-connection socat processes (found as the listener's children
  whose comm is ``socat``); the example servers those fork off are not counted. ``-d -d`` is added
  only so that socat logs ``listening on`` when it is ready.
* ``trio-unix``: ``bench/trio_relay.py``, a bare trio byte relay (no framing, no JSON): the floor
  of any trio relay here, for reading the bridge's figures. The relay is that process alone.
* ``bridge-prespawn``: ``bridge-unix`` with ``--prespawn 8``: eight children kept started ahead of
  connections (the warm pool), for the session-setup figure.
* ``bridge-shared``: ``bridge-unix`` with ``--child shared``: ONE example server for every session
  (the bridge rewrites ids and answers every ``initialize`` after the first from the first one's
  result); the example server answers one request at a time, so all sessions queue at that child.
* ``bridge-*``: ``python -m bridge --listen ... -- python bridge/example_server``. The relay is the
  bridge process alone (all its threads), never its example-server children. Ready when its stderr
  shows ``listening on unix:PATH`` / ``tcp:127.0.0.1:PORT`` / ``ws://127.0.0.1:PORT/`` /
  ``tls:127.0.0.1:PORT``; stopped with SIGTERM. ``bridge-tls`` gets a throwaway CA and certificate
  (ws_tls.TestCertificates) in the row's temporary directory, deleted when the row stops.
* ``bridge-http``: ``python -m bridge --listen http://127.0.0.1:0/mcp ...``: Streamable HTTP (see
  streamable_http.py for the client side), ready when its stderr shows
  ``listening on http://127.0.0.1:PORT/mcp``.
* ``bridge-http-2026``: ``bridge-http`` with ``--child shared``, its sessions in the 2026-07-28 era
  (no initialize, no session; per-request ``_meta`` and ``Mcp-*`` headers: http_modern.py).
* ``supergateway-ws``: supergateway's stdio→WebSocket gateway (ONE example server for all clients),
  installed by :func:`ensure_npm_package` with npm into the git-ignored ``bench/.node``; the relay
  is its node process. ``supergateway-ws-quiet`` adds ``--logLevel none``.
* Streamable HTTP peers (:class:`PeerTarget`), installed for the benchmark only, each taking a fixed
  port and ready when a TCP connect succeeds; the relay is the peer's own process (node or python),
  never the example server(s) it starts:

  - ``supergateway-http``: supergateway's stateful stdio→Streamable HTTP gateway, one example server
    per session, ``--logLevel none``;
  - ``mcp-proxy-npm``: punkpeye's ``mcp-proxy`` (npm), ONE example server behind an MCP client that
    every session's proxy server forwards to;
  - ``mcp-proxy-py``: sparfenyuk's ``mcp-proxy`` (PyPI, installed by :func:`ensure_pypi_tool` into
    the git-ignored venv ``bench/.pyvenv``), ONE example server likewise, ``--log-level WARNING``.
"""

from __future__ import annotations

import collections
import glob
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import procfs
from streamable_http import HttpSession, http_connect
from wire import IDLE_TIMEOUT_S, BenchError, Conn
from ws_tls import TestCertificates, tls_connect, ws_connect

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable  # the venv's python, for the example server in every row and for the bridge
EXAMPLE_SERVER = REPO / "bridge" / "example_server"  # the package's directory, run as a script
SERVER_COMMAND = [PYTHON, str(EXAMPLE_SERVER)]
SOCAT = shutil.which("socat") or "/usr/bin/socat"
LOOPBACK = "127.0.0.1"
# Children the bridge-prespawn row keeps ready: the session-setup scenario opens sessions back to
# back, and a Python child takes about 30 ms to start, so eight keep up with one session per 4 ms.
PRESPAWN = 8
LISTEN_BACKLOG = 128  # socat's default of 5 refuses the concurrent scenario's simultaneous connects
HTTP_PATH = "/mcp"  # the Streamable HTTP endpoint of every HTTP row (each peer's default)
BRIDGE_MAX_MESSAGE = "32MiB"  # room for the 16 MiB echo, both towards clients and towards the child
READY_TIMEOUT_S = 20.0  # how long a relay may take to log that it listens
READY_POLL_S = 0.05  # between connect probes, for a relay that does not log readiness on stderr
STOP_TIMEOUT_S = 5.0  # how long a relay may take to exit after SIGTERM before it is killed
LEFTOVER_GRACE_S = 2.0  # how long the relay's children may take to go after the relay exited
STDERR_TAIL_LINES = 40  # relay stderr lines kept for error reports
# stderr lines worth showing next to an error: socat's E/W levels, a bridge's errors and tracebacks
NOTABLE_STDERR = re.compile(r" socat\[\d+\] [EWF] |error|warn|exception|traceback", re.IGNORECASE)


class DirectTarget:
    """No relay: every session spawns its own example server and talks over its stdin/stdout."""

    def __init__(self) -> None:
        self.name = "direct"
        self.command = SERVER_COMMAND
        self._servers: dict[int, subprocess.Popen] = {}

    def start(self) -> None:
        pass

    def connect(self) -> Conn:
        server = subprocess.Popen(
            SERVER_COMMAND, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0, cwd=REPO
        )
        self._servers[server.pid] = server

        def close() -> None:
            server.stdin.close()
            server.stdout.close()
            try:
                server.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            self._servers.pop(server.pid, None)

        return Conn(server.stdout.fileno(), server.stdin.fileno(), close)

    def relay_pids(self) -> list[int]:
        return []

    def server_pids(self) -> list[int]:
        return list(self._servers)

    def is_running(self) -> bool:
        return True

    def stderr_tail(self) -> list[str]:
        return []

    def stderr_notable(self) -> list[str]:
        return []

    def stop(self) -> list[str]:
        for server in list(self._servers.values()):
            server.kill()
            server.wait()
        self._servers.clear()
        return []


class StderrLog:
    """Drains a relay's stderr on a thread (a full pipe would stall it) and spots its ready line."""

    def __init__(self, stream, ready: re.Pattern) -> None:
        self.tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self.notable: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self.match: re.Match | None = None
        self.event = threading.Event()  # set on the ready line, or when stderr closes
        self._stream = stream
        self._ready = ready
        threading.Thread(target=self._drain, name="relay-stderr", daemon=True).start()

    def _drain(self) -> None:
        for raw in iter(self._stream.readline, b""):
            line = raw.decode(errors="replace").rstrip()
            self.tail.append(line)
            if NOTABLE_STDERR.search(line):
                self.notable.append(line)
            if self.match is None:
                self.match = self._ready.search(line)
                if self.match:
                    self.event.set()
        self.event.set()


class RelayTarget:
    """A relay process listening on a Unix socket or a loopback TCP port (plain, WebSocket, TLS or
    Streamable HTTP)."""

    def __init__(
        self, name: str, transport: str, kind: str, extra: tuple[str, ...] = (), modern: bool = False
    ) -> None:
        self.name = name
        self.modern = modern  # HTTP sessions speak the 2026-07-28 era (streamable_http.py)
        self.transport = transport  # "unix", "tcp", "ws", "tls" or "http"
        self.kind = kind  # "socat", "trio", "bridge", "supergateway" or "mcp-proxy"
        self.extra = extra  # further bridge options
        self._tempdir = tempfile.mkdtemp(prefix="mcp-bench-")
        self.socket_path = os.path.join(self._tempdir, f"{kind}.sock")
        # TLS rows: a throwaway CA and server certificate, deleted with the temporary directory
        self.certificates = TestCertificates(self._tempdir) if transport == "tls" else None
        # socat and the peers take a fixed port on their command line (none reports the port it
        # got for 0); the bridge takes 0 and logs the port it got
        self.port = 0 if kind in ("bridge", "trio") or transport == "unix" else _free_port()
        self.ws_path = "/"  # the WebSocket endpoint's path, for the ws rows
        self.http_path = HTTP_PATH  # the Streamable HTTP endpoint's path, for the http rows
        # what the HTTP sessions saw (response framings, reconnections, DELETE statuses)
        self.http_stats: collections.Counter[str] | None = (
            collections.Counter() if transport == "http" else None
        )
        self.command = self._command()
        self.cwd = REPO  # a baseline row runs the bridge in another checkout (make_target)
        self.address: str | tuple[str, int] | None = None
        self.proc: subprocess.Popen | None = None
        self._log: StderrLog | None = None

    # -- launch -------------------------------------------------------------------------------
    def _command(self) -> list[str]:
        if self.kind == "socat":
            if self.transport == "unix":
                listen = f"UNIX-LISTEN:{self.socket_path},fork,backlog={LISTEN_BACKLOG}"
            else:
                listen = f"TCP-LISTEN:{self.port},bind={LOOPBACK},reuseaddr,fork,backlog={LISTEN_BACKLOG}"
            return [SOCAT, "-d", "-d", listen, "EXEC:" + " ".join(SERVER_COMMAND)]
        if self.kind == "trio":
            return [PYTHON, str(REPO / "bench" / "trio_relay.py"), self.socket_path, "--", *SERVER_COMMAND]
        listen = {
            "unix": f"unix:{self.socket_path}",
            "tcp": f"tcp:{LOOPBACK}:0",
            "ws": f"ws://{LOOPBACK}:0/",
            "tls": f"tls:{LOOPBACK}:0",
            "http": f"http://{LOOPBACK}:0{HTTP_PATH}",
        }[self.transport]
        certificates = self.certificates
        tls = (
            ("--tls-cert", certificates.cert_path, "--tls-key", certificates.key_path) if certificates else ()
        )
        return [
            PYTHON, "-m", "bridge", "--listen", listen,
            "--max-message", BRIDGE_MAX_MESSAGE, "--max-child-message", BRIDGE_MAX_MESSAGE,
            *tls, *self.extra, "--", *SERVER_COMMAND,
        ]  # fmt: skip

    def _ready_pattern(self) -> re.Pattern:
        if self.kind in ("socat", "trio"):
            return re.compile(r"listening on")
        if self.transport == "unix":
            return re.compile(re.escape(f"listening on unix:{self.socket_path}"))
        scheme = {"tcp": "tcp:", "ws": "ws://", "tls": "tls:", "http": "http://"}[self.transport]
        path = re.escape(HTTP_PATH) if self.transport == "http" else ""
        return re.compile(rf"listening on {re.escape(scheme + LOOPBACK)}:(\d+){path}")

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self.command, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        self._log = StderrLog(self.proc.stderr, self._ready_pattern())
        if not self._log.event.wait(READY_TIMEOUT_S):
            raise BenchError(f"relay did not log 'listening on' within {READY_TIMEOUT_S:g} s")
        if self._log.match is None:
            status = self.proc.wait(STOP_TIMEOUT_S)
            raise BenchError(f"relay exited (status {status}) before listening: {self._last_line()}")
        if self.transport == "unix":
            self.address = self.socket_path
        elif self.kind == "socat":
            self.address = (LOOPBACK, self.port)
        else:
            self.address = (LOOPBACK, int(self._log.match.group(1)))

    def _last_line(self) -> str:
        return self._log.tail[-1] if self._log and self._log.tail else "(no stderr output)"

    # -- sessions -----------------------------------------------------------------------------
    def connect(self) -> Conn | HttpSession:
        if self.transport == "http":
            return http_connect(self.address, self.http_path, self.http_stats, self.modern)
        if self.transport == "ws":
            return ws_connect(f"ws://{self.address[0]}:{self.address[1]}{self.ws_path}")
        if self.transport == "tls":
            return tls_connect(self.address, self.certificates.client_context)
        family = socket.AF_UNIX if self.transport == "unix" else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(IDLE_TIMEOUT_S)
            sock.connect(self.address)
            if self.transport == "tcp":
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # we batch writes ourselves
        except BaseException:
            sock.close()
            raise
        return Conn(sock.fileno(), sock.fileno(), sock.close)

    # -- accounting ---------------------------------------------------------------------------
    def relay_pids(self) -> list[int]:
        pid = self.proc.pid
        if self.kind in ("bridge", "trio"):
            return [pid]
        return [pid] + [child for child in procfs.children(pid) if procfs.comm(child) == "socat"]

    def server_pids(self) -> list[int]:
        return [
            pid for pid in procfs.descendants(self.proc.pid)
            if str(EXAMPLE_SERVER) in procfs.cmdline(pid)  # an argument of its own, unlike socat's EXEC:
        ]  # fmt: skip

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stderr_tail(self) -> list[str]:
        return list(self._log.tail) if self._log else []

    def stderr_notable(self) -> list[str]:
        return list(self._log.notable) if self._log else []

    # -- shutdown -----------------------------------------------------------------------------
    def stop(self) -> list[str]:
        """SIGTERM, then clean up; notes describe anything a well-behaved relay would not do."""
        notes: list[str] = []
        if self.proc is None:  # never started: only the temporary directory (and any key) to remove
            shutil.rmtree(self._tempdir, ignore_errors=True)
            return notes
        family = procfs.descendants(self.proc.pid)
        status = self.proc.poll()
        if status is not None:
            notes.append(f"relay had already exited with status {status}")
        else:
            started = time.monotonic()
            self.proc.send_signal(signal.SIGTERM)
            try:
                status = self.proc.wait(STOP_TIMEOUT_S)
                if self.kind == "bridge":
                    elapsed = time.monotonic() - started
                    notes.append(f"SIGTERM: exited with status {status} in {elapsed:.2f} s")
            except subprocess.TimeoutExpired:
                notes.append(f"did not exit within {STOP_TIMEOUT_S:g} s of SIGTERM; killed")
                self.proc.kill()
                self.proc.wait()
        leftovers = _wait_gone(family, LEFTOVER_GRACE_S)
        if leftovers and self.kind == "bridge":
            notes.append(f"{len(leftovers)} child process(es) still running after the bridge exited; killed")
        for pid in leftovers:
            _kill(pid)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # anything left in the relay's process group
        except (ProcessLookupError, PermissionError):
            pass
        shutil.rmtree(self._tempdir, ignore_errors=True)
        return notes


# -- peers: relays installed for the benchmark only -------------------------------------------
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
        while not _accepts(self.address):
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


def _accepts(address: tuple[str, int]) -> bool:
    """True when something accepts TCP connections at ``address``."""
    try:
        with socket.create_connection(address, timeout=READY_POLL_S * 4):
            return True
    except OSError:
        return False


def _free_port() -> int:
    """A loopback port that was free a moment ago (socat needs a fixed port on its command line)."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def _wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    alive = [pid for pid in pids if procfs.is_alive(pid)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [pid for pid in alive if procfs.is_alive(pid)]
    return alive


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


BASELINE_SUFFIX = "@baseline"  # a bridge row served by another checkout's code (run.py --baseline)


def make_target(name: str, baseline: Path | None = None) -> DirectTarget | RelayTarget:
    if name.endswith(BASELINE_SUFFIX):
        if baseline is None:
            raise ValueError(f"{name}: a baseline row needs the baseline checkout")
        target = make_target(name.removesuffix(BASELINE_SUFFIX))
        assert isinstance(target, RelayTarget) and target.kind == "bridge", name
        target.name, target.cwd = name, baseline  # `python -m bridge` imports from its cwd first
        return target
    if name == "direct":
        return DirectTarget()
    # Each bridge row names its child mode: one child per session, as socat's fork+EXEC, except
    # where the row is about sharing one.
    per_connection = ("--child", "per-connection")
    if name == "bridge-prespawn":
        return RelayTarget(name, "unix", "bridge", (*per_connection, "--prespawn", str(PRESPAWN)))
    if name == "bridge-shared":
        return RelayTarget(name, "unix", "bridge", ("--child", "shared"))
    if name == "bridge-http-2026":
        return RelayTarget(name, "http", "bridge", ("--child", "shared"), modern=True)
    if name.startswith("supergateway-ws"):
        return SupergatewayTarget(name, "ws", quiet=name.endswith("-quiet"))
    if name == "supergateway-http":
        return SupergatewayTarget(name, "http", quiet=True)
    if name == "mcp-proxy-npm":
        return McpProxyNpmTarget(name)
    if name == "mcp-proxy-py":
        return McpProxyPyTarget(name)
    kind, transport = name.split("-")
    return RelayTarget(name, transport, kind, per_connection if kind == "bridge" else ())


TARGET_NAMES = (
    "direct",
    "socat-unix",
    "socat-tcp",
    "trio-unix",
    "bridge-unix",
    "bridge-tcp",
    "bridge-prespawn",
    "bridge-shared",
    "bridge-ws",
    "bridge-tls",
    "bridge-http",
    "bridge-http-2026",
    "supergateway-ws",
    "supergateway-ws-quiet",
    "supergateway-http",
    "mcp-proxy-npm",
    "mcp-proxy-py",
)
