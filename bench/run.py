"""mcp-bridge benchmark: the bridge against socat, supergateway, mcp-proxy and no relay at all.

Run from the repository root::

    python bench/run.py [--quick] [--out bench/results/latest.json] [--rows bridge-unix,bridge-tcp]
                        [--scenarios sequential,pipelined]

Rows (all serve ``python bridge/example_server``, with this interpreter, one child per session
but in ``bridge-shared``, ``bridge-http-2026``, the supergateway-ws rows and the mcp-proxy rows):

* ``direct``       the client spawns the server and talks over its stdin/stdout: the limit;
* ``socat-unix``   ``socat UNIX-LISTEN:PATH,fork,backlog=128 EXEC:...``;
* ``socat-tcp``    ``socat TCP-LISTEN:PORT,bind=127.0.0.1,reuseaddr,fork,backlog=128 EXEC:...``;
* ``bridge-unix``  ``python -m bridge --listen unix:PATH --max-message 32MiB
                   --max-child-message 32MiB -- ...``;
* ``bridge-tcp``   the same with ``--listen tcp:127.0.0.1:0`` (the port is read from its log);
* ``bridge-auto``  ``bridge-unix`` with the default ``--child auto`` (the Quickstart's command
                   line): the shared child the era probe chose, and a child per legacy session;
* ``bridge-shared`` ``bridge-unix`` with ``--child shared``: one example server for every session;
* ``bridge-prespawn`` ``bridge-unix`` with ``--prespawn 8``;
* ``bridge-ws``    ``bridge-unix`` with ``--listen ws://127.0.0.1:0/`` (WebSocket, one text frame
                   per message);
* ``bridge-tls``   ``bridge-unix`` with ``--listen tls:127.0.0.1:0 --tls-cert CERT --tls-key KEY``
  (certificates made for the run with trustme, in a temporary directory);
* ``bridge-http`` ``bridge-unix`` with ``--listen http://127.0.0.1:0/mcp`` (Streamable HTTP);
* ``bridge-http-2026`` ``bridge-http`` with ``--child shared`` (one example server for every
  session), its sessions in the 2026-07-28 era: no ``initialize`` and no session; every POST carries
  ``MCP-Protocol-Version: 2026-07-28``, ``Mcp-Method`` (and ``Mcp-Name`` for ``tools/call``) and
  every request ``params._meta`` with the protocol version and client capabilities. Where the
  scenarios below send ``initialize`` it sends ``server/discover`` (the era's first contact, so
  setup is until its result arrives), and ``notifications/initialized`` is not sent;
* ``supergateway-ws`` supergateway's stdio→WebSocket mode (one example server for every session),
  installed with npm into the git-ignored ``bench/.node`` when the row runs;
  ``supergateway-ws-quiet`` the same with ``--logLevel none``;
* ``supergateway-http`` supergateway's stateful stdio→Streamable HTTP mode (one example server per
  session), ``--logLevel none``;
* ``mcp-proxy-npm`` punkpeye's mcp-proxy from npm (bench/.node), ``mcp-proxy-py`` sparfenyuk's
  mcp-proxy from PyPI (the git-ignored venv ``bench/.pyvenv``): Streamable HTTP at ``/mcp``, one
  example server for every session.

WebSocket and TLS sessions are driven like the others (one non-blocking socket, poll), see ws_tls.py;
Streamable HTTP sessions (a POST per message, keep-alive connections, JSON or SSE responses) too,
see streamable_http.py.

Scenarios, each on fresh sessions that start with ``initialize`` + ``notifications/initialized``
(``server/discover`` in the 2026-07-28 era):

* string ids: two calls whose ids are strings (``"abc:1"``, ``"42"``); whether both come back as
  sent (a finding reported as yes/no, not an error);
* setup: connect (spawn, for direct) until the initialize result arrives, sessions one at a time;
* spaced setup: the same with 100 ms between sessions (a warm pool has refilled by then);
* sequential: small ``echo`` calls one at a time, after a warm-up; p50/p99 round trip;
* pipelined: many calls with a fixed number in flight, refills batched into one write; calls/s, and
  the CPU each process spent in that window (utime+stime from /proc, see procfs.py): the relay's,
  the client's own (this process) and the example server's;
* concurrent: N sessions connected at once, each initialize + M calls one at a time, driven from one
  poll loop; wall time, calls/s, and the relay's memory (alone, and with the example servers) while
  all N are still connected. For direct this spawns N servers, which is what the relays do too;
* large: echo of a 1 MiB and a 16 MiB text; median round trip, encoding done before the clock starts.

Before the rows, ``startup.py`` times ``mcp-bridge --version`` against ``python -c pass``.

With ``--baseline CHECKOUT`` (another commit's working tree), every ``bridge-*`` row is followed by
``ROW@baseline``: the same row, client and example server, with the bridge run from that checkout,
so that before and after are measured in one run (``--baseline-first`` puts ``ROW@baseline``
first); the start-up figures gain its ``python -m bridge --version``. Both checkouts are
byte-compiled first (stale ``.pyc`` files cost start-up time and memory where
``PYTHONDONTWRITEBYTECODE`` is set).

Every reply is checked (id and echoed text); the first bad one fails the scenario, which is then
reported as ``error: ...`` in place of a number. A relay that does not start, hangs (no byte moves
for 10 s) or dies fails its own cells only; the other rows still run. Exit status is 1 if any cell
failed, else 0.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import report
import scenarios
import startup
from relays import REPO, SOCAT
from scenarios import Counts
from targets import BASELINE_SUFFIX, TARGET_NAMES, make_target

MiB = 1 << 20
FULL = Counts(
    setup_sessions=50,
    sequential_calls=2000,
    warmup_calls=200,
    pipelined_calls=20_000,
    pipeline_window=64,
    clients=50,
    calls_per_client=20,
    large_sizes=(1 * MiB, 16 * MiB),
    large_repeats=3,
)
QUICK = Counts(  # about a tenth of the work; still 50 simultaneous connections
    setup_sessions=5,
    sequential_calls=200,
    warmup_calls=20,
    pipelined_calls=2_000,
    pipeline_window=64,
    clients=50,
    calls_per_client=2,
    large_sizes=(1 * MiB, 16 * MiB),
    large_repeats=1,
)
QUICK_STARTUP_RUNS = 3  # a smoke run only checks that the start-up figures are taken


def scenario_list(counts: Counts, cores: int) -> list[tuple[str, object]]:
    """(key, function of target) in run order; concurrent runs before the large echoes so that the
    relay's memory @N clients is not inflated by 16 MiB buffers."""
    steps = [
        ("string_ids", lambda t: scenarios.string_ids(t, counts)),
        ("setup", lambda t: scenarios.setup_time(t, counts)),
        ("spaced_setup", lambda t: scenarios.spaced_setup_time(t, counts)),
        ("sequential", lambda t: scenarios.sequential(t, counts)),
        ("pipelined", lambda t: scenarios.pipelined(t, counts, cores)),
        ("concurrent", lambda t: scenarios.concurrent(t, counts)),
    ]
    for size in counts.large_sizes:
        steps.append((f"echo_{size >> 20}MiB", lambda t, size=size: scenarios.large_echo(t, counts, size)))
    return steps


