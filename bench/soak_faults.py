"""The soak's faults, run beside the well-behaved clients; every loop is bounded in count and time.

Each fault task owns the connections it opens and closes them before it returns, and writes only
its configuration's :class:`~soak_tally.Tally` (``faults`` and ``bad_inputs`` counters; a
``failures`` line when the bridge broke a rule: a bad input left unanswered past
:data:`BAD_INPUT_BOUND_S`, a 5xx, a resumption that lost the reply).
"""

from __future__ import annotations

import json
import os
import random
import signal
from collections.abc import Mapping
from typing import Any

import procfs
import trio
import trio_websocket
from soak_clients import INITIALIZED, KILL_WINDOW_S, WsStream, initialize, opened
from soak_http import LEGACY, HttpClosed, HttpConn, post
from soak_tally import Tally, tools_call

MAX_MESSAGE = 256 * 1024  # the bridges run with --max-message 256KiB, so an over-limit input is cheap
BAD_INPUT_BOUND_S = 10.0  # a bad input must be answered (an error, a 4xx, a close) within this
BAD_INPUT_EVERY_S = 1.0  # one bad input per configuration per second
VANISH_EVERY_S = 3.0  # a client vanishing mid-request every 3 s per configuration
SLOW_READER_EVERY_S = 45.0  # a slow reader starts every 45 s per configuration ...
SLOW_READER_STALL_S = 30.0  # ... and reads nothing for 30 s (the figure)
SLOW_READER_BLOBS = 4  # 1 MiB replies it asks for and does not read
HALF_OPEN = 2  # idle connections per configuration, held from start to stop
RESUME_EVERY_S = 5.0  # an HTTP client drops its event stream and resumes every 5 s
DEEP = 1000  # nesting of the deep object (the 1000-deep object)


