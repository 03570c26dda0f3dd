"""HTTP edges met by the official Python ``mcp`` SDK's client, not by a hand-written one.

    SDK Client --Streamable HTTP--> mcp-bridge --stdio--> bridge/example_server (tests/sdk_server.py)

``test_http_edges.py`` checks these edges on the wire with a raw client; here the client is the
SDK's ``Client`` over its ``streamable_http_client`` (request ids made strings by ``sdkhttp.py``),
through an ``httpx2.AsyncClient`` of the test's own where the test must see what the SDK got:

* A client dropped (the task running it cancelled) while the bridge is blocked writing its call's
  long event stream: one INFO line about that stream's connection, no warning, error or
  traceback in the bridge's log, and the bridge serves the next client. (The SDK's client in the
  2026-07-28 era cancels a call by closing its response, but there the shared child's link drops
  a client that far behind, with a WARNING, first; a legacy session's stream has backpressure.)
* A request in a session that was ended (deleted by another party, closed by the bridge when its
  child exited, evicted at the session cap): the bridge's 404 body carries that request's id, and
  the SDK raises that error from that call. The SDK puts its own id into an error it correlates
  (a refusal's id may be null), so the id the bridge sent is checked in the body the SDK
  received, recorded by an httpx response hook. The same for the 400 of a request whose
  ``Mcp-Session-Id`` a middlebox dropped (no path of the SDK's own sends one without it).
* One session making many calls whose answers are event streams: the bridge's memory does not
  grow with the calls (it keeps only the newest ended streams for ``Last-Event-ID``).
"""

from __future__ import annotations

import json
import logging
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import httpx2 as httpx
import pytest
import trio
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from sdkhttp import SDK_ARGV, SdkClient, crash_the_child, sdk_client, texts

from bridge import Daemon
from channels import HttpOptions, ListenOptions

from conftest import bridge_process, poll, resident_bytes, running_bridge

EXAMPLE = (sys.executable, "-m", "bridge.example_server")
TIMEOUT = 30  # seconds for a test: a daemon, a child or two, a few SDK clients' round trips


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


@asynccontextmanager
async def bridge_in_process(child: tuple[str, ...] = EXAMPLE, **options: Any) -> AsyncIterator[Daemon]:
    """The daemon in this process, a child per session, at ``daemon.addresses[0]``."""
    async with running_bridge(child, ["http://127.0.0.1:0/mcp"], **options) as daemon:
        yield daemon


@asynccontextmanager
async def sdk_over(
    url: str, http_client: httpx.AsyncClient, mode: str = "legacy"
) -> AsyncIterator[SdkClient]:
    """An SDK client at ``url`` whose HTTP goes through ``http_client`` (closed with it)."""
    async with http_client, sdk_client(streamable_http_client(url, http_client=http_client), mode) as sdk:
        yield sdk


# -- a client that drops its event stream -----------------------------------------------------------

# Clients dropped in a row: whether the bridge's writer or its disconnect watch sees the reset first
# is the scheduler's choice, so one proves little (tests/channels/http/test_http_edges.py has the
# same number for a raw client).
DROPS = 5
STEPS = 20_000  # progress notifications in one call's event stream: megabytes, far past any buffer
CLIENT_RCVBUF = 4096  # the SDK client's socket receive buffer: full after a few events
UNREAD = 2048  # bytes waiting in it that show the bridge is blocked writing (the raw test's figure)
WAIT = 10  # seconds the bridge may take to log a dropped stream (it notices the reset at once)


def unread_bytes_from(port: int) -> dict[int, int]:
    """Bytes the kernel holds unread on each loopback TCP socket connected to ``port``, by the
    socket's own port.

    ``/proc/net/tcp``'s ``rx_queue`` (what FIONREAD gives the socket's owner): the SDK's sockets
    are inside httpx, but they are this process's, so the kernel's table shows them.
    """
    unread = {}
    with open("/proc/net/tcp") as table:
        next(table)
        for row in table:
            fields = row.split()
            if int(fields[2].split(":")[1], 16) == port:
                unread[int(fields[1].split(":")[1], 16)] = int(fields[4].split(":")[1], 16)
    return unread


