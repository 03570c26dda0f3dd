"""Where a relay's CPU goes: a flame graph of one benchmark row under the pipelined load.

Run from the repository root::

    python bench/profile.py bridge-unix [--calls 60000] [--out docs/images/profiles/bridge-unix.svg]
    python bench/profile.py bridge-ws --echo 16   # a 16 MiB echo, three times, instead
    python bench/profile.py bridge-unix --out /tmp/unix.txt   # collapsed stacks, one per line

It starts the row's relay exactly as ``bench/run.py`` does (``targets.make_target``), opens one
session, attaches ``py-spy record`` to the relay process (never to its children: the example
server's own time is not the relay's), drives the pipelined scenario's load (64 calls in flight,
refills batched) or the large echo for ``--calls`` calls, stops py-spy (SIGINT: it then writes the
SVG) and stops the relay. Sampling costs the relay a little time; the figures come from
``bench/run.py``, never from a profiled run.

py-spy is a development tool, not a dependency: ``pip install py-spy``. It reads the relay's memory
from outside (``process_vm_readv``), so it needs the right to trace the relay's process: root, or
the same user where ``kernel.yama.ptrace_scope`` is 0.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import scenarios
from targets import TARGET_NAMES, make_target
from wire import BenchError, echo_call, open_session

SAMPLE_RATE = 997  # samples per second: py-spy's default (100) gives too few for a 10 s run;
# a prime so that sampling does not beat with a periodic timer in the relay
PYSPY_STOP_TIMEOUT_S = 30  # writing the SVG of a few hundred thousand samples takes a few seconds
WINDOW = 64  # calls in flight, as in the benchmark's pipelined scenario


def profile(row: str, out: Path, calls: int, echo_mib: int | None) -> None:
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    target = make_target(row)
    target.start()
    try:
        conn = open_session(target.connect)
        try:
            conn.reserve(WINDOW)  # HTTP: a connection per call in flight, opened before sampling
            relay = target.relay_pids()[0]
            out.parent.mkdir(parents=True, exist_ok=True)
            spy = subprocess.Popen(
                [pyspy, "record", "--pid", str(relay), "--rate", str(SAMPLE_RATE), "--format",
                 "raw" if out.suffix == ".txt" else "flamegraph", "--output", str(out), "--nonblocking"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            )  # fmt: skip
            time.sleep(1)  # py-spy attaches asynchronously; a second of idle relay costs no samples
            try:
                started = time.perf_counter()
                if echo_mib is None:
                    texts = [f"pipelined call {i}" for i in range(1, calls + 1)]
                    requests = [echo_call(i, text) for i, text in enumerate(texts, start=1)]
                    scenarios._pipeline(conn, requests, texts, WINDOW)
                else:
                    text = scenarios.make_text(echo_mib << 20)
                    for number in range(1, calls + 1):
                        scenarios._echo_round_trip(conn, number, text, echo_call(number, text))
                wall = time.perf_counter() - started
            finally:
                spy.send_signal(signal.SIGINT)
                _, errors = spy.communicate(timeout=PYSPY_STOP_TIMEOUT_S)
            if not out.exists():
                raise BenchError(f"py-spy wrote no {out}: {errors.decode(errors='replace')[-500:]}")
            print(f"{row}: {calls} calls in {wall:.2f} s, flame graph in {out}", file=sys.stderr)
        finally:
            conn.close()
    finally:
        target.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("row", choices=TARGET_NAMES)
    parser.add_argument("--calls", type=int, help="calls to make (default 60000, or 3 echoes)")
    parser.add_argument("--echo", type=int, metavar="MIB", help="echo a message of this many MiB")
    parser.add_argument(
        "--out",
        type=Path,
        help="the SVG, or collapsed stacks if it ends in .txt (default: /tmp/profile-ROW.svg)",
    )
    options = parser.parse_args(argv)
    calls = options.calls or (3 if options.echo else 60_000)
    out = options.out or Path(f"/tmp/profile-{options.row}.svg")
    profile(options.row, out, calls, options.echo)
    return 0


if __name__ == "__main__":
    sys.exit(main())
