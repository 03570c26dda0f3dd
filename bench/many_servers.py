"""Many servers on one port: one mcp-bridge serving 10 servers on a shared listener, against 10
separate listeners (10 mcp-bridge processes, one server each) and 10 processes of each peer.

Run from the repository root::

    python bench/many_servers.py [--quick] [--rows bridge-one-port,bridge-10-ports,...]
                                 [--servers 10] [--clients 50] [--calls 200] [--out FILE.json]

Rows (every server is ``python bridge/example_server``, this interpreter, as in bench/run.py):

* ``bridge-one-port``: ``python -m bridge --config FILE``, the file declaring one shared listener
  (``[listeners.public]``, ``127.0.0.1:0``) and SERVERS servers mounted on it at
  ``/servers/sN/mcp``, each ``child = "shared"`` (one example server per server);
* ``bridge-10-ports``: SERVERS processes ``python -m bridge --listen http://127.0.0.1:0/mcp
  --child shared -- ...``, one server each (the ``bridge-http`` row of bench/run.py, times SERVERS);
* ``supergateway-http-10``, ``mcp-proxy-npm-10``, ``mcp-proxy-py-10``: SERVERS processes of that
  peer (bench/targets.py says how each is installed and run), one port each.

For each row: every process started (the bridge rows: until every server is mounted), then
CLIENTS Streamable HTTP sessions (bench/streamable_http.py, protocol 2025-06-18) opened one after
the other, client ``n`` on server ``n % SERVERS``; then, on the clock, every session makes CALLS
``echo`` calls one at a time, all sessions at once from one poll loop (bench/scenarios.py's
concurrent clients), every reply checked. Reported: calls/s over that window, and the relay's memory
with every session still open: RSS and PSS summed over the relay processes (the bridge or peer
processes, all their threads), never their children (the example servers). Loopback only; bounded
by CLIENTS x CALLS calls and by the benchmark's 10 s no-progress timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
import urllib.request
from pathlib import Path

import procfs
import relays
import targets
from scenarios import _Client, _drive, close_sessions
from streamable_http import http_connect
from wire import BenchError, open_session

SERVERS = 10  # servers on the one port, and processes in each separate row (issue 17's scenario)
CLIENTS = 50  # sessions spread over them
CALLS = 200  # calls per session, one at a time: 10,000 calls in all
QUICK_CALLS = 20  # --quick: a tenth
INDEX_POLL_S = 0.1  # between looks at the shared listener's index while its servers mount
ROWS = ("bridge-one-port", "bridge-10-ports", "supergateway-http-10", "mcp-proxy-npm-10", "mcp-proxy-py-10")


class OnePortTarget(relays.RelayTarget):
    """One mcp-bridge process, ``servers`` servers mounted on one shared HTTP listener."""

    def __init__(self, servers: int) -> None:
        self.names = [f"s{number}" for number in range(servers)]
        super().__init__("bridge-one-port", "http", "bridge")

    def _command(self) -> list[str]:
        config = Path(self._tempdir) / "servers.toml"
        text = f'[listeners.public]\nkind = "http"\naddress = "{relays.LOOPBACK}:0"\n'
        limit = relays.BRIDGE_MAX_MESSAGE  # as bench/run.py's bridge rows (and bridge-10-ports) have
        for name in self.names:
            text += (
                f"[servers.{name}]\ncommand = {json.dumps(relays.SERVER_COMMAND)}\n"
                f'child = "shared"\n[[servers.{name}.listeners]]\nshared = "public"\n'
                f'[servers.{name}.limits]\nmax_message = "{limit}"\nmax_child_message = "{limit}"\n'
            )
        config.write_text(text)
        return [relays.PYTHON, "-m", "bridge", "--config", str(config)]

    def _ready_pattern(self):
        return re.compile(rf"listening on http://{re.escape(relays.LOOPBACK)}:(\d+)/servers/")

    def start(self) -> None:
        """Started once the first server is mounted; ready once the index lists all serving."""
        super().start()
        index = f"http://{self.address[0]}:{self.address[1]}/servers"
        deadline = time.monotonic() + relays.READY_TIMEOUT_S
        while True:
            with urllib.request.urlopen(index, timeout=relays.READY_TIMEOUT_S) as response:
                states = {entry["name"]: entry["state"] for entry in json.load(response)["servers"]}
            if all(states.get(name) == "serving" for name in self.names):
                return
            if time.monotonic() > deadline:
                raise BenchError(f"not every server serving within {relays.READY_TIMEOUT_S:g} s: {states}")
            time.sleep(INDEX_POLL_S)

    def connects(self) -> list:
        return [
            lambda name=name: http_connect(self.address, f"/servers/{name}/mcp", self.http_stats)
            for name in self.names
        ]


def separate_targets(row: str, servers: int) -> list[relays.RelayTarget]:
    """``servers`` processes of one kind, a port and one server each."""
    if row == "bridge-10-ports":
        return [
            relays.RelayTarget(f"bridge-{n}", "http", "bridge", ("--child", "shared")) for n in range(servers)
        ]
    peer = row.removesuffix("-10")
    return [targets.make_target(peer) for _ in range(servers)]


def measure(connects: list, relay_pids, clients: int, calls: int) -> dict:
    """Open ``clients`` sessions spread over ``connects``, then time ``calls`` calls on each at once."""
    sessions = [_Client(number, calls) for number in range(clients)]
    try:
        for client in sessions:
            client.conn = open_session(connects[client.number % len(connects)])
            client.initialized = True  # the handshake is done: on_line expects echo replies
        pids = relay_pids()
        cpu_before, client_before = procfs.cpu_seconds(pids), time.process_time()
        started = time.perf_counter()
        for client in sessions:
            client.conn.send(client.requests[0])
        _drive(sessions)
        wall = time.perf_counter() - started
        relay_cpu = procfs.cpu_delta(cpu_before, procfs.cpu_seconds(pids))
        client_cpu = time.process_time() - client_before
        memory = {
            "processes": len(pids),
            "rss_kb": sum(procfs.rss_kb(pid) for pid in pids),
            "pss_kb": sum(procfs.pss_kb(pid) for pid in pids),
        }
    finally:
        close_sessions(sessions)
    total = clients * calls
    return {
        "clients": clients,
        "calls": total,
        "wall_s": wall,
        "calls_per_s": total / wall,
        "relay_cpu_us_per_call": relay_cpu / total * 1e6,  # all relay processes together
        "relay_busy": relay_cpu / wall,  # cores' worth: near 1.0 for one process is its limit
        "client_busy": client_cpu / wall,  # this process; near 1.0: the client is the limit
        "relay_memory": memory,
    }


def run_row(row: str, options: argparse.Namespace) -> dict:
    """Start the row's processes, measure, stop them; an error fails this row only."""
    group = (
        [OnePortTarget(options.servers)]
        if row == "bridge-one-port"
        else separate_targets(row, options.servers)
    )
    print(f"[{row}] starting {len(group)} process(es)", file=sys.stderr, flush=True)
    result: dict = {"name": row, "command": group[0].command, "processes": len(group), "notes": []}
    try:
        for target in group:
            target.start()
        if row == "bridge-one-port":
            connects = group[0].connects()
        else:
            connects = [target.connect for target in group]
        result.update(
            measure(
                connects,
                lambda: [pid for t in group for pid in t.relay_pids()],
                options.clients,
                options.calls,
            )
        )
    except Exception as error:
        result["error"] = str(error) or type(error).__name__
        result["stderr_notable"] = [line for target in group for line in target.stderr_notable()]
    finally:
        for target in group:
            result["notes"] += [
                note for note in target.stop() if not note.startswith("SIGTERM: exited with status 0")
            ]
    return result


