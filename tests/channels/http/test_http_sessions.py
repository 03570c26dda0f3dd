"""Legacy HTTP sessions' bounds: what a session keeps, when its client is too slow, the session cap.

* Backpressure (:class:`~channels._http.server.stream.Backlog`) ends a session as too slow only
  when its client reads nothing for the send timeout, not when it reads steadily while the backlog
  stays over its limit (many responses in flight, each read at its own pace). Virtual time.
* A session answering with many event streams keeps only the newest :data:`KEPT_STREAMS` of them
  (for ``Last-Event-ID``), and a deleted session frees everything (real bridge, real child, raw HTTP client).
* At ``max_sessions``, the least recently used idle session is evicted (its child stopped, the
  eviction counted) and its client gets 404; when every session is busy, 503 with Retry-After.
"""

from __future__ import annotations

import gc
import json
import socket
import sys
import weakref
from functools import partial
from typing import Any

import httpx2 as httpx
import pytest
import trio
import trio.testing
from mcp.shared.exceptions import MCPError
from sdkhttp import http_client, texts

from bridge import Daemon, Limits
from channels import HttpOptions, ListenOptions, SendTimeout
from channels._http.server import backlog as backlog_module
from channels._http.server import front
from channels._http.server.backlog import BACKLOG_LIMIT, Backlog
from channels._http.server.session import KEPT_STREAMS, SessionChannel

from conftest import poll, running_bridge

EXAMPLE = (sys.executable, "-m", "bridge.example_server")
TIMEOUT = 30  # seconds for a whole I/O test: a daemon, a child or two, some hundred round trips
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
VERSION = "2025-06-18"  # a legacy version whose clients do not resume (no priming events)
CHUNK = 64 * 1024


# -- backpressure: too slow only when the client reads nothing -------------------------------------


async def test_a_client_that_reads_steadily_is_not_too_slow_while_its_backlog_stays_over_the_limit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    backlog = Backlog()
    backlog.add(BACKLOG_LIMIT + 20 * CHUNK)  # 20 responses' worth over the limit
    timeout = 30.0
    async with trio.open_nursery() as nursery:

        async def read_steadily() -> None:  # one response read every 10 s: 200 s in all
            for _ in range(21):
                await trio.sleep(timeout / 3)
                backlog.remove(CHUNK)

        nursery.start_soon(read_steadily)
        started = trio.current_time()
        await backlog.make_room(timeout)  # raised SendTimeout after 30 s before the fix
        assert trio.current_time() - started > timeout  # it did wait longer than the timeout
        assert backlog.unwritten <= BACKLOG_LIMIT


async def test_a_client_that_reads_nothing_for_the_send_timeout_is_too_slow(
    autojump_clock: trio.testing.MockClock,
) -> None:
    backlog = Backlog()
    backlog.add(BACKLOG_LIMIT + 2 * CHUNK)
    backlog.remove(CHUNK)  # read a little, then nothing more
    with pytest.raises(SendTimeout, match="read nothing for 30s"):
        await backlog.make_room(30.0)


# Large responses read at once, each slowly but steadily (issue 15: a busy session through a client
# pool): none is written whole within the send timeout, yet every one moves all the time. The
# backlog limit and the send timeouts are lowered so that a few MiB show it within seconds (two
# replies in flight fill it); the client's small receive buffer keeps most of each reply in the
# bridge rather than in the kernel, as a fresh connection's does.
SLOW_LIMIT = 1024 * 1024
SLOW_RESPONSES = 6
SLOW_REPLY = 1024 * 1024
SLOW_TIMEOUT = 1.0  # seconds; each response takes two or three to read
SLOW_READ = 16 * 1024  # bytes read from each response at a time ...
SLOW_PAUSE = 0.04  # ... then this pause: about 400 KB/s per response


