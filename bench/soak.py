"""Soak and fault suite: the real bridge under load, while children die and clients misbehave.

    .venv/bin/python bench/soak.py [--duration 60] [--clients 5] [--configs all] [--kill-every 20]
                                   [--json PATH]

One ``python -m bridge`` per configuration (``CONFIGS``), the example server as its child, sockets
in a temporary directory or on loopback only. For ``--duration`` seconds, ``--clients``
well-behaved clients per configuration run the call mix (soak_tally.MIX) while the faults of
soak_faults.py run beside them. Then it checks the guarantees (:func:`checks`), prints a table,
writes the JSON summary, and exits 1 if any check failed. Progress goes to stderr every 5 s.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from typing import Any

import soak_clients
import soak_faults
import soak_http_clients
import trio
from soak_bridge import DRAIN_BUDGET_S, SoakBridge
from soak_report import checks, print_table, summary
from soak_tally import CANCEL_SLEEP_S, REPLY_MARGIN_S, Tally

# name: (listen address, --child mode, client kind); {dir} is the run's temporary directory.
CONFIGS = {
    "unix-per-connection": ("unix:{dir}/pc.sock", "per-connection", "stream"),
    "unix-shared": ("unix:{dir}/shared.sock", "shared", "stream"),
    "tcp": ("tcp:127.0.0.1:0", "per-connection", "stream"),
    "ws": ("ws://127.0.0.1:0/", "auto", "stream"),
    "http-legacy": ("http://127.0.0.1:0/mcp", "auto", "http-legacy"),
    "http-2026": ("http://127.0.0.1:0/mcp", "auto", "http-modern"),
}
SHARED = {"unix-shared", "http-2026"}  # one child answers every client, one request at a time
# The example server answers one request at a time, so in a shared configuration a request waits
# behind every other client's: its bound grows by this much per client (the mix's mean work per
# call, about 0.25 s, times the two calls each client keeps in flight).
SHARED_QUEUE_S_PER_CLIENT = 0.5
SAMPLE_EVERY_S = 1.0  # /proc samples of each bridge
PROGRESS_EVERY_S = 5.0
SETTLE_S = 20.0  # after the load, how long fds and processes may take to come back down
# The load phase ends when every client's last request is answered or past its bound; past this
# much after --duration it is cut short (and that is a failure).
OVERRUN_S = REPLY_MARGIN_S + CANCEL_SLEEP_S + soak_faults.SLOW_READER_STALL_S + 30.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load (default: 60)")
    parser.add_argument("--clients", type=int, default=5, help="well-behaved clients per configuration")
    parser.add_argument("--configs", default="all", help=f"comma-separated, of: {', '.join(CONFIGS)}")
    parser.add_argument(
        "--kill-every", type=float, default=20.0, help="SIGKILL a child this often (0: never)"
    )
    parser.add_argument("--json", metavar="PATH", help="write the summary here")
    options = parser.parse_args(argv)
    options.configs = list(CONFIGS) if options.configs == "all" else options.configs.split(",")
    unknown = set(options.configs) - set(CONFIGS)
    if unknown:
        parser.error(f"--configs: unknown {sorted(unknown)}; choose from {', '.join(CONFIGS)}")
    return options


def host_port(address: str) -> tuple[str, int, str]:
    rest = address.split("://", 1)[1]
    hostport, _, path = rest.partition("/")
    host, port = hostport.rsplit(":", 1)
    return host, int(port), "/" + path


async def guarded(tally: Tally, task: Any, *args: Any) -> None:
    """Run one client or fault task; a crash of the soak's own code is a failure, not the end."""
    try:
        await task(*args)
    except Exception as exc:
        tally.fail(f"soak task {task.__name__} crashed: {exc!r}")
        print(f"soak task {task.__name__} crashed: {exc!r}", file=sys.stderr)


async def run_load(
    name: str,
    bridge: SoakBridge,
    tally: Tally,
    options: argparse.Namespace,
    stop_at: float,
    nursery: trio.Nursery,
) -> None:
    """Start the clients and the faults of one configuration in ``nursery``."""
    kind = CONFIGS[name][2]
    address = bridge.address
    if options.kill_every > 0:
        nursery.start_soon(
            guarded,
            tally,
            soak_faults.killer,
            bridge.pid,
            tally,
            options.kill_every,
            stop_at,
            bridge.child_peers,
        )
    for index in range(options.clients):
        seed = hash((name, index)) & 0xFFFFFFFF
        if kind == "stream":
            nursery.start_soon(guarded, tally, soak_clients.stream_client, address, tally, seed, stop_at)
        else:
            host, port, path = host_port(address)
            client = (
                soak_http_clients.http_legacy_client
                if kind == "http-legacy"
                else soak_http_clients.http_modern_client
            )
            nursery.start_soon(guarded, tally, client, host, port, path, tally, seed, stop_at)
    if kind == "stream":
        nursery.start_soon(guarded, tally, soak_faults.stream_bad_inputs, address, tally, stop_at)
        nursery.start_soon(guarded, tally, soak_faults.stream_vanishers, address, tally, stop_at)
        nursery.start_soon(guarded, tally, soak_faults.stream_slow_readers, address, tally, stop_at)
        nursery.start_soon(guarded, tally, soak_faults.half_open, address, None, tally, stop_at)
    else:
        host, port, path = host_port(address)
        nursery.start_soon(guarded, tally, soak_faults.http_bad_inputs, host, port, path, tally, stop_at)
        nursery.start_soon(
            guarded,
            tally,
            soak_faults.http_vanishers,
            host,
            port,
            path,
            tally,
            stop_at,
            kind == "http-modern",
        )
        nursery.start_soon(guarded, tally, soak_faults.half_open, host, port, tally, stop_at)
        if kind == "http-legacy":
            nursery.start_soon(guarded, tally, soak_faults.http_resumers, host, port, path, tally, stop_at)


