"""Count a relay's trips through trio's scheduler, and its system calls' CPU, per call.

Runs a relay (``bridge-unix``, ``bridge-tcp``, ``bridge-shared``, ``bridge-ws``, ``bridge-http``,
``bridge-http-2026`` or ``trio-unix``, started as the benchmark starts them) with a trio Instrument
in its process, makes N small ``tools/call`` echo calls (one at a time, or ``--window`` written at once; or
``--echo`` calls of that many MiB, one at a time), then does it again with 3N calls; the
difference, divided by 2N, is what one call costs the relay's event loop, setup and teardown
cancelling out:

* task steps: resumptions of a task's coroutine (per task, named after its function);
* I/O waits: passes of the run loop that ask the kernel for events (``epoll_wait``), and those of
  them that blocked (a timeout above 0);
* garbage collections, by generation, and the CPU they took;
* CPU time of the whole process (and its split between user space and the kernel), inside task
  steps, and inside ``os.read``/``os.write``/``readv``/``writev`` (the bridge's direct reads and
  writes; trio's sockets are not counted there). CPU figures move with the machine's load: compare
  them within one run, alternating checkouts;
* minor page faults (memory the kernel maps in on first touch: a large message's buffers);
* with ``--instructions``, the instructions the relay's process executed (valgrind's cachegrind,
  ``--cache-sim=no``; the relay runs some 50 times slower): a count that the machine's load does not
  move, within a percent or two from run to run where the CPU figures move by a fifth;
* the client's CPU and wall time per call (this process: the benchmark's own clients, the HTTP rows
  through ``streamable_http.HttpSession``), to see what the client adds to a round trip.

Usage::

    python bench/passes.py bridge-unix trio-unix [--calls 2000] [--window 64] [--checkout DIR]
    python bench/passes.py bridge-ws --calls 500 --window 64 --instructions
    python bench/passes.py bridge-ws --calls 3 --echo 16
    python bench/passes.py bridge-http bridge-http-2026 --calls 500

``--checkout`` serves the bridge rows from another checkout of mcp-bridge (as the benchmark's
``--baseline``). With ``PASSES_PROFILE=FILE`` set, the relay also runs under cProfile, its stats
dumped to FILE.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import re
import resource
import runpy
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from streamable_http import http_connect  # noqa: E402
from wire import INITIALIZE, INITIALIZE_ID, INITIALIZED, echo_call, open_session  # noqa: E402

READY_TIMEOUT_S = 20.0  # as bench/targets.py gives a relay to log that it listens
SETTLE_S = 0.2  # for the relay to see the session end before it is stopped (outside the difference)
SYSCALLS = ("read", "write", "readv", "writev")
ROWS = (
    "bridge-unix",
    "bridge-tcp",
    "bridge-shared",
    "bridge-ws",
    "bridge-http",
    "bridge-http-2026",
    "trio-unix",
)
HTTP_PATH = "/mcp"  # as bench/relays.py serves the HTTP rows
VALGRIND_SLOWER = 50  # about how much slower a process runs under cachegrind: its timeouts' factor


# -- inside the relay's process ------------------------------------------------------------------
def _wrapped(out: str, argv: list[str]) -> None:
    """Run ``argv`` (``-m MODULE ...`` or ``SCRIPT ...``) here, counting; the counts go to ``out``."""
    import trio

    class Count(trio.abc.Instrument):
        def __init__(self) -> None:
            self.counts: collections.Counter[str] = collections.Counter()
            self.started = 0.0

        def before_task_step(self, task: trio.lowlevel.Task) -> None:
            self.counts["task steps"] += 1
            self.counts["step: " + task.name.rsplit(".", 1)[-1]] += 1
            self.started = time.thread_time()

        def after_task_step(self, task: trio.lowlevel.Task) -> None:
            self.counts["CPU in task steps, µs"] += (time.thread_time() - self.started) * 1e6

        def before_io_wait(self, timeout: float) -> None:
            self.counts["io waits"] += 1
            if timeout > 0:
                self.counts["io waits that blocked"] += 1

        def after_run(self) -> None:
            self.counts["CPU of the process, µs"] = time.process_time() * 1e6
            usage = resource.getrusage(resource.RUSAGE_SELF)
            self.counts["CPU of the process in user space, µs"] = usage.ru_utime * 1e6
            self.counts["CPU of the process in the kernel, µs"] = usage.ru_stime * 1e6
            self.counts["minor page faults"] = usage.ru_minflt
            Path(out).write_text(json.dumps(self.counts))

    counter = Count()
    run = trio.run
    collecting = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collecting[0] = time.thread_time()
        else:
            counter.counts[f"gc collections of generation {info['generation']}"] += 1
            counter.counts["CPU in gc, µs"] += (time.thread_time() - collecting[0]) * 1e6

    gc.callbacks.append(on_gc)

    def counted_run(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("instruments", []).append(counter)
        return run(*args, **kwargs)

    trio.run = counted_run
    for name in SYSCALLS:
        setattr(os, name, _timed(getattr(os, name), counter.counts, f"CPU in os.{name}, µs"))
    if not os.environ.get("PASSES_PROFILE"):
        _run(argv)
        return
    # bench/profile.py would shadow the standard library's profile module, which cProfile needs
    sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != REPO / "bench"]
    import cProfile

    profile = cProfile.Profile()
    profile.enable()
    try:
        _run(argv)
    finally:
        profile.disable()
        profile.dump_stats(os.environ["PASSES_PROFILE"])


def _timed(call: Callable[..., Any], counts: collections.Counter[str], key: str) -> Callable[..., Any]:
    clock = time.thread_time

    def timed(*args: Any) -> Any:
        started = clock()
        try:
            return call(*args)
        finally:
            counts[key] += (clock() - started) * 1e6

    return timed


def _run(argv: list[str]) -> None:
    if argv[0] == "-m":
        # as `python -m` does: the working directory first, so that --checkout's code is what runs
        # (this script's directory and the venv's editable install of this checkout come after)
        sys.path.insert(0, os.getcwd())
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv
        runpy.run_path(argv[0], run_name="__main__")


# -- the client ------------------------------------------------------------------------------------
def _command(row: str, where: str, out: str, checkout: Path) -> tuple[list[str], str]:
    # the example server: a package run as a script (a single file in checkouts before a172200)
    server_path = checkout / "bridge" / "example_server"
    if not server_path.exists():
        server_path = server_path.with_suffix(".py")
    server = [sys.executable, str(server_path)]
    wrap = [sys.executable, __file__, "--wrapped", out, "--"]
    path = os.path.join(where, "relay.sock")
    if row == "trio-unix":
        return [*wrap, str(REPO / "bench" / "trio_relay.py"), path, "--", *server], path
    listen = {
        "bridge-unix": f"unix:{path}",
        "bridge-shared": f"unix:{path}",
        "bridge-tcp": "tcp:127.0.0.1:0",
        "bridge-ws": "ws://127.0.0.1:0/",
        "bridge-http": f"http://127.0.0.1:0{HTTP_PATH}",
        "bridge-http-2026": f"http://127.0.0.1:0{HTTP_PATH}",
    }
    limits = [
        "--max-message",
        "32MiB",
        "--max-child-message",
        "32MiB",
    ]  # a 16 MiB echo fits (bench/relays.py)
    shared = row in ("bridge-shared", "bridge-http-2026")
    child = "shared" if shared else "per-connection"  # as bench/targets.py
    bridge = ["-m", "bridge", "--listen", listen[row], *limits, "--child", child]
    return [*wrap, *bridge, "--", *server], path


def _session(
    row: str, calls: int, window: int, checkout: Path, text_bytes: int = 0, instructions: bool = False
) -> collections.Counter[str]:
    """Start the relay, make ``calls`` calls (texts of ``text_bytes`` if set), stop it; its counts."""
    slower = VALGRIND_SLOWER if instructions else 1
    with tempfile.TemporaryDirectory() as where:
        out = os.path.join(where, "counts.json")
        command, path = _command(row, where, out, checkout)
        cachegrind = os.path.join(where, "cachegrind.out")
        if instructions:
            command = [
                "valgrind",
                "--tool=cachegrind",
                "--cache-sim=no",
                f"--cachegrind-out-file={cachegrind}",
                *command,
            ]
        # `python -m bridge` imports from its cwd first, as the benchmark's --baseline relies on
        proc = subprocess.Popen(command, cwd=checkout, stderr=subprocess.PIPE, start_new_session=True)
        try:
            address = _wait_listening(row, proc, path, READY_TIMEOUT_S * slower)
            text = "x" * text_bytes if text_bytes else None
            started_cpu, started = time.process_time(), time.perf_counter()
            if row == "bridge-ws":
                _calls_over_websocket(address, calls, window, text)
            elif row.startswith("bridge-http"):
                assert isinstance(address, tuple)
                _http_calls(address, row == "bridge-http-2026", calls, window, text)
            else:
                _calls(address, calls, window, text)
            client = {
                "client: CPU, µs": (time.process_time() - started_cpu) * 1e6,
                "client: wall time, µs": (time.perf_counter() - started) * 1e6,
            }
            time.sleep(SETTLE_S * slower)
            os.killpg(proc.pid, signal.SIGINT)  # trio.run returns: the instrument writes its counts
            proc.wait(timeout=READY_TIMEOUT_S * slower)
        finally:
            if proc.returncode is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        counts = collections.Counter({**json.loads(Path(out).read_text()), **client})
        if instructions:  # cachegrind's last line: "summary: INSTRUCTIONS"
            found = re.search(rb"^summary: (\d+)", Path(cachegrind).read_bytes(), re.MULTILINE)
            assert found is not None, "cachegrind wrote no summary"
            counts["instructions"] = int(found[1])
        return counts


def _calls(address: str | tuple[str, int], calls: int, window: int, text: str | None) -> None:
    """The calls over a Unix socket or TCP: a window of calls, then their replies."""
    family = socket.AF_INET if isinstance(address, tuple) else socket.AF_UNIX
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(address)
        if family == socket.AF_INET:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as bench/relays.py connects
        reader = sock.makefile("rb")
        sock.sendall(INITIALIZE)
        _reply(reader, INITIALIZE_ID)
        sock.sendall(INITIALIZED)
        for first in range(1, calls + 1, window):
            ids = range(first, min(first + window, calls + 1))
            sock.sendall(b"".join(echo_call(i, text or f"call {i}") for i in ids))
            for i in ids:
                _reply(reader, i)


def _http_calls(address: tuple[str, int], modern: bool, calls: int, window: int, text: str | None) -> None:
    """The calls over Streamable HTTP, by the benchmark's client (a connection per call in flight)."""
    session = http_connect(address, HTTP_PATH, modern=modern)
    try:
        session.reserve(window)
        session.send(INITIALIZE)
        _answered(session.read_one())
        session.send(INITIALIZED)
        for first in range(1, calls + 1, window):
            ids = range(first, min(first + window, calls + 1))
            session.send(b"".join(echo_call(i, text or f"call {i}") for i in ids))
            replies = 0
            while replies < len(ids):
                for reply in session.read_lines():
                    _answered(reply)
                    replies += 1
    finally:
        session.close()


