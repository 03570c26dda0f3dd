"""End to end in shared mode: two official SDK clients at once on ONE SDK server child.

    SDK Client A --stdio--> mcp-bridge connect --unix--\\
                                                        mcp-bridge --child shared --stdio--> sdk_server.py
    SDK Client B --stdio--> mcp-bridge connect --unix--/            (one child, started once)

The SDK numbers its requests from the same start in every client, and uses the request id as the
progress token, so two clients collide on both by themselves: the bridge must rewrite ids, tokens
and cancellations per client. What is checked, for the legacy era (``mode="legacy"``; the bridge
owns the ``initialize`` handshake) and the 2026-07-28 era (``mode="2026-07-28"``, stateless):

* both clients get their own results while their ids collide (recorded on the clients' own wire);
* the slow tool's progress reaches only the client whose call it is, with that client's token;
* a client that cancels its slow call (a trio cancel scope around ``call_tool``, which makes the SDK
  send ``notifications/cancelled``) stops that call at the child and only that one: the other
  client's slow call, running at the same time, completes;
* there is exactly one child all along (the daemon's descendants in /proc, and its log).

Both clients of one daemon use the same era: the SDK server fixes its era on the first request it
sees. The server runs with ``--extra-tools`` (see ``sdk_server.py``).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Self

import attrs
import pytest
import trio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCNotification, JSONRPCRequest
from sdkhttp import _bare_errors
from test_e2e_sdk import PYTHON, REPO, SDK_SERVER, TEST_TIMEOUT, _read_all

from conftest import BridgeProcess, bridge_process

LEGACY = ("legacy", "2025-11-25")  # (Client mode, the protocol version it ends up with)
MODERN = ("2026-07-28", "2026-07-28")

TOOLS = ["add", "blob", "cancelled_slow_calls", "echo", "slow"]
CALLS = 8  # add calls each client has in flight at once, per round
ROUNDS = 3
A_BASE, B_BASE = 1000, 2000  # add(base, i): every call of every client has its own answer
B_SECONDS, B_STEPS = 2.0, 4  # B's slow call: long enough to outlive A's cancellation by far
FIRST_PROGRESS_TIMEOUT = 10  # seconds for each slow call's first progress notification
CANCEL_SEEN_TIMEOUT = 10  # seconds for the child to report the cancelled call
MiB = 1 << 20
# A tool result over the shared client queue's byte bound (Limits.client_queue_bytes, 8 MiB, no
# command-line option) but under the default --max-child-message (16 MiB) and connect's --max-message.
BIG_REPLY = 9 * MiB


# -- recording what a client sends -----------------------------------------------------------------


@attrs.define(eq=False)
class Sent:
    """Request ids and cancellations one SDK client wrote to its transport."""

    requests: list[tuple[Any, str]] = attrs.field(factory=list)  # (id, method)
    cancelled: list[Any] = attrs.field(factory=list)  # requestId of each notifications/cancelled

    def ids(self, method: str) -> list[Any]:
        return [request_id for request_id, sent_method in self.requests if sent_method == method]


@attrs.define(eq=False)
class _RecordingWriteStream:
    """The SDK transport's write stream, noting every request id and cancellation on the way."""

    inner: Any
    sent: Sent

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        if isinstance(message, JSONRPCRequest):
            self.sent.requests.append((message.id, message.method))
        elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            self.sent.cancelled.append((message.params or {}).get("requestId"))
        await self.inner.send(item)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> bool | None:
        return await self.inner.__aexit__(*exc_info)


@attrs.define(eq=False)
class SharedClient:
    client: Client
    sent: Sent


@asynccontextmanager
async def connected_client(sock: Path, mode: str) -> AsyncIterator[SharedClient]:
    """An SDK client through ``python -m bridge connect unix:SOCK``; its stderr is printed at the end."""
    params = StdioServerParameters(command=PYTHON, args=["-m", "bridge", "connect", f"unix:{sock}"], cwd=REPO)
    sent = Sent()

    @asynccontextmanager
    async def recording_transport(errlog: Any) -> AsyncIterator[Any]:
        async with stdio_client(params, errlog=errlog) as (read_stream, write_stream):
            yield read_stream, _RecordingWriteStream(write_stream, sent)

    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
        try:
            async with _bare_errors(), Client(recording_transport(errlog), mode=mode) as client:
                yield SharedClient(client, sent)
        finally:
            print(f"connect to {sock}, its stderr:\n{_read_all(errlog)}", file=sys.stderr)


# -- the daemon and its one child ----------------------------------------------------------------