@attrs.define(eq=False)
class Drop:
    """A client dropped: the port of its connection that carried the event stream, and how many
    log records there were when it was dropped."""

    port: int
    mark: int

    def records(self, caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
        """The bridge's log records about that connection since the drop (they name the peer)."""
        return [r for r in caplog.records[self.mark :] if f"127.0.0.1:{self.port}:" in r.getMessage()]


def traceback_logged(caplog: pytest.LogCaptureFixture) -> bool:
    return any(record.exc_info for record in caplog.records)


async def drop_while_the_bridge_is_blocked_writing(url: str, caplog: pytest.LogCaptureFixture) -> Drop:
    """An SDK client calls ``progress`` with STEPS notifications and stops reading at the first
    (its progress callback waits, which stalls the SDK's reader); once its receive buffer holds
    UNREAD bytes, so that the bridge cannot write on, the client is dropped: the task running it
    is cancelled, as an application's would be, and its connections close with data unread.

    Returns the port of the connection that carried the event stream, the log's length then.
    """
    reading = trio.Event()
    blocked: list[int] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        reading.set()
        await trio.sleep_forever()

    def bridge_blocked() -> bool:
        blocked.extend(port for port, unread in unread_bytes_from(port_of(url)).items() if unread >= UNREAD)
        return bool(blocked)

    small_buffer = [(socket.SOL_SOCKET, socket.SO_RCVBUF, CLIENT_RCVBUF)]
    http_client = httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(socket_options=small_buffer), timeout=TIMEOUT
    )
    async with trio.open_nursery() as nursery:

        async def long_call() -> None:
            async with sdk_over(url, http_client) as sdk:
                await sdk.client.call_tool("progress", {"steps": STEPS}, progress_callback=on_progress)
                pytest.fail("the call returned although its client was dropped")

        nursery.start_soon(long_call)
        await reading.wait()
        await poll(bridge_blocked)
        mark = len(caplog.records)
        nursery.cancel_scope.cancel()
    (stream_port,) = blocked
    return Drop(stream_port, mark)


