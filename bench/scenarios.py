"""The measurements. Each takes a started target and the run's counts and returns a dict of numbers.

Every scenario opens its own sessions (so a failure cannot leak into the next one), encodes all
requests before its clock starts, checks every reply (id and echoed text) and raises ``BenchError``
on the first bad one.
"""

from __future__ import annotations

import math
import select
import string
import time
from dataclasses import dataclass

import procfs
from wire import (
    IDLE_TIMEOUT_MS,
    IDLE_TIMEOUT_S,
    INITIALIZE,
    INITIALIZED,
    BenchError,
    check_initialize,
    echo_call,
    mismatch,
    open_session,
    parse_echo,
)

BUSY_THRESHOLD = 0.9  # a process busy this fraction of the wall time is the bottleneck
TEXT_ALPHABET = string.ascii_letters + string.digits  # one byte per character, no JSON escapes


@dataclass(frozen=True)
class Counts:
    setup_sessions: int  # sessions opened one after another for the setup time
    sequential_calls: int  # measured calls, one at a time
    warmup_calls: int  # unmeasured calls first (imports, caches, allocator)
    pipelined_calls: int
    pipeline_window: int  # calls in flight in the pipelined scenario
    clients: int  # concurrent sessions in the concurrent scenario
    calls_per_client: int
    large_sizes: tuple[int, ...]  # echo text sizes in bytes
    large_repeats: int  # round trips per size; the median is reported


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def make_text(size: int) -> str:
    repeats = size // len(TEXT_ALPHABET) + 1
    return (TEXT_ALPHABET * repeats)[:size]


def _echo_round_trip(conn, call_id: int, text: str, request: bytes) -> float:
    """Send one echo call, wait for its reply, check it; return the round-trip time in seconds."""
    started = time.perf_counter()
    conn.send(request)
    line = conn.read_one()
    elapsed = time.perf_counter() - started
    got_id, got_text = parse_echo(line)
    if got_id != call_id or got_text != text:
        raise mismatch(call_id, got_id, text, got_text)
    return elapsed


# -- session setup ----------------------------------------------------------------------------
# Pause between sessions in the spaced setup scenario: longer than a Python child takes to start,
# so a warm pool (--prespawn) is full again when the next client arrives, as with people or tools
# that connect now and then rather than in a tight loop.
SETUP_SPACING_S = 0.1