@asynccontextmanager
async def sdk_server_daemon(sock: Path, child: str = "shared") -> AsyncIterator[BridgeProcess]:
    """``python -m bridge --child CHILD`` serving the SDK server with default limits; stopped,
    reaped, its log printed."""
    bridge: BridgeProcess | None = None
    try:
        async with (
            _bare_errors(),
            bridge_process(
                "--child", child, "--listen", f"unix:{sock}", "--", PYTHON, SDK_SERVER, "--extra-tools"
            ) as bridge,
        ):
            yield bridge
    finally:
        if bridge is not None:
            print(f"{child} daemon, its stderr:\n{bridge.log()}", file=sys.stderr)


def sdk_server_pids(daemon_pid: int) -> list[int]:
    """The SDK server processes among the daemon's descendants (from /proc)."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as stat:
                    parents[int(name)] = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
    found, frontier = [], [daemon_pid]
    while frontier:
        parent = frontier.pop()
        for pid, its_parent in parents.items():
            if its_parent == parent:
                frontier.append(pid)
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                        if SDK_SERVER.encode() in cmdline.read().split(b"\0"):
                            found.append(pid)
                except (FileNotFoundError, ProcessLookupError):
                    continue
    return found


@asynccontextmanager
async def two_clients_on_one_child(
    sock: Path, mode: str, version: str
) -> AsyncIterator[tuple[SharedClient, SharedClient]]:
    """A shared daemon and two clients in ``mode``; checks there was one child before and after."""
    async with sdk_server_daemon(sock) as daemon:
        async with connected_client(sock, mode) as a, connected_client(sock, mode) as b:
            # Listed first, so that no call makes the SDK fetch the list (it does on a cache miss,
            # a varying number of times) and both clients number their calls alike; it also puts
            # the clients' ids out of step with the child's, so that a cancellation or a progress
            # token passed on unmapped names another request or none.
            for shared in (a, b):
                assert shared.client.protocol_version == version
                listed = await shared.client.list_tools()
                assert sorted(tool.name for tool in listed.tools) == TOOLS
            children = sdk_server_pids(daemon.process.pid)
            assert len(children) == 1, f"SDK server processes under the daemon: {children}"
            yield a, b
            assert sdk_server_pids(daemon.process.pid) == children, "the shared child changed"
        log = daemon.log()
        assert log.count("shared child starting") == 1, log
        assert log.count("connected to the shared child") == 2, log


# -- the checks ----------------------------------------------------------------------------------


async def check_colliding_ids_get_their_own_results(sock: Path, mode: str, version: str) -> None:
    with trio.fail_after(TEST_TIMEOUT):
        async with two_clients_on_one_child(sock, mode, version) as (a, b):
            results: dict[tuple[str, int, int], Any] = {}

            async def add(name: str, shared: SharedClient, base: int, round_: int, i: int) -> None:
                reply = await shared.client.call_tool("add", {"a": base, "b": i})
                assert not reply.is_error, reply
                results[name, round_, i] = reply.structured_content

            for round_ in range(ROUNDS):  # both clients' calls of a round in flight together
                async with trio.open_nursery() as nursery:
                    for i in range(CALLS):
                        nursery.start_soon(add, "A", a, A_BASE, round_, i)
                        nursery.start_soon(add, "B", b, B_BASE, round_, i)

            expected = {
                (name, round_, i): {"result": base + i}
                for name, base in (("A", A_BASE), ("B", B_BASE))
                for round_ in range(ROUNDS)
                for i in range(CALLS)
            }
            assert results == expected
            a_ids, b_ids = a.sent.ids("tools/call"), b.sent.ids("tools/call")
            assert len(a_ids) == len(b_ids) == ROUNDS * CALLS  # each call sent once, none retried
            assert set(a_ids) == set(b_ids), (a_ids, b_ids)  # the ids did collide, every one of them


async def check_progress_and_cancellation_stay_with_their_client(sock: Path, mode: str, version: str) -> None:
    with trio.fail_after(TEST_TIMEOUT):
        async with two_clients_on_one_child(sock, mode, version) as (a, b):
            a_progress: list[tuple[float, float | None, str | None]] = []
            b_progress: list[tuple[float, float | None, str | None]] = []
            a_started, b_started, b_done = trio.Event(), trio.Event(), trio.Event()
            a_scope = trio.CancelScope()
            b_result: list[Any] = []

            async def on_a_progress(progress: float, total: float | None, message: str | None) -> None:
                a_progress.append((progress, total, message))
                a_started.set()

            async def on_b_progress(progress: float, total: float | None, message: str | None) -> None:
                b_progress.append((progress, total, message))
                b_started.set()

            async def a_slow() -> None:
                with a_scope:
                    await a.client.call_tool(
                        "slow", {"seconds": 2 * TEST_TIMEOUT, "steps": 2}, progress_callback=on_a_progress
                    )
                    pytest.fail("A's slow call returned although A cancelled it")

            async def b_slow() -> None:
                b_result.append(
                    await b.client.call_tool(
                        "slow", {"seconds": B_SECONDS, "steps": B_STEPS}, progress_callback=on_b_progress
                    )
                )
                b_done.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(a_slow)
                nursery.start_soon(b_slow)
                with trio.move_on_after(FIRST_PROGRESS_TIMEOUT):
                    await a_started.wait()  # both slow calls are running at the child
                    await b_started.wait()
                if not (a_started.is_set() and b_started.is_set()):
                    pytest.fail(
                        f"no first progress within {FIRST_PROGRESS_TIMEOUT}s: "
                        f"A got {a_progress}, B got {b_progress}"
                    )
                assert not b_done.is_set(), "B's slow call ended before A cancelled: no overlap"
                a_scope.cancel()

            assert a_scope.cancelled_caught
            assert a.sent.cancelled == [a.sent.ids("tools/call")[-1]]  # the SDK sent the cancel
            (b_reply,) = b_result
            assert not b_reply.is_error, b_reply
            assert [block.model_dump(exclude_none=True) for block in b_reply.content] == [
                {"type": "text", "text": "done"}
            ]
            assert b_progress == [
                (step, B_STEPS, f"step {step} of {B_STEPS}") for step in range(1, B_STEPS + 1)
            ]
            assert a_progress == [(1, 2, "step 1 of 2")]  # and nothing of B's, nor after the cancel

            # The cancellation reached the child with the right id: exactly A's call was stopped.
            with trio.move_on_after(CANCEL_SEEN_TIMEOUT) as waited:
                counted = await b.client.call_tool("cancelled_slow_calls", {"at_least": 1})
            if waited.cancelled_caught:
                pytest.fail("the child never saw A's cancellation")
            assert counted.structured_content == {"result": 1}
            # A's session is still good after its cancellation.
            added = await a.client.call_tool("add", {"a": 2, "b": 40})
            assert added.structured_content == {"result": 42}


async def check_a_big_reply_arrives(sock: Path, child: str) -> None:
    with trio.fail_after(TEST_TIMEOUT):
        async with sdk_server_daemon(sock, child), connected_client(sock, LEGACY[0]) as shared:
            reply = await shared.client.call_tool("blob", {"size": BIG_REPLY})
            assert not reply.is_error, reply.content[:1]
            assert [(block.type, block.text == "x" * BIG_REPLY) for block in reply.content] == [
                ("text", True)
            ]


# -- legacy era --------------------------------------------------------------------------------------


async def test_two_legacy_sdk_clients_on_one_shared_child_get_their_own_results_while_their_request_ids_collide(
    sock_dir: Path,
) -> None:
    await check_colliding_ids_get_their_own_results(sock_dir / "s", *LEGACY)


async def test_two_legacy_sdk_clients_on_one_shared_child_get_only_their_own_progress_and_one_cancels_without_stopping_the_other(
    sock_dir: Path,
) -> None:
    await check_progress_and_cancellation_stay_with_their_client(sock_dir / "s", *LEGACY)


# -- 2026-07-28 era ----------------------------------------------------------------------------------


async def test_two_2026_07_28_sdk_clients_on_one_shared_child_get_their_own_results_while_their_request_ids_collide(
    sock_dir: Path,
) -> None:
    await check_colliding_ids_get_their_own_results(sock_dir / "s", *MODERN)


async def test_two_2026_07_28_sdk_clients_on_one_shared_child_get_only_their_own_progress_and_one_cancels_without_stopping_the_other(
    sock_dir: Path,
) -> None:
    await check_progress_and_cancellation_stay_with_their_client(sock_dir / "s", *MODERN)


# -- replies larger than a client's queue bound ------------------------------------------------------


async def test_a_9_mib_tool_result_reaches_an_sdk_client_through_a_per_connection_child(
    sock_dir: Path,
) -> None:
    await check_a_big_reply_arrives(sock_dir / "s", "per-connection")


async def test_a_9_mib_tool_result_reaches_an_sdk_client_through_the_shared_child_as_through_a_per_connection_one(
    sock_dir: Path,
) -> None:
    await check_a_big_reply_arrives(sock_dir / "s", "shared")