async def test_a_python_sdk_client_dropped_while_the_bridge_writes_its_long_event_stream_is_one_info_line_for_that_stream_and_the_bridge_serves_the_next_client(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Each client also had its standalone GET stream open, which it closed as it went: that is one
    # INFO line of its own, on its own connection.
    caplog.set_level(logging.INFO)
    with trio.fail_after(TIMEOUT):
        async with bridge_in_process() as daemon:
            url = daemon.addresses[0]
            dropped: list[Drop] = []
            for _ in range(DROPS):
                drop = await drop_while_the_bridge_is_blocked_writing(url, caplog)
                dropped.append(drop)
                with trio.move_on_after(WAIT):  # before the fix, the bridge said nothing
                    await poll(lambda drop=drop: bool(drop.records(caplog)) or traceback_logged(caplog))
                if not drop.records(caplog) or traceback_logged(caplog):
                    break
            async with sdk_over(url, httpx.AsyncClient(timeout=TIMEOUT)) as another:
                assert texts(await another.client.call_tool("echo", {"text": "next"})) == ["next"]
            said = [[(r.levelno, r.getMessage()) for r in drop.records(caplog)] for drop in dropped]
    assert not traceback_logged(caplog), [r.getMessage() for r in caplog.records if r.exc_info]
    loud = [record for record in caplog.records if record.levelno >= logging.WARNING]
    assert loud == [], [record.getMessage() for record in loud]
    for lines in said:  # one line for each stream dropped, INFO, saying the client left it
        assert len(lines) == 1 and lines[0][0] == logging.INFO, f"about each dropped stream: {said}"
        assert "closed its response" in lines[0][1], said
    assert len(said) == DROPS, said


# -- refusals keep the request's id -----------------------------------------------------------------


@attrs.define(eq=False)
class Refusals:
    """What the SDK's HTTP client received: the session id it was given, each refused POST's body."""

    session_id: str | None = None
    bodies: list[tuple[int, Any]] = attrs.field(factory=list)  # (status, parsed JSON body)

    async def on_response(self, response: httpx.Response) -> None:
        self.session_id = response.headers.get("mcp-session-id", self.session_id)
        if response.request.method == "POST" and response.status_code >= 400:
            # Read here, the SDK reads the same bytes after (httpx keeps a body once read).
            self.bodies.append((response.status_code, json.loads(await response.aread())))


def recording_client(refusals: Refusals, **hooks: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=TIMEOUT, event_hooks={"response": [refusals.on_response], **hooks})


async def delete_session(url: str, session_id: str) -> None:
    """Another party (say, the application's other process) ends the session with DELETE."""
    async with httpx.AsyncClient(timeout=TIMEOUT) as other:
        headers = {"mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}
        assert (await other.delete(url, headers=headers)).status_code == 200


async def end_with_the_child(sdk: SdkClient, daemon: Daemon) -> None:
    """The session's child exits (the SDK server's ``crash`` tool): the bridge closes the session."""
    await crash_the_child(sdk)
    await poll(lambda: daemon.statistics().children == 0)


async def evict_session(url: str, daemon: Daemon) -> None:
    """A new client at the session cap of one: the idle session is evicted to make room."""
    async with sdk_over(url, httpx.AsyncClient(timeout=TIMEOUT)) as newcomer:
        assert texts(await newcomer.client.call_tool("echo", {"text": "room"})) == ["room"]
        assert daemon.statistics().sessions_evicted == 1


@pytest.mark.parametrize("ended_by", ["delete", "child-exit", "eviction"])
async def test_a_python_sdk_request_in_a_session_that_was_ended_gets_the_bridges_404_for_that_request_with_its_id(
    ended_by: str,
) -> None:
    options = ListenOptions(http=HttpOptions(max_sessions=1))
    refusals = Refusals()
    with trio.fail_after(TIMEOUT):
        async with bridge_in_process(SDK_ARGV, listen_options=options) as daemon:
            url = daemon.addresses[0]
            async with sdk_over(url, recording_client(refusals)) as sdk:
                assert texts(await sdk.client.call_tool("echo", {"text": "one"})) == ["one"]
                assert refusals.session_id is not None and refusals.bodies == []
                if ended_by == "delete":
                    await delete_session(url, refusals.session_id)
                elif ended_by == "child-exit":
                    await end_with_the_child(sdk, daemon)
                else:
                    await evict_session(url, daemon)
                with pytest.raises(MCPError) as raised:
                    await sdk.client.call_tool("echo", {"text": "late"})
                late_id = sdk.wire.ids("tools/call")[-1]
    # The caller got the bridge's error for that call, not a stand-in for a bare status.
    assert (raised.value.code, raised.value.message) == (-32001, "Session not found"), raised.value
    assert raised.value.error.data == {"reason": "unknown-session"}, raised.value.error
    # The body the SDK received names that request (a string id, as sdkhttp's client sends it).
    ((status, body),) = refusals.bodies
    assert status == 404 and body["id"] == late_id, (late_id, body)


async def test_a_python_sdk_request_whose_session_header_a_proxy_dropped_gets_the_bridges_400_for_that_request_with_its_id() -> (
    None
):
    # No path of the SDK's own sends a legacy request without Mcp-Session-Id once it has one; a
    # middlebox that strips the header (here an httpx request hook, for the marked call) does.
    refusals = Refusals()

    async def strip_session(request: httpx.Request) -> None:
        if b"no-header-please" in request.content:
            del request.headers["mcp-session-id"]

    with trio.fail_after(TIMEOUT):
        async with bridge_in_process() as daemon:
            url = daemon.addresses[0]
            async with sdk_over(url, recording_client(refusals, request=[strip_session])) as sdk:
                with pytest.raises(MCPError) as raised:
                    await sdk.client.call_tool("echo", {"text": "no-header-please"})
                stripped_id = sdk.wire.ids("tools/call")[-1]
                assert texts(await sdk.client.call_tool("echo", {"text": "with it"})) == ["with it"]
    assert raised.value.code == -32000 and "Mcp-Session-Id" in raised.value.message, raised.value
    ((status, body),) = refusals.bodies
    assert status == 400 and body["id"] == stripped_id, (stripped_id, body)


# -- one session's memory over many event streams ---------------------------------------------------

CALLS = 2200  # calls of one session, each answered with an event stream (progress goes first)
# Calls before the first sample: the bridge's memory grows by about 4 MiB over its first 1,200 to
# 1,800 calls, fixed or not (the pools of the allocator and of the garbage collector filling up;
# measured every 200 calls up to 3,000), then stays flat: from call 1,500 to 3,000 it grew by
# 0.1 to 0.5 MiB. Where the plateau begins moves with start-up (a daemon that collects start-up's
# garbage reaches it sooner, at a lower level), so the first sample is taken well past it.
WARM = 1500
# What the bridge's resident memory may grow by from call WARM to call CALLS: under a third of
# what the 700 calls between cost when the session kept every ended stream (measured: about
# 10 KiB each, 7 MiB for 700), and far above what it grows by now.
GROWTH_BOUND = 2 * 1024 * 1024
MANY_CALLS_TIMEOUT = 150  # seconds: 2,200 SDK calls take 20-55 s on a loaded two-core machine


async def test_one_python_sdk_session_making_many_calls_answered_as_event_streams_does_not_grow_the_bridges_memory() -> (
    None
):
    progress: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    with trio.fail_after(MANY_CALLS_TIMEOUT):
        # The bridge as a process of its own, so that its memory is its own; the child is another.
        async with bridge_process("--listen", "http://127.0.0.1:0/mcp", "--", *EXAMPLE) as bridge:
            (url,) = bridge.addresses
            async with sdk_over(url, httpx.AsyncClient(timeout=TIMEOUT)) as sdk:
                samples = []
                for calls in range(1, CALLS + 1):
                    result = await sdk.client.call_tool(
                        "progress", {"steps": 1}, progress_callback=on_progress
                    )
                    assert texts(result) == ["done"]
                    if calls in (WARM, CALLS):
                        samples.append(resident_bytes(bridge.process.pid))
    assert len(progress) == CALLS  # every answer was an event stream: its progress went first
    warm, last = samples
    assert last - warm <= GROWTH_BOUND, f"grew {(last - warm) / 1024:.0f} KiB from call {WARM} to {CALLS}"