def spaced_setup_time(target, counts: Counts) -> dict:
    """Like :func:`setup_time`, with SETUP_SPACING_S between sessions (not counted)."""
    return setup_time(target, counts, spacing=SETUP_SPACING_S, sessions=counts.setup_sessions // 2)


def setup_time(target, counts: Counts, *, spacing: float = 0.0, sessions: int | None = None) -> dict:
    """Connect (or spawn, for direct) until the initialize result arrives, one session at a time."""
    times = []
    for number in range(sessions or counts.setup_sessions):
        if spacing and number:
            time.sleep(spacing)
        started = time.perf_counter()
        conn = target.connect()
        try:
            conn.send(INITIALIZE)
            line = conn.read_one()
            times.append(time.perf_counter() - started)
            check_initialize(line)
            conn.send(INITIALIZED)
        finally:
            conn.close()
    return {
        "sessions": len(times),
        "p50_ms": percentile(times, 0.5) * 1e3,
        "p90_ms": percentile(times, 0.9) * 1e3,
        "max_ms": max(times) * 1e3,
    }


# -- sequential latency -----------------------------------------------------------------------
def sequential(target, counts: Counts) -> dict:
    """Small echo calls one at a time on one session; per-call round-trip latency."""
    total = counts.warmup_calls + counts.sequential_calls
    texts = [f"sequential call {i}" for i in range(1, total + 1)]
    requests = [echo_call(i, text) for i, text in enumerate(texts, start=1)]
    conn = open_session(target.connect)
    try:
        latencies = [_echo_round_trip(conn, i, texts[i - 1], requests[i - 1]) for i in range(1, total + 1)][
            counts.warmup_calls :
        ]
    finally:
        conn.close()
    return {
        "calls": len(latencies),
        "p50_us": percentile(latencies, 0.5) * 1e6,
        "p99_us": percentile(latencies, 0.99) * 1e6,
        "mean_us": sum(latencies) / len(latencies) * 1e6,
        "max_us": max(latencies) * 1e6,
    }


# -- pipelined throughput and CPU cost --------------------------------------------------------
def _cpu_snapshot(target) -> dict:
    relay, server = target.relay_pids(), target.server_pids()
    return {
        "relay": procfs.cpu_seconds(relay),
        "server": procfs.cpu_seconds(server),
        "client": time.process_time(),  # this process, all threads (CLOCK_PROCESS_CPUTIME_ID)
        "relay_ticks": procfs.tick_cpu_seconds(relay),
        "machine": procfs.machine_cpu_seconds()[0],  # every process, ours included
    }


def _pipeline(conn, requests: list[bytes], texts: list[str], window: int) -> None:
    """Keep ``window`` calls in flight until all are answered; refills go out as one write."""
    total = len(requests)
    outstanding: set[int] = set(range(1, min(window, total) + 1))
    sent = len(outstanding)
    received = 0
    conn.send(b"".join(requests[:sent]))
    while received < total:
        lines = conn.read_lines()
        for line in lines:
            got_id, got_text = parse_echo(line)
            if got_id not in outstanding:
                raise BenchError(f"reply id {got_id!r} matches no call in flight")
            if got_text != texts[got_id - 1]:
                raise mismatch(got_id, got_id, texts[got_id - 1], got_text)
            outstanding.remove(got_id)
        received += len(lines)
        refill = min(total - sent, window - (sent - received))
        if refill > 0:
            conn.send(b"".join(requests[sent : sent + refill]))
            outstanding.update(range(sent + 1, sent + refill + 1))
            sent += refill


def _bottleneck(busy: dict[str, float | None], cores: int) -> str:
    """The process that is (nearly) always on a CPU, else the machine if it is full, else neither."""
    ours = {name: value for name, value in busy.items() if value is not None and name != "other"}
    name, value = max(ours.items(), key=lambda item: item[1])
    if value >= BUSY_THRESHOLD:
        return name
    if sum(ours.values()) + busy["other"] >= BUSY_THRESHOLD * cores:
        return f"all {cores} cores" + (" (other load)" if busy["other"] >= 1 - BUSY_THRESHOLD else "")
    return "none (wake-ups)"


def pipelined(target, counts: Counts, cores: int) -> dict:
    """``pipeline_window`` calls in flight on one session: throughput, and each process's CPU."""
    total = counts.pipelined_calls
    texts = [f"pipelined call {i}" for i in range(1, total + 1)]
    requests = [echo_call(i, text) for i, text in enumerate(texts, start=1)]
    conn = open_session(target.connect)
    try:
        conn.reserve(counts.pipeline_window)  # HTTP: one connection per call in flight, opened now
        before = _cpu_snapshot(target)
        started = time.perf_counter()
        _pipeline(conn, requests, texts, counts.pipeline_window)
        wall = time.perf_counter() - started
        after = _cpu_snapshot(target)
    finally:
        conn.close()
    cpu = {
        "client": after["client"] - before["client"],
        "server": procfs.cpu_delta(before["server"], after["server"]),
        "relay": procfs.cpu_delta(before["relay"], after["relay"]) if after["relay"] else None,
    }
    relay_ticks = procfs.cpu_delta(before["relay_ticks"], after["relay_ticks"]) if after["relay"] else None
    ours = sum(seconds for seconds in cpu.values() if seconds is not None)
    cpu["other"] = max(0.0, after["machine"] - before["machine"] - ours)  # everything else running
    busy = {name: None if seconds is None else seconds / wall for name, seconds in cpu.items()}
    return {
        "calls": total,
        "window": counts.pipeline_window,
        "wall_s": wall,
        "calls_per_s": total / wall,
        "cpu_us_per_call": {
            k: None if v is None else v / total * 1e6 for k, v in cpu.items() if k != "other"
        },
        "busy_fraction": busy,
        "bottleneck": _bottleneck(busy, cores),
        "relay_processes": len(after["relay"]),
        "relay_cpu_s": cpu["relay"],
        "relay_cpu_s_from_ticks": relay_ticks,  # utime+stime cross-check, 10 ms resolution
    }


# -- concurrent clients -----------------------------------------------------------------------
class _Client:
    """One concurrent session: initialize, then its echo calls one at a time."""

    def __init__(self, number: int, calls: int) -> None:
        self.number = number
        self.texts = [f"client {number} call {i}" for i in range(1, calls + 1)]
        self.requests = [echo_call(i, text) for i, text in enumerate(self.texts, start=1)]
        self.answered = 0
        self.initialized = False
        self.conn = None

    def progress(self) -> str:
        if not self.initialized:
            return "before the initialize result"
        return f"after {self.answered} of {len(self.requests)} calls"

    def on_line(self, line: bytes) -> bool:
        """Handle one reply and send what follows; True once the last call is answered."""
        if not self.initialized:
            check_initialize(line)
            self.initialized = True
            self.conn.send(INITIALIZED + self.requests[0])
            return False
        call_id = self.answered + 1
        got_id, got_text = parse_echo(line)
        if got_id != call_id or got_text != self.texts[call_id - 1]:
            raise mismatch(call_id, got_id, self.texts[call_id - 1], got_text)
        self.answered = call_id
        if call_id == len(self.requests):
            return True
        self.conn.send(self.requests[call_id])
        return False


def _drive(clients: list[_Client]) -> None:
    """Serve all sessions from one poll loop until each has its last reply."""
    by_fd = {client.conn.read_fd: client for client in clients}
    poller = select.poll()
    for fd in by_fd:
        poller.register(fd, select.POLLIN)
    unfinished = len(clients)
    while unfinished:
        events = poller.poll(IDLE_TIMEOUT_MS)
        if not events:
            raise BenchError(f"no progress for {IDLE_TIMEOUT_S:g} s, {unfinished} sessions unfinished")
        for fd, _ in events:
            client = by_fd[fd]
            try:
                for line in client.conn.read_available():
                    if client.on_line(line):
                        unfinished -= 1
                        poller.unregister(fd)
                        break
            except BenchError as error:
                raise BenchError(f"session {client.number} ({client.progress()}): {error}") from None


def run_sessions(target, clients: list[_Client]) -> None:
    """Connect each of ``clients`` to ``target``, initialize all, and drive their calls to the last
    reply from one poll loop; the sessions stay connected (:func:`close_sessions`)."""
    for client in clients:
        client.conn = target.connect()
    for client in clients:
        client.conn.send(INITIALIZE)
    _drive(clients)


def close_sessions(clients: list[_Client]) -> None:
    """Close every session of ``clients`` that was connected."""
    for client in clients:
        if client.conn is not None:
            client.conn.close()


def _relay_memory(target) -> dict | None:
    pids = target.relay_pids()
    if not pids:
        return None
    return {
        "processes": len(pids),
        "rss_kb": sum(procfs.rss_kb(pid) for pid in pids),
        "pss_kb": sum(procfs.pss_kb(pid) for pid in pids),
    }


def _total_memory(target) -> dict:
    """RSS of the relay processes plus every example server: what serving the sessions costs."""
    relay, servers = target.relay_pids(), target.server_pids()
    return {
        "processes": len(relay) + len(servers),
        "servers": len(servers),
        "rss_kb": sum(procfs.rss_kb(pid) for pid in relay + servers),
    }


def concurrent(target, counts: Counts) -> dict:
    """``clients`` sessions opened at once, each initialize + its calls; relay memory, and relay
    plus example servers, at the end."""
    clients = [_Client(number, counts.calls_per_client) for number in range(counts.clients)]
    started = time.perf_counter()
    try:
        run_sessions(target, clients)
        wall = time.perf_counter() - started
        memory = _relay_memory(target)  # every session is still connected here
        total_memory = _total_memory(target)
    finally:
        close_sessions(clients)
    calls = counts.clients * counts.calls_per_client
    return {
        "clients": counts.clients,
        "calls": calls,
        "wall_s": wall,
        "calls_per_s": calls / wall,
        "relay_memory": memory,
        "total_memory": total_memory,
    }


# -- string request ids -----------------------------------------------------------------------
# JSON-RPC ids may be strings, and a relay must return each exactly as it came. These two catch the
# usual ways of getting that wrong: a colon (a relay that prefixes ids with a session tag and splits
# them back on ':' cuts this one short) and digits only (a relay that parses ids as numbers returns
# the number 42).
STRING_IDS = ("abc:1", "42")


def string_ids(target, counts: Counts) -> dict:
    """Echo calls with string ids, one at a time; ``intact`` is whether every id came back as sent.

    A changed id is a finding, not an error (the reply is still checked to be the call's: same
    echoed text, and it is the only call in flight)."""
    conn = open_session(target.connect)
    returned = []
    try:
        for request_id in STRING_IDS:
            text = f"string id {request_id}"
            conn.send(echo_call(request_id, text))
            got_id, got_text = parse_echo(conn.read_one())
            if got_text != text:
                raise mismatch(got_id, got_id, text, got_text)
            returned.append(got_id)
    finally:
        conn.close()
    return {"intact": returned == list(STRING_IDS), "sent": list(STRING_IDS), "returned": returned}


# -- large messages ---------------------------------------------------------------------------
def large_echo(target, counts: Counts, size: int) -> dict:
    """Echo a text of ``size`` bytes, ``large_repeats`` times on one session; median round trip."""
    text = make_text(size)
    conn = open_session(target.connect)
    try:
        times = [
            _echo_round_trip(conn, call_id, text, echo_call(call_id, text))
            for call_id in range(1, counts.large_repeats + 1)
        ]
    finally:
        conn.close()
    return {"bytes": size, "repeats": len(times), "median_ms": percentile(times, 0.5) * 1e3,
            "min_ms": min(times) * 1e3}  # fmt: skip