def _answered(reply: bytes) -> None:
    """Stop unless ``reply`` is a result: counts of error replies (a child that did not start) mislead."""
    if b'"result"' not in reply:
        raise SystemExit(f"not a result: {reply[:200]!r}")


def _reply(reader: Any, request_id: int) -> None:
    """Read the next reply and check that it answers ``request_id`` with a result.

    ``readline`` returns ``b""`` at end of input instead of raising: without this check a relay whose
    child failed to start would be counted as serving calls.
    """
    line = reader.readline()
    reply = json.loads(line) if line else None
    if not isinstance(reply, dict) or reply.get("id") != request_id or "result" not in reply:
        raise SystemExit(f"expected the result of request {request_id}, got {line[:200]!r}")


def _calls_over_websocket(address: str | tuple[str, int], calls: int, window: int, text: str | None) -> None:
    """The calls over a WebSocket, with the benchmark's own client (bench/ws_tls.py)."""
    from ws_tls import ws_connect  # imports websockets: only for this row

    assert isinstance(address, tuple)
    conn = open_session(lambda: ws_connect(f"ws://{address[0]}:{address[1]}/"))
    try:
        for first in range(1, calls + 1, window):
            ids = range(first, min(first + window, calls + 1))
            conn.send(b"".join(echo_call(i, text or f"call {i}") for i in ids))
            replies = 0
            while replies < len(ids):
                replies += len(conn.read_lines())
    finally:
        conn.close()


