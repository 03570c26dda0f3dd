"""One busy legacy HTTP session through a client connection pool (issue 15's 'client-too-slow').

Starts ``python -m bridge --listen http://127.0.0.1:0/mcp -- python -m bridge.example_server``
from ``--tree`` (a checkout of this repository, so an older commit can be measured the same way),
initialises one legacy session with raw HTTP, then has ``--workers`` tasks POST ``tools/call``
requests on it through one ``httpx.AsyncClient`` pool (``--max-connections``,
``--keepalive``) until ``--duration`` seconds or ``--max-requests`` have passed, or the session
ends. Prints one JSON line: requests answered, how the session ended (if it did) and when, the
client's CPU share, and the bridge's log lines that name the session's end::

    python bench/busy_session.py --tree . --duration 45 --sizes 100,100000,1000000
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx
import trio

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
VERSION = "2025-06-18"
STARTUP = 20.0  # seconds the bridge may take to bind (an interpreter start-up, loaded machine)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--python", default=sys.executable, help="the interpreter that runs the bridge")
    parser.add_argument("--workers", type=int, default=150)
    parser.add_argument("--max-connections", type=int, default=100)
    parser.add_argument("--keepalive", type=int, default=20, help="max_keepalive_connections")
    parser.add_argument("--duration", type=float, default=45.0)
    parser.add_argument("--max-requests", type=int, default=200_000)
    parser.add_argument("--sizes", default="100,10000,100000", help="blob sizes, chosen at random")
    parser.add_argument("--slow", type=float, default=0.0, help="share of calls that sleep --slow-seconds")
    parser.add_argument("--slow-seconds", type=float, default=1.0)
    parser.add_argument("--progress", type=float, default=0.0, help="share of calls with progress events")
    parser.add_argument("--get-stream", action="store_true", help="open the standalone GET stream")
    parser.add_argument("--bridge-arg", action="append", default=[], help="extra bridge option (repeat)")
    parser.add_argument(
        "--read-rate", type=float, default=0.0, help="read each response at most this fast (B/s)"
    )
    parser.add_argument("--parse", action="store_true", help="parse each body as JSON (SSE: each event)")
    parser.add_argument("--bridge-cpu", default=None, help="run the bridge under taskset -c CPUS")
    parser.add_argument("--log", default=None, help="write the bridge's stderr here")
    return parser.parse_args(argv)


def call(request_id: int, options: argparse.Namespace, sizes: list[int]) -> dict[str, Any]:
    roll = random.random()
    meta: dict[str, Any] = {"progressToken": request_id}
    if roll < options.slow:
        name, arguments = "sleep", {"seconds": options.slow_seconds * random.random()}
    elif roll < options.slow + options.progress:
        name, arguments = "progress", {"steps": 3}
    else:
        name, arguments = "blob", {"size": random.choice(sizes)}
    params = {"name": name, "arguments": arguments, "_meta": meta}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def drive(url: str, options: argparse.Namespace, tally: dict[str, Any]) -> None:
    sizes = [int(size) for size in options.sizes.split(",")]
    limits = httpx.Limits(
        max_connections=options.max_connections, max_keepalive_connections=options.keepalive
    )
    async with httpx.AsyncClient(limits=limits, timeout=120) as client:
        init = {
            "protocolVersion": VERSION,
            "capabilities": {},
            "clientInfo": {"name": "busy", "version": "1"},
        }
        response = await client.post(
            url, headers=HEADERS, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}
        )
        response.raise_for_status()
        headers = {
            **HEADERS,
            "mcp-session-id": response.headers["mcp-session-id"],
            "mcp-protocol-version": VERSION,
        }
        sent = await client.post(
            url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
        )
        assert sent.status_code == 202, sent.text
        next_id = iter(range(1, options.max_requests + 1))
        started = trio.current_time()
        deadline = started + options.duration

        async with trio.open_nursery() as nursery:

            async def standalone() -> None:
                get_headers = {**headers, "accept": "text/event-stream"}
                async with client.stream("GET", url, headers=get_headers) as stream:
                    async for chunk in stream.aiter_bytes():
                        tally["get_bytes"] += len(chunk)

            async def worker() -> None:
                for request_id in next_id:
                    if trio.current_time() > deadline or tally["ended_at"] is not None:
                        return
                    message = call(request_id, options, sizes)
                    async with client.stream("POST", url, headers=headers, json=message) as response:
                        parts = []
                        async for chunk in response.aiter_bytes(16384):
                            parts.append(chunk)
                            if options.read_rate:
                                await trio.sleep(len(chunk) / options.read_rate)
                        body = b"".join(parts)
                    if options.parse:
                        for line in body.splitlines() if body[:1] != b"{" else [body]:
                            if line.startswith(b"data: "):
                                line = line[6:]
                            if line.startswith(b"{"):
                                json.loads(line)
                    tally["bytes"] += len(body)
                    if response.status_code == 404:
                        tally["404"] += 1
                    elif b"session-ended" in body:
                        tally["session_ended"] += 1
                    elif response.status_code == 200 and b'"result"' in body:
                        tally["answered"] += 1
                        continue
                    else:
                        tally["other"] += 1
                        tally.setdefault("other_sample", body[:200].decode(errors="replace"))
                    if tally["ended_at"] is None:
                        tally["ended_at"] = round(trio.current_time() - started, 1)

            if options.get_stream:
                nursery.start_soon(standalone)
            async with trio.open_nursery() as workers:
                for _ in range(options.workers):
                    workers.start_soon(worker)
            nursery.cancel_scope.cancel()
        tally["seconds"] = round(trio.current_time() - started, 1)


async def main(options: argparse.Namespace) -> dict[str, Any]:
    tree = Path(options.tree).resolve()
    argv = [
        options.python, "-m", "bridge", "--listen", "http://127.0.0.1:0/mcp", *options.bridge_arg,
        "--", options.python, "-m", "bridge.example_server",  # from the tree: its cwd
    ]  # fmt: skip
    if options.bridge_cpu:
        argv = ["taskset", "-c", options.bridge_cpu, *argv]
    log = open(options.log or "/dev/null", "w+b")
    tally: dict[str, Any] = dict.fromkeys(
        ("answered", "session_ended", "404", "other", "bytes", "get_bytes"), 0
    )
    tally["ended_at"] = None
    cpu, wall = time.process_time(), time.monotonic()
    lines: list[str] = []
    async with trio.open_nursery() as nursery:
        process = await nursery.start(
            lambda task_status: trio.run_process(
                argv,
                cwd=tree,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                check=False,
                task_status=task_status,
            )
        )
        assert process.stderr is not None
        found = trio.Event()
        url: list[str] = []

        async def read_log() -> None:
            buffer = b""
            async for data in process.stderr:
                log.write(data)
                buffer += data
                *complete, buffer = buffer.split(b"\n")
                for line in complete:
                    text = line.decode(errors="replace")
                    if not url and (match := re.search(r"listening on (http://\S+)", text)):
                        url.append(match.group(1))
                        found.set()
                    if re.search(r"too.slow|read nothing|session .* (ended|evicted)|Traceback|ERROR", text):
                        lines.append(text[-300:])

        nursery.start_soon(read_log)
        with trio.fail_after(STARTUP):
            await found.wait()
        cpu, wall = time.process_time(), time.monotonic()
        await drive(url[0], options, tally)
        tally["client_cpu"] = round((time.process_time() - cpu) / (time.monotonic() - wall), 2)
        process.terminate()
    tally["bridge_lines"] = lines[:10]
    return tally


if __name__ == "__main__":
    arguments = parse_args(sys.argv[1:])
    print(json.dumps({"args": vars(arguments), **trio.run(main, arguments)}))