SCENARIO_NAMES = tuple(key for key, _ in scenario_list(FULL, 1))


def describe(error: BaseException) -> str:
    text = str(error) or type(error).__name__
    return text if isinstance(error, scenarios.BenchError) else f"{type(error).__name__}: {text}"


def run_row(
    name: str, counts: Counts, cores: int, only: list[str] | None = None, baseline: Path | None = None
) -> dict:
    """Start one target, run every scenario on it (or those in ``only``; each failing on its own),
    stop it."""
    target = make_target(name, baseline)
    row = {"name": name, "command": target.command, "results": {}, "notes": []}
    steps = [step for step in scenario_list(counts, cores) if only is None or step[0] in only]
    print(f"[{name}] starting", file=sys.stderr, flush=True)
    try:
        target.start()
    except Exception as error:
        message = f"did not start: {describe(error)}"
        row["results"] = {key: {"error": message} for key, _ in steps}
    else:
        for key, measure in steps:
            row["results"][key] = _run_step(target, key, measure)
        stats = getattr(target, "http_stats", None)
        if stats is not None:  # what the HTTP client saw over all the row's sessions (not a scenario)
            row["results"]["http"] = {"counts": dict(stats)}
    finally:
        row["stderr_tail"] = target.stderr_tail()
        row["stderr_notable"] = target.stderr_notable()
        row["notes"] += target.stop()
    return row