def _line(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


BAD_LINES: dict[str, bytes] = {
    "invalid JSON": b'{"jsonrpc": "2.0", "id": \n',
    "invalid UTF-8": b'{"jsonrpc":"2.0","id":1,"method":"ping","x":"\xff\xfe"}\n',
    "over-limit line": b'{"jsonrpc":"2.0","id":1,"method":"ping","x":"' + b"a" * MAX_MESSAGE + b'"}\n',
    "JSON array": _line([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]),
    "response-shaped": _line({"jsonrpc": "2.0", "id": 7, "result": {}}),
    "1000-deep object": b'{"jsonrpc":"2.0","id":1,"method":"ping","params":'
    + b'{"a":' * DEEP
    + b"1"
    + b"}" * DEEP
    + b"}\n",
}


async def killer(pid: int, tally: Tally, every_s: float, stop_at: float, peers: Mapping[int, str]) -> None:
    """SIGKILL one child of the bridge ``pid`` every ``every_s`` until ``stop_at``.

    ``peers`` maps a child's pid to the peer of the connection it serves (from the bridge's log);
    the kill is noted against that connection too, for the closing window (:mod:`soak_tally`).
    """
    rng = random.Random(pid)
    await trio.sleep(every_s * rng.uniform(0.5, 1.0))  # staggered over the configurations
    while trio.current_time() < stop_at:
        children = [child for child in procfs.children(pid) if procfs.is_alive(child)]
        if children:
            victim = rng.choice(children)
            try:
                os.kill(victim, signal.SIGKILL)
                tally.kills.append(trio.current_time())
                if (peer := peers.get(victim)) is not None:
                    tally.killed_peers[peer] = trio.current_time()
                tally.faults["child killed"] += 1
            except ProcessLookupError:
                pass
        await trio.sleep(every_s)


async def _send_raw(conn: Any, data: bytes, binary: bool = False) -> None:
    if isinstance(conn, WsStream):
        await conn.ws.send_message(data if binary else data.decode(errors="replace").rstrip("\n"))
    else:
        await conn.stream.send_all(data)


PROBE = _line({"jsonrpc": "2.0", "id": "probe", "method": "ping"})


async def _outcome(conn: Any) -> str:
    """What the bridge did after a bad input and a ``ping``: an error reply (its reason), the ping's
    answer alone (the input was dropped, as a response to nothing is), or a close."""
    try:
        await _send_raw(conn, PROBE)
        message = await conn.receive()
    except (trio_websocket.ConnectionClosed, trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        return "closed"
    if message is None:
        return "closed"
    error = message.get("error") if isinstance(message, dict) else None
    if error:
        data = error.get("data") or {}
        return f"{error.get('code')} {data.get('reason', '')}".strip()
    return "dropped, connection usable" if message.get("id") == "probe" else "answered"


CLOSED = (OSError, trio.BrokenResourceError, trio_websocket.HandshakeError, trio_websocket.ConnectionClosed)


async def stream_bad_inputs(address: str, tally: Tally, stop_at: float) -> None:
    """One bad input per :data:`BAD_INPUT_EVERY_S` on a fresh connection, until ``stop_at``."""
    kinds = list(BAD_LINES) + (["binary frame"] if address.startswith("ws://") else [])
    for index in range(int((stop_at - trio.current_time()) / BAD_INPUT_EVERY_S)):
        if trio.current_time() >= stop_at:
            break
        kind = kinds[index % len(kinds)]
        try:
            # the ping that follows queues behind every client at a shared child
            with trio.fail_after(BAD_INPUT_BOUND_S + tally.queue_allowance_s):
                async with opened(address) as conn:
                    if kind == "binary frame":
                        await _send_raw(
                            conn, _line({"jsonrpc": "2.0", "id": 1, "method": "ping"}), binary=True
                        )
                    else:
                        await _send_raw(conn, BAD_LINES[kind])
                    tally.bad_inputs[f"{kind}: {await _outcome(conn)}"] += 1
        except trio.TooSlowError:
            tally.fail(f"bad input {kind!r}: no answer and no close within {BAD_INPUT_BOUND_S:.0f} s")
        except trio_websocket.ConnectionClosed as exc:
            code = exc.reason.code if exc.reason is not None else None
            tally.bad_inputs[f"{kind}: closed ({code})"] += 1
        except CLOSED as exc:
            tally.bad_inputs[f"{kind}: {type(exc).__name__}"] += 1
        await trio.sleep(BAD_INPUT_EVERY_S)


def _raw_post(path: str, body: bytes, headers: str = "", content_type: str = "application/json") -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json, text/event-stream\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n{headers}\r\n"
    )
    return head.encode() + body


def http_bad_requests(path: str) -> dict[str, bytes]:
    ping = _line({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    call = _line(tools_call(1, "echo", {"text": "x"}))
    bad = {kind: _raw_post(path, line) for kind, line in BAD_LINES.items()}
    bad.update(
        {
            "malformed header": f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nno colon here\r\n\r\n".encode(),
            "oversized header": _raw_post(path, ping, f"X-Big: {'a' * 200_000}\r\n"),
            "bad chunked": (
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json, text/event-stream\r\n"
                "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"
            ).encode(),
            "wrong content type": _raw_post(path, ping, content_type="text/plain"),
            "unknown session": _raw_post(
                path, call, f"Mcp-Session-Id: {'ab' * 16}\r\nMCP-Protocol-Version: {LEGACY}\r\n"
            ),
        }
    )
    return bad


async def http_bad_inputs(host: str, port: int, path: str, tally: Tally, stop_at: float) -> None:
    """One bad HTTP request per :data:`BAD_INPUT_EVERY_S` on a fresh connection; a 4xx or a close
    is fine, a 5xx or silence past the bound is a failure."""
    requests = http_bad_requests(path)
    kinds = list(requests)
    for index in range(int((stop_at - trio.current_time()) / BAD_INPUT_EVERY_S)):
        if trio.current_time() >= stop_at:
            break
        kind = kinds[index % len(kinds)]
        stream = None
        try:
            with trio.fail_after(BAD_INPUT_BOUND_S):
                stream = await trio.open_tcp_stream(host, port)
                outcome = "closed"
                try:
                    await stream.send_all(requests[kind])
                    head = b""
                    while b"\r\n" not in head and (data := await stream.receive_some(4096)):
                        head += data
                    if head.startswith(b"HTTP/1.1 "):
                        outcome = head[9:12].decode()
                except (trio.BrokenResourceError, OSError):
                    outcome = "reset"
                tally.bad_inputs[f"{kind}: {outcome}"] += 1
                if outcome.startswith("5"):
                    tally.fail(f"bad HTTP input {kind!r} got {outcome}")
        except trio.TooSlowError:
            tally.fail(f"bad HTTP input {kind!r}: no answer and no close within {BAD_INPUT_BOUND_S:.0f} s")
        except OSError as exc:
            tally.bad_inputs[f"{kind}: {type(exc).__name__}"] += 1
        finally:
            if stream is not None:
                with trio.move_on_after(1):
                    await stream.aclose()
        await trio.sleep(BAD_INPUT_EVERY_S)


async def stream_vanishers(address: str, tally: Tally, stop_at: float) -> None:
    """Every :data:`VANISH_EVERY_S`: initialize, ask for a slow and a large reply, vanish."""
    rng = random.Random(address)
    calls = [initialize(0), INITIALIZED, tools_call(1, "sleep", {"seconds": 1.0})]
    calls.append(tools_call(2, "blob", {"size": 1 << 20}))
    for _ in range(int((stop_at - trio.current_time()) / VANISH_EVERY_S)):
        if trio.current_time() >= stop_at:
            break
        try:
            with trio.move_on_after(5):
                async with opened(address) as conn:
                    for message in calls:
                        await _send_raw(conn, _line(message))
                    await trio.sleep(rng.uniform(0.0, 0.5))
                    tally.faults["vanished mid-request"] += 1
        except CLOSED:
            pass
        await trio.sleep(VANISH_EVERY_S)


async def stream_slow_readers(address: str, tally: Tally, stop_at: float) -> None:
    """Every :data:`SLOW_READER_EVERY_S`: ask for 1 MiB replies and read nothing for 30 s."""
    for _ in range(max(1, int((stop_at - trio.current_time()) / SLOW_READER_EVERY_S))):
        if trio.current_time() >= stop_at:
            break
        try:
            with trio.move_on_after(SLOW_READER_STALL_S + 5):
                async with opened(address) as conn:
                    await _send_raw(conn, _line(initialize(0)) + _line(INITIALIZED))
                    for request_id in range(1, SLOW_READER_BLOBS + 1):
                        await _send_raw(conn, _line(tools_call(request_id, "blob", {"size": 1 << 20})))
                    tally.faults["slow reader (30 s)"] += 1
                    await trio.sleep(SLOW_READER_STALL_S)
        except CLOSED:
            pass
        rest = max(0.0, stop_at - trio.current_time())
        await trio.sleep(min(SLOW_READER_EVERY_S - SLOW_READER_STALL_S, rest))


async def half_open(host_or_address: str, port: int | None, tally: Tally, stop_at: float) -> None:
    """Hold :data:`HALF_OPEN` connections that send nothing, from now until ``stop_at``."""
    streams: list[trio.abc.Stream] = []
    try:
        for _ in range(HALF_OPEN):
            if port is None and host_or_address.startswith("unix:"):
                streams.append(await trio.open_unix_socket(host_or_address[5:]))
            elif port is None:
                host, text = host_or_address.split("://")[-1].removeprefix("tcp:").rstrip("/").rsplit(":", 1)
                streams.append(await trio.open_tcp_stream(host, int(text)))
            else:
                streams.append(await trio.open_tcp_stream(host_or_address, port))
            tally.faults["half-open connection held"] += 1
        await trio.sleep_until(stop_at)
    finally:
        for stream in streams:
            with trio.move_on_after(1):
                await stream.aclose()


async def http_vanishers(host: str, port: int, path: str, tally: Tally, stop_at: float, modern: bool) -> None:
    """Every :data:`VANISH_EVERY_S`: POST a slow call and close before its answer."""
    for _ in range(int((stop_at - trio.current_time()) / VANISH_EVERY_S)):
        if trio.current_time() >= stop_at:
            break
        conn = None
        try:
            conn = await HttpConn.open(host, port)
            message = tools_call(1, "sleep", {"seconds": 1.0})
            if modern:
                from soak_http import MODERN_META

                message["params"]["_meta"] = MODERN_META
            with trio.move_on_after(0.3):
                await post(conn, path, message, None, modern=modern)
            tally.faults["vanished mid-request"] += 1
        except (OSError, HttpClosed):
            pass
        finally:
            if conn is not None:
                await conn.aclose()
        await trio.sleep(VANISH_EVERY_S)


async def http_resumers(host: str, port: int, path: str, tally: Tally, stop_at: float) -> None:
    """Every :data:`RESUME_EVERY_S`: a legacy session POSTs a slow call with progress, drops the
    event stream after its first events, and fetches the reply with ``Last-Event-ID``."""
    for index in range(int((stop_at - trio.current_time()) / RESUME_EVERY_S)):
        if trio.current_time() >= stop_at:
            break
        conn = None
        try:
            with trio.fail_after(30):
                conn = await HttpConn.open(host, port)
                answer = await post(conn, path, initialize(0))
                session = answer.headers.get("mcp-session-id")
                if session is None:
                    tally.faults[f"resume: no session ({answer.status})"] += 1
                    continue
                await post(conn, path, INITIALIZED, session)
                call = tools_call(1, "sleep", {"seconds": 1.5}, f"resume{index}")
                dropped = await post(conn, path, call, session, stop_after_events=2)
                await conn.aclose()
                conn = await HttpConn.open(host, port)
                if dropped.last_event_id is None:
                    tally.faults["resume: no event id to resume from"] += 1
                    continue
                headers = [
                    ("accept", "text/event-stream"),
                    ("mcp-session-id", session),
                    ("mcp-protocol-version", LEGACY),
                    ("last-event-id", dropped.last_event_id),
                ]
                # At once, as the SDKs may: the bridge need not have noticed the drop yet (a
                # resumption takes over a stream still attached to its old connection).
                resumed = await conn.exchange("GET", path, headers)
                replies = [
                    m for m in dropped.messages + resumed.messages if isinstance(m, dict) and m.get("id") == 1
                ]
                if len(replies) == 1:
                    tally.faults["stream dropped and resumed with Last-Event-ID"] += 1
                elif resumed.status == 404 and tally.killed_recently(KILL_WINDOW_S):
                    tally.faults["resume: session ended by a kill first"] += 1
                else:
                    tally.fail(f"resume with Last-Event-ID: {len(replies)} replies (status {resumed.status})")
                await conn.exchange("DELETE", path, [("mcp-session-id", session)])
        except trio.TooSlowError:
            tally.fail("resume with Last-Event-ID: no reply within 30 s")
        except (OSError, HttpClosed) as exc:
            tally.faults[f"resume: {type(exc).__name__}"] += 1
        finally:
            if conn is not None:
                await conn.aclose()
        await trio.sleep(RESUME_EVERY_S)