async def test_a_session_whose_client_reads_many_large_responses_slowly_but_steadily_is_not_too_slow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(backlog_module, "BACKLOG_LIMIT", SLOW_LIMIT)
    monkeypatch.setattr(front, "SEND_TIMEOUT", SLOW_TIMEOUT)
    limits = Limits(send_timeout=SLOW_TIMEOUT)
    transport = httpx.AsyncHTTPTransport(socket_options=[(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)])
    pool = httpx.Limits(max_connections=SLOW_RESPONSES, max_keepalive_connections=0)
    replies: list[dict[str, Any]] = []
    with trio.fail_after(TIMEOUT):
        async with (
            running_bridge(EXAMPLE, ["http://127.0.0.1:0/mcp"], limits=limits) as daemon,
            httpx.AsyncClient(timeout=TIMEOUT, transport=transport, limits=pool) as client,
        ):
            url = daemon.addresses[0]
            headers = await _initialize(client, url)

            async def read_slowly(request_id: int) -> None:
                params = {"name": "blob", "arguments": {"size": SLOW_REPLY}}
                message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
                async with client.stream("POST", url, headers=headers, json=message) as response:
                    body = bytearray()
                    async for chunk in response.aiter_bytes(SLOW_READ):
                        body += chunk
                        await trio.sleep(SLOW_PAUSE)  # the client's pace, not a synchronisation
                data = bytes(body) if body[:1] == b"{" else body.rpartition(b"data: ")[2]
                replies.append(json.loads(data))

            async with trio.open_nursery() as nursery:
                for request_id in range(1, SLOW_RESPONSES + 1):
                    nursery.start_soon(read_slowly, request_id)
    errors = [reply["error"] for reply in replies if "error" in reply]
    assert not errors, errors  # -32000 session-ended (client-too-slow) before the fix
    assert all(len(reply["result"]["content"][0]["text"]) == SLOW_REPLY for reply in replies)
    assert len(replies) == SLOW_RESPONSES


# -- what a session keeps ------------------------------------------------------------------------


def _session_of(daemon: Daemon) -> SessionChannel:
    sessions = [client for client in daemon._counters.clients if isinstance(client, SessionChannel)]
    assert len(sessions) == 1, sessions
    return sessions[0]


async def _initialize(client: httpx.AsyncClient, url: str) -> dict[str, str]:
    params = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    response = await client.post(
        url, headers=HEADERS, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
    )
    assert response.status_code == 200, response.text
    headers = {
        **HEADERS,
        "mcp-session-id": response.headers["mcp-session-id"],
        "mcp-protocol-version": VERSION,
    }
    sent = await client.post(
        url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
    )
    assert sent.status_code == 202
    return headers


def _sleep_call(request_id: Any) -> dict[str, Any]:
    """A call that reports progress at once, then answers 0.1 s later."""
    params = {"name": "sleep", "arguments": {"seconds": 0.1}, "_meta": {"progressToken": request_id}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def _progress_call(request_id: Any, steps: int = 2) -> dict[str, Any]:
    """A call whose progress goes out before its result, so its answer is an event stream."""
    params = {"name": "progress", "arguments": {"steps": steps}, "_meta": {"progressToken": request_id}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def test_a_session_keeps_only_its_newest_ended_event_streams_and_a_deleted_one_frees_all() -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(EXAMPLE, ["http://127.0.0.1:0/mcp"]) as daemon:
            url = daemon.addresses[0]
            async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                headers = await _initialize(client, url)
                session = _session_of(daemon)
                for request_id in range(1, 301):
                    response = await client.post(url, headers=headers, json=_progress_call(request_id))
                    assert response.headers["content-type"] == "text/event-stream"
                    assert '"result"' in response.text
                # Before the fix, each of the 300 streams stayed, with its events: 301 streams. The
                # last response's task may still be settling as the client has read it all.
                await poll(lambda session=session: not session.busy)
                assert len(session.streams) == 1 + KEPT_STREAMS  # the standalone, the newest ended
                assert not session.requests and not session.by_progress and not session._order
                assert session.budget.used <= session.budget.limit and session.backlog.unwritten == 0
                kept = weakref.ref(session)
                del session
                deleted = await client.delete(url, headers=headers)
                assert deleted.status_code == 200
            await poll(lambda: daemon.statistics().children == 0)  # the relay ended, its child stopped
            gc.collect()
            assert kept() is None  # nothing holds the deleted session any more


async def test_a_resumption_naming_a_response_still_waiting_to_answer_as_json_gets_409_and_the_post_its_answer() -> (
    None
):
    # Such a response has sent no event id, so nothing can resume it: it is not taken over (before,
    # the POST was cut and its answer went to the GET, which had never seen an event of it).
    sleep = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "sleep", "arguments": {"seconds": 1}},
    }
    with trio.fail_after(TIMEOUT):
        async with running_bridge(EXAMPLE, ["http://127.0.0.1:0/mcp"]) as daemon:
            url = daemon.addresses[0]
            async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                headers = await _initialize(client, url)
                session = _session_of(daemon)
                answers: list[httpx.Response] = []
                async with trio.open_nursery() as nursery:

                    async def post() -> None:
                        answers.append(await client.post(url, headers=headers, json=sleep))

                    nursery.start_soon(post)
                    waiting = lambda: [key for key, stream in session.streams.items() if stream.attached]  # noqa: E731
                    await poll(lambda: bool(waiting()))
                    (key,) = waiting()
                    resume = {**headers, "accept": "text/event-stream", "last-event-id": f"{key}/0"}
                    resumed = await client.get(url, headers=resume)
                    assert resumed.status_code == 409, resumed.text
                    assert resumed.json()["error"]["data"]["reason"] == "stream-open"
                (answer,) = answers
                assert answer.status_code == 200
                assert answer.headers["content-type"] == "application/json"
                assert answer.json()["result"]["content"][0]["text"] == "slept"