def render(rows: list[dict], header: str) -> str:
    lines = [
        header,
        "",
        "| row | processes | calls/s | relay CPU/call | relay busy | client busy "
        "| relay RSS (sum) | relay PSS (sum) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['name']} | {row['processes']} | error: {row['error']} | | | | | |")
            continue
        memory = row["relay_memory"]
        lines.append(
            f"| {row['name']} | {memory['processes']} | {row['calls_per_s']:,.0f} | "
            f"{row['relay_cpu_us_per_call']:.0f} µs | {row['relay_busy']:.2f} | {row['client_busy']:.2f} | "
            f"{memory['rss_kb'] / 1024:.1f} MiB | {memory['pss_kb'] / 1024:.1f} MiB |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_CALLS} calls per client, a smoke run")
    parser.add_argument(
        "--rows", default=",".join(ROWS), help=f"comma-separated subset of: {', '.join(ROWS)}"
    )
    parser.add_argument("--servers", type=int, default=SERVERS)
    parser.add_argument("--clients", type=int, default=CLIENTS)
    parser.add_argument("--calls", type=int, default=None, help=f"per client (default {CALLS})")
    parser.add_argument("--out", metavar="FILE.json", help="also write the results as JSON")
    options = parser.parse_args(argv)
    options.calls = options.calls or (QUICK_CALLS if options.quick else CALLS)
    rows = [name.strip() for name in options.rows.split(",") if name.strip()]
    if unknown := sorted(set(rows) - set(ROWS)):
        parser.error(f"unknown rows: {', '.join(unknown)}")
    load = os.getloadavg()
    results = [run_row(row, options) for row in rows]
    header = (
        f"many servers on one port: {options.servers} servers, "
        f"{options.clients} clients x {options.calls} calls; "
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, load {load[0]:.2f} at start, "
        f"{os.getloadavg()[0]:.2f} at end"
    )
    print(render(results, header))
    if options.out:
        out = Path(options.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(
            json.dumps({"header": header, "options": vars(options), "rows": results}, indent=2) + "\n"
        )
    return 1 if any("error" in row for row in results) else 0


if __name__ == "__main__":
    sys.exit(main())
