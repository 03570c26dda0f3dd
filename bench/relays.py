"""The processes the benchmark measures: no relay (``DirectTarget``) or a relay on a socket (``RelayTarget``).

Every target offers ``start()``, ``connect() -> Conn`` (a fresh session, not yet initialized),
``relay_pids()`` (the processes whose own CPU and memory are charged to the relay), ``server_pids()``
(the example-server processes), and ``stop() -> notes``. Which rows use which, and how each relay is
started and judged ready, is in targets.py; the relays installed for the benchmark only are in
peers.py.
"""

from __future__ import annotations

import collections
import os
import re
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


def accepts(address: tuple[str, int]) -> bool:
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