async def sampler(
    bridges: dict[str, SoakBridge],
    samples: dict[str, list[dict[str, Any]]],
    tallies: dict[str, Tally],
    t0: float,
    stop_at: float,
    done: trio.Event,
) -> None:
    """Sample every bridge each second; print a progress line every few seconds; note early exits."""
    last_progress = t0
    while not done.is_set():
        now = trio.current_time()
        for name, bridge in bridges.items():
            if bridge.running():
                samples[name].append({"t": round(now - t0, 1), **bridge.sample()})
            elif not bridge.exited_early:
                bridge.exited_early = True
                tallies[name].fail(f"the bridge exited during the run: {list(bridge.tail)[-3:]}")
        if now - last_progress >= PROGRESS_EVERY_S:
            last_progress = now
            sent = sum(t.sent for t in tallies.values())
            answered = sum(t.answered + t.cancelled_answered for t in tallies.values())
            lost = sum(t.lost for t in tallies.values())
            dup = sum(t.duplicated for t in tallies.values())
            kills = sum(t.faults["child killed"] for t in tallies.values())
            bad = sum(sum(t.bad_inputs.values()) for t in tallies.values())
            phase = "load" if now < stop_at else "drain"
            print(
                f"[{now - t0:6.0f}s {phase}] sent {sent} answered {answered} lost {lost} duplicated {dup} "
                f"kills {kills} bad inputs {bad}",
                file=sys.stderr,
                flush=True,
            )
        with trio.move_on_after(SAMPLE_EVERY_S):
            await done.wait()


async def settle(bridge: SoakBridge, start: dict[str, int]) -> dict[str, int]:
    """Wait up to :data:`SETTLE_S` for fds and processes to come back to their start; the end sample."""
    with trio.move_on_after(SETTLE_S):
        while True:
            now = bridge.sample()
            if now["procs"] <= start["procs"] and now["fds"] <= start["fds"]:
                break
            await trio.sleep(0.5)
    return bridge.sample()


async def soak(options: argparse.Namespace) -> dict[str, Any]:
    tallies = {name: Tally(name) for name in options.configs}
    for name in SHARED & set(tallies):
        tallies[name].queue_allowance_s = SHARED_QUEUE_S_PER_CLIENT * options.clients
    samples: dict[str, list[dict[str, Any]]] = {name: [] for name in options.configs}
    with tempfile.TemporaryDirectory(prefix="mcp-soak-") as tmp:
        bridges = {
            name: SoakBridge(name, CONFIGS[name][0].format(dir=tmp), CONFIGS[name][1])
            for name in options.configs
        }
        async with trio.open_nursery() as logs:
            for bridge in bridges.values():
                await bridge.start(logs)
            await trio.sleep(1.0)  # auto and shared modes start their child eagerly: let it settle
            start = {name: bridge.sample() for name, bridge in bridges.items()}
            start_fds = {name: bridge.fd_kinds() for name, bridge in bridges.items()}
            t0 = trio.current_time()
            stop_at = t0 + options.duration
            done = trio.Event()
            wall = time.time()
            async with trio.open_nursery() as sampling:
                sampling.start_soon(sampler, bridges, samples, tallies, t0, stop_at, done)
                with trio.move_on_at(stop_at + OVERRUN_S) as overrun:
                    async with trio.open_nursery() as load:
                        for name, bridge in bridges.items():
                            await run_load(name, bridge, tallies[name], options, stop_at, load)
                if overrun.cancelled_caught:
                    for tally in tallies.values():
                        tally.fail(f"the load phase ran {OVERRUN_S:.0f} s past --duration and was cut short")
                done.set()
            load_s = trio.current_time() - t0
            end = {name: await settle(bridge, start[name]) for name, bridge in bridges.items()}
            running = {name: bridge.running() for name, bridge in bridges.items()}
            end_fds = {name: bridge.fd_kinds() for name, bridge in bridges.items()}
            stops = {}
            for name, bridge in bridges.items():
                stops[name] = await bridge.stop()
        result = summary(options, tallies, bridges, samples, start, end, running, stops, wall, load_s)
    for name, config in result["configs"].items():
        config["bridge"]["fd_kinds"] = {"start": start_fds[name], "end": end_fds[name]}
    result["checks"] = checks(result, DRAIN_BUDGET_S)
    return result


def main(argv: list[str]) -> int:
    options = parse_args(argv)
    result = trio.run(soak, options)
    print_table(result)
    if options.json:
        with open(options.json, "w") as file:
            json.dump(result, file, indent=2)
    return 0 if all(check["ok"] for check in result["checks"]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