def _run_step(target, key: str, measure) -> dict:
    if not target.is_running():
        return {"error": f"relay exited with status {target.proc.returncode}"}
    print(f"  {key}", file=sys.stderr, flush=True)
    started = time.monotonic()
    try:
        result = measure(target)
    except Exception as error:
        result = {"error": describe(error)}
    result["scenario_s"] = round(time.monotonic() - started, 3)
    return result


def machine_info() -> dict:
    socat = subprocess.run([SOCAT, "-V"], capture_output=True, text=True).stdout.splitlines()
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "socat": next((line.strip() for line in socat if line.startswith("socat version")), "?"),
        "loadavg_at_start": os.getloadavg(),
    }


def _with_baseline(name: str, baseline_first: bool) -> list[str]:
    if not name.startswith("bridge-"):
        return [name]
    pair = [name, name + BASELINE_SUFFIX]
    return pair[::-1] if baseline_first else pair


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="about a tenth of the work, for a smoke run")
    parser.add_argument("--out", metavar="FILE.json", help="also write all results as JSON")
    parser.add_argument(
        "--rows",
        default=",".join(TARGET_NAMES),
        help=f"comma-separated subset of: {', '.join(TARGET_NAMES)} (default: all)",
    )
    parser.add_argument(
        "--scenarios",
        help=f"comma-separated subset of: {', '.join(SCENARIO_NAMES)} (default: all); a quick look "
        "while working, never a published figure (the report's other columns stay empty)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="CHECKOUT",
        help="another checkout of mcp-bridge (e.g. `git worktree add --detach /tmp/base COMMIT`): every "
        "bridge row is followed by ROW@baseline, the same row served by that checkout's code",
    )
    parser.add_argument(
        "--baseline-first",
        action="store_true",
        help="with --baseline, run ROW@baseline before ROW (bench/alternate.py alternates the two orders)",
    )
    options = parser.parse_args(argv)
    if options.baseline_first and options.baseline is None:
        parser.error("--baseline-first: needs --baseline")
    if options.baseline is not None:
        options.baseline = options.baseline.resolve()
        if not (options.baseline / "bridge" / "__main__.py").is_file():
            parser.error(
                f"--baseline {options.baseline}: not a checkout of mcp-bridge (no bridge/__main__.py)"
            )
    options.rows = [name.strip() for name in options.rows.split(",") if name.strip()]
    unknown = sorted(set(options.rows) - set(TARGET_NAMES))
    if unknown:
        parser.error(f"unknown rows: {', '.join(unknown)}")
    if options.scenarios is not None:
        options.scenarios = [name.strip() for name in options.scenarios.split(",") if name.strip()]
        unknown = sorted(set(options.scenarios) - set(SCENARIO_NAMES))
        if unknown:
            parser.error(f"unknown scenarios: {', '.join(unknown)}")
    return options


def main(argv: list[str] | None = None) -> int:
    options = parse_args(sys.argv[1:] if argv is None else argv)
    counts = QUICK if options.quick else FULL
    machine = machine_info()
    cores = machine["cpus"] or 1
    # the start-up figures first, on a machine no row has warmed or loaded yet; not with --scenarios
    checkouts = [REPO] if options.baseline is None else [REPO, options.baseline]
    for checkout in checkouts:  # fresh bytecode: stale .pyc files cost every start time and memory
        for package in ("bridge", "channels"):
            compileall.compile_dir(checkout / package, quiet=1)
    started = None
    if options.scenarios is None:
        runs = QUICK_STARTUP_RUNS if options.quick else startup.RUNS
        started = startup.measure(runs, options.baseline)
    names = options.rows
    if options.baseline is not None:  # each bridge row and the same row served by the baseline
        names = [variant for name in names for variant in _with_baseline(name, options.baseline_first)]
    rows = [run_row(name, counts, cores, options.scenarios, options.baseline) for name in names]
    header = (
        f"mcp-bridge benchmark ({'quick' if options.quick else 'full'} run): python {machine['python']}, "
        f"{cores} CPUs, {machine['socat']}, load at start {machine['loadavg_at_start'][0]:.2f}"
    )
    if started is not None:
        header += "\n\n" + startup.render(started)
    print(report.render(rows, counts, header))
    if options.out:
        out = Path(options.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "machine": machine,
            "quick": options.quick,
            "counts": asdict(counts),
            "startup": started,
            "rows": rows,
        }
        out.write_text(json.dumps(document, indent=2) + "\n")
    failed = any("error" in result for row in rows for result in row["results"].values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