async def test_a_stream_its_client_left_is_kept_for_resumption_and_at_most_kept_streams_of_them() -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(EXAMPLE, ["http://127.0.0.1:0/mcp"]) as daemon:
            url = daemon.addresses[0]
            async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                headers = await _initialize(client, url)
                session = _session_of(daemon)
                for request_id in range(1, KEPT_STREAMS + 11):
                    # The child reports progress, then sleeps; the client reads that first event and
                    # closes the response before the result comes: it left the stream.
                    async with client.stream(
                        "POST", url, headers=headers, json=_sleep_call(request_id)
                    ) as response:
                        async for _ in response.aiter_bytes():
                            break
                    await poll(lambda rid=request_id: not session.in_flight(rid))  # answered meanwhile
                await poll(lambda: not session.busy)
                assert len(session.streams) - 1 == KEPT_STREAMS  # the newest of the 42 it left
                assert session.budget.used <= session.budget.limit
                assert session.backlog.unwritten == 0  # nothing counts against backpressure


# -- the session cap ------------------------------------------------------------------------------


def _capped(sessions: int) -> ListenOptions:
    return ListenOptions(http=HttpOptions(max_sessions=sessions))


async def test_at_the_cap_the_least_recently_used_idle_session_is_evicted_and_its_sdk_client_gets_404() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(EXAMPLE, ["http://127.0.0.1:0/mcp"], listen_options=_capped(1)) as daemon:
            url = daemon.addresses[0]
            async with http_client(url) as first:
                assert texts(await first.client.call_tool("echo", {"text": "one"})) == ["one"]
                async with http_client(url) as second:  # the cap is reached: the first, idle, goes
                    assert texts(await second.client.call_tool("echo", {"text": "two"})) == ["two"]
                    await poll(lambda: daemon.statistics().children == 1)  # its child was stopped
                    assert daemon.statistics().sessions_evicted == 1
                    # The SDK (mcp 2.3) does not initialise again by itself: its call fails cleanly
                    # with the 404's JSON-RPC error, and the application may open a new client.
                    with pytest.raises(MCPError) as raised:
                        await first.client.call_tool("echo", {"text": "again"})
                    assert (raised.value.code, raised.value.message) == (-32001, "Session not found")


async def test_at_the_cap_with_every_session_busy_a_new_client_gets_503_with_retry_after_and_its_id() -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(EXAMPLE, ["http://127.0.0.1:0/mcp"], listen_options=_capped(1)) as daemon:
            url = daemon.addresses[0]
            async with httpx.AsyncClient(timeout=TIMEOUT) as client, trio.open_nursery() as nursery:
                headers = await _initialize(client, url)
                session = _session_of(daemon)
                slow = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "sleep", "arguments": {"seconds": 2}},
                }
                nursery.start_soon(partial(client.post, url, headers=headers, json=slow))
                await poll(lambda: session.busy)
                params = {
                    "protocolVersion": VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                }
                refused = await client.post(
                    url,
                    headers=HEADERS,
                    json={"jsonrpc": "2.0", "id": "new", "method": "initialize", "params": params},
                )
                assert refused.status_code == 503
                assert refused.headers["retry-after"] == "5"
                body = refused.json()
                assert body["id"] == "new" and body["error"]["data"]["reason"] == "too-many-sessions"
                assert daemon.statistics().sessions_evicted == 0 and not session.ended
