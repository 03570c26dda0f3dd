"""One bridge under soak: ``python -m bridge`` as a subprocess, its log, and its /proc figures.

A :class:`SoakBridge` owns its process: :meth:`start` launches it and waits for its ``listening
on`` lines, :meth:`stop` sends SIGTERM and waits (killing it past the budget), and the soak's
nursery runs :meth:`drain_log` for as long as the process lives.
"""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import procfs
import trio

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_SERVER = [sys.executable, str(REPO / "bridge" / "example_server")]
READY_TIMEOUT_S = 30.0  # how long a bridge may take to listen (auto mode probes its child first)
# SIGTERM must stop the bridge within its drain budget: --drain-timeout (10 s) for requests in
# flight, then each child's stop (--stop-stdin-timeout 2 s, --stop-term-timeout 2 s), plus 4 s of
# slack for a loaded 2-core machine.
DRAIN_BUDGET_S = 10.0 + 2.0 + 2.0 + 4.0
LISTENING = re.compile(r"listening on (\S+)")
# The bridge's INFO line for a per-connection child: "tcp 127.0.0.1:PORT: connected; child pid N".
CONNECTED = re.compile(r"(?:tcp|ws) (\S+): connected; child pid (\d+)")
CHILD_PEERS = 4096  # children remembered (a ten-minute run starts about 900 per configuration)
LOG_TAIL = 30  # log lines kept for the report
# A traceback is kept with its context: the lines logged just before it and its frames after, so
# a run that finds one says where it came from (the first ten-minute run after issue 15's fixes
# found 24 on ws and kept only their first lines). The whole report keeps at most NOTABLE_LINES.
TRACEBACK_BEFORE = 3
TRACEBACK_AFTER = 25
NOTABLE_LINES = 200


class SoakBridge:
    """The bridge of one configuration: ``listen`` addresses and ``--child MODE``."""

    def __init__(self, name: str, listen: str, child: str) -> None:
        self.name = name
        self.listen = listen
        self.child = child
        self.address = ""  # the address it reports (the port it got for :0)
        self.proc: trio.Process | None = None
        self.tracebacks = 0
        self.errors = 0  # ERROR lines in its log
        self.warnings: collections.Counter[str] = collections.Counter()
        self.tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL)
        self.notable: list[str] = []
        self._context = 0  # lines still to keep after a traceback's first line
        self.ready = trio.Event()
        self.exited_early = False
        # child pid -> the peer ("127.0.0.1:PORT") of the connection it serves, from the log
        self.child_peers: dict[int, str] = {}

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "bridge", "--listen", self.listen, "--child", self.child,
            "--max-message", "256KiB", "--log-level", "info", "--name", self.name,
            "--", *EXAMPLE_SERVER,
        ]  # fmt: skip

    async def start(self, nursery: trio.Nursery) -> None:
        self.proc = await trio.lowlevel.open_process(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=REPO,
        )
        nursery.start_soon(self.drain_log)
        with trio.fail_after(READY_TIMEOUT_S):
            await self.ready.wait()
        if not self.address:
            raise RuntimeError(f"{self.name}: the bridge exited before listening: {list(self.tail)}")

    async def drain_log(self) -> None:
        """Read the bridge's stderr until it closes, counting tracebacks and ERROR lines."""
        assert self.proc is not None and self.proc.stderr is not None
        buffer = b""
        while data := await self.proc.stderr.receive_some(1 << 16):
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for raw in lines:
                self._log_line(raw.decode(errors="replace"))
        self.ready.set()

    def _log_line(self, line: str) -> None:
        self.tail.append(line)
        if self._context > 0:  # a traceback's frames and exception, and the lines before it
            self._context -= 1
            self._note(line)
        if match := CONNECTED.search(line):
            self.child_peers[int(match.group(2))] = match.group(1)
            if len(self.child_peers) > CHILD_PEERS:
                del self.child_peers[next(iter(self.child_peers))]
        if match := LISTENING.search(line):
            self.address = match.group(1)
            self.ready.set()
        if line.startswith("Traceback") or "Traceback (most recent call last)" in line:
            self.tracebacks += 1
            for before in list(self.tail)[-TRACEBACK_BEFORE - 1 : -1]:  # what was being logged
                self._note(before)
            self._note(line)
            self._context = TRACEBACK_AFTER
        if " ERROR " in line or line.startswith("ERROR"):
            self.errors += 1
            self._note(line)
        elif " WARNING " in line or line.startswith("WARNING"):
            self.warnings[re.sub(r"\d+", "N", line.split("WARNING", 1)[1].strip())[:100]] += 1

    def _note(self, line: str) -> None:
        if len(self.notable) < NOTABLE_LINES:
            self.notable.append(line[:300])

    def sample(self) -> dict[str, int]:
        """The bridge's open fds, RSS (KiB) and descendant processes now."""
        try:
            fds = len(os.listdir(f"/proc/{self.pid}/fd"))
        except OSError:
            fds = -1
        return {"fds": fds, "rss_kb": procfs.rss_kb(self.pid), "procs": len(self.live_descendants())}

    def fd_kinds(self) -> dict[str, int]:
        """The bridge's open fds by kind (socket, pipe, anon_inode:..., a file's path)."""
        kinds: collections.Counter[str] = collections.Counter()
        try:
            for fd in os.listdir(f"/proc/{self.pid}/fd"):
                try:
                    kinds[re.sub(r"\[\d+\]", "", os.readlink(f"/proc/{self.pid}/fd/{fd}"))] += 1
                except OSError:
                    pass
        except OSError:
            pass
        return dict(kinds)

    def live_descendants(self) -> list[int]:
        return [pid for pid in procfs.descendants(self.pid) if procfs.is_alive(pid)]

    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None and self.proc.poll() is None

    async def stop(self) -> dict[str, object]:
        """SIGTERM; wait for the exit within :data:`DRAIN_BUDGET_S`; report status, time, leftovers."""
        assert self.proc is not None
        descendants = self.live_descendants()
        started = trio.current_time()
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        with trio.move_on_after(DRAIN_BUDGET_S):
            await self.proc.wait()
        seconds = trio.current_time() - started
        in_budget = self.proc.returncode is not None
        if not in_budget:
            self.proc.kill()
            await self.proc.wait()
        await trio.sleep(0.2)  # reaped children's /proc entries go at once; this is for the kernel
        leftovers = [pid for pid in descendants if procfs.is_alive(pid)]
        for pid in leftovers:
            os.kill(pid, signal.SIGKILL)
        return {
            "returncode": self.proc.returncode,
            "seconds": round(seconds, 2),
            "within_budget": in_budget,
            "leftover_processes": len(leftovers),
        }