def _wait_listening(
    row: str, proc: subprocess.Popen[bytes], path: str, timeout: float
) -> str | tuple[str, int]:
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline().decode()
        if not line:
            break
        if "listening on" in line:
            if row in ("bridge-tcp", "bridge-ws"):  # tcp:127.0.0.1:PORT, ws://127.0.0.1:PORT/
                return ("127.0.0.1", int(line.rsplit(":", 1)[1].split()[0].rstrip("/")))
            if row.startswith("bridge-http"):  # listening on http://127.0.0.1:PORT/mcp
                return ("127.0.0.1", int(line.rsplit(":", 1)[1].split("/")[0]))
            return path
    raise SystemExit(f"{row} did not log 'listening on'")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--wrapped":
        _wrapped(sys.argv[2], sys.argv[4:])
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("rows", nargs="+", choices=ROWS)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--window", type=int, default=1, help="calls written at once (1: one at a time)")
    parser.add_argument("--checkout", type=Path, default=REPO, help="the checkout serving the bridge rows")
    parser.add_argument("--echo", type=int, default=0, metavar="MIB", help="each call's text this many MiB")
    parser.add_argument("--instructions", action="store_true", help="count instructions (valgrind)")
    args = parser.parse_args()
    window = 1 if args.echo else args.window
    for row in args.rows:
        few, many = (
            _session(row, calls, window, args.checkout, args.echo << 20, args.instructions)
            for calls in (args.calls, 3 * args.calls)
        )
        served = f" ({args.checkout})" if row != "trio-unix" else ""
        size = f", each {args.echo} MiB" if args.echo else ""
        print(f"{row}{served}: per call, {window} written at once{size}")
        for key in sorted(many):
            value = (many[key] - few[key]) / (2 * args.calls)
            if abs(value) >= 0.01:
                print(f"  {key:40s} {value:8.2f}")


if __name__ == "__main__":
    main()
