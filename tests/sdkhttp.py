"""The official ``mcp`` SDK's HTTP clients, set up for the HTTP listener's tests.

``test_http_sdk.py`` (legacy era) and ``test_http_sdk_modern.py`` (2026-07-28) share these: a daemon
in this process serving ``tests/sdk_server.py`` with all its opt-in tools, an SDK ``Client`` whose
request ids are strings (:class:`Wire` records what it sent and got back), the checks both eras
make, and :class:`DroppingProxy`, a loopback TCP proxy that cuts the connection carrying a given
request, as a client that went away would. The TypeScript SDK's client runs as ``tests/ts_client.mjs``
under the Node of tests/conformance/.node (:func:`ts_calls`).

The SDK numbers requests with integers; the client here turns each into the same digits as a
string on the way out (and progress tokens and cancelled ids with it), the type a bridge that
mapped ids loosely would lose. The SDK correlates ``"7"`` with ``7``, so it still finds its replies.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Self

import attrs
import pytest
import trio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp.types import (
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    TextContent,
)

from bridge import Daemon

from conftest import running_bridge

TESTS = Path(__file__).resolve().parent
SDK_SERVER = str(TESTS / "sdk_server.py")
SDK_ARGV = (sys.executable, SDK_SERVER, "--extra-tools", "--client-tools", "--crash-tools")
TOOLS = ["add", "ask_client", "blob", "cancelled_slow_calls", "client_roots", "crash", "echo", "pid", "slow"]
LEGACY_VERSION = "2025-11-25"  # what the SDK client proposes with mode="legacy", and the server accepts
TIMEOUT = 30  # seconds for a whole test: a daemon, one or two SDK server start-ups, some round trips
WAIT = 10  # seconds for one awaited event (a first progress, a cancellation seen by the child)
ECHO_TEXT = "over HTTP\nsecond line, é ✓"
ROOTS = ["file:///work/project-a", "file:///work/project-b"]
NODE_TOOLS = TESTS / "conformance" / ".node"  # what tests/conformance/install.sh installs
NODE = NODE_TOOLS / "node" / "node_modules" / ".bin" / "node"
TS_SDK = NODE_TOOLS / "sdk" / "node_modules" / "@modelcontextprotocol" / "sdk"
TS_CLIENT = TESTS / "ts_client.mjs"


# -- an SDK client whose request ids are strings, and what it sent and got ---------------------------


@attrs.define(eq=False)
class Wire:
    """What one SDK client handed its transport and what the transport handed back."""

    requests: list[tuple[Any, str]] = attrs.field(factory=list)  # (id, method) as sent
    cancelled: list[Any] = attrs.field(factory=list)  # requestId of each notifications/cancelled sent
    reply_ids: list[Any] = attrs.field(factory=list)  # ids of the replies received
    progress_tokens: list[Any] = attrs.field(factory=list)  # tokens of notifications/progress received

    def ids(self, method: str) -> list[Any]:
        return [request_id for request_id, sent in self.requests if sent == method]


def _as_string(value: Any) -> Any:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


@attrs.define(eq=False)
class _StringIdWriter:
    """The transport's write stream: integer request ids, progress tokens and cancelled ids become
    the same digits as strings (the SDK correlates ``"7"`` with ``7``, so it still finds its replies)."""

    inner: Any
    wire: Wire

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        if isinstance(message, JSONRPCRequest):
            params = dict(message.params or {})
            if isinstance(params.get("_meta"), dict) and "progressToken" in params["_meta"]:
                params["_meta"] = {
                    **params["_meta"],
                    "progressToken": _as_string(params["_meta"]["progressToken"]),
                }
            message = message.model_copy(
                update={"id": _as_string(message.id), **({"params": params} if message.params else {})}
            )
            self.wire.requests.append((message.id, message.method))
        elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            params = {
                **(message.params or {}),
                "requestId": _as_string((message.params or {}).get("requestId")),
            }
            message = message.model_copy(update={"params": params})
            self.wire.cancelled.append(params["requestId"])
        await self.inner.send(SessionMessage(message=message, metadata=item.metadata))

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return await self.inner.__aexit__(*exc_info)  # type: ignore[no-any-return]


@attrs.define(eq=False)
class _RecordingReader:
    """The transport's read stream, noting reply ids and progress tokens as the transport parsed them."""

    inner: Any
    wire: Wire

    @property
    def last_context(self) -> Any:
        return getattr(self.inner, "last_context", None)

    def _note(self, item: Any) -> Any:
        if isinstance(item, SessionMessage):
            message = item.message
            if isinstance(message, JSONRPCResponse | JSONRPCError):
                self.wire.reply_ids.append(message.id)
            elif isinstance(message, JSONRPCNotification) and message.method == "notifications/progress":
                self.wire.progress_tokens.append((message.params or {}).get("progressToken"))
        return item

    async def receive(self) -> Any:
        return self._note(await self.inner.receive())

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        return self._note(await self.inner.__anext__())

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return await self.inner.__aexit__(*exc_info)  # type: ignore[no-any-return]


@asynccontextmanager
async def string_ids(transport: Any, wire: Wire) -> AsyncIterator[tuple[Any, Any]]:
    async with transport as (read_stream, write_stream):
        yield _RecordingReader(read_stream, wire), _StringIdWriter(write_stream, wire)


@attrs.define(eq=False)
class SdkClient:
    client: Client
    wire: Wire


@asynccontextmanager
async def sdk_client(transport: Any, mode: str = "legacy", **callbacks: Any) -> AsyncIterator[SdkClient]:
    """An SDK ``Client`` over ``transport`` (an SDK transport, not entered yet) with string ids."""
    wire = Wire()
    async with _bare_errors(), Client(string_ids(transport, wire), mode=mode, **callbacks) as client:
        yield SdkClient(client, wire)


def http_client(url: str, mode: str = "legacy", **callbacks: Any) -> Any:
    """An SDK client over Streamable HTTP at ``url`` (the SDK's own transport for a URL)."""
    return sdk_client(streamable_http_client(url), mode, **callbacks)


@asynccontextmanager
async def http_bridge(child_mode: str = "per-connection", **options: Any) -> AsyncIterator[Daemon]:
    """The daemon in this process, serving the SDK server at ``http://127.0.0.1:PORT/mcp``."""
    async with (
        _bare_errors(),
        running_bridge(SDK_ARGV, ["http://127.0.0.1:0/mcp"], child_mode=child_mode, **options) as daemon,
    ):
        yield daemon


def url_of(daemon: Daemon) -> str:
    return daemon.addresses[0]


def texts(result: Any) -> list[str]:
    assert not result.is_error, result
    return [block.text for block in result.content if isinstance(block, TextContent)]


# -- the TypeScript SDK's client ---------------------------------------------------------------------


def node_tools_or_skip(*more: Path) -> None:
    """Node and the TypeScript SDK (and ``more``) installed by tests/conformance/install.sh;
    missing: a failure in CI (``CI`` set), a skip elsewhere."""
    missing = [str(path) for path in (NODE, TS_SDK, *more) if not path.exists()]
    if missing:
        reason = f"{', '.join(missing)} missing: run tests/conformance/install.sh"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set: .ci/run must install it)")
        pytest.skip(reason)


async def ts_calls(url: str, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run tests/ts_client.mjs: one TypeScript SDK client making ``calls``; one record per call."""
    done = await trio.run_process(
        [str(NODE), str(TS_CLIENT), url, json.dumps(calls)],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    return [json.loads(line) for line in done.stdout.decode().splitlines()]


# -- the checks, shared with the 2026-07-28 file ---------------------------------------------------


async def check_tools_with_string_ids(sdk: SdkClient, version: str) -> None:
    """The era, the tool list, two calls; every id went out a string and came back that string."""
    assert sdk.client.protocol_version == version
    listed = await sdk.client.list_tools()
    assert sorted(tool.name for tool in listed.tools) == TOOLS
    assert (await sdk.client.call_tool("add", {"a": 2, "b": 40})).structured_content == {"result": 42}
    assert texts(await sdk.client.call_tool("echo", {"text": ECHO_TEXT})) == [ECHO_TEXT]
    sent = [request_id for request_id, _ in sdk.wire.requests]
    assert sent and all(isinstance(request_id, str) for request_id in sent), sdk.wire.requests
    assert sdk.wire.reply_ids == sent  # same values, still strings, one reply each, in order


async def check_progress(sdk: SdkClient, steps: int = 3) -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    tokens_before = len(sdk.wire.progress_tokens)
    result = await sdk.client.call_tool(
        "slow", {"seconds": 0.3, "steps": steps}, progress_callback=on_progress
    )
    assert texts(result) == ["done"]
    assert progress == [(step, steps, f"step {step} of {steps}") for step in range(1, steps + 1)]
    call_id = sdk.wire.ids("tools/call")[-1]
    # Each notification carried the client's own token, a string still.
    assert sdk.wire.progress_tokens[tokens_before:] == [call_id] * steps


async def start_slow_call_then_cancel(sdk: SdkClient, nursery: trio.Nursery) -> trio.CancelScope:
    """Start a long ``slow`` call, wait for its first progress (it runs at the child), cancel the
    SDK's call (a cancel scope, as an application does); return the scope once it ended."""
    started, ended = trio.Event(), trio.Event()
    scope = trio.CancelScope()

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        started.set()

    async def slow() -> None:
        try:
            with scope:
                await sdk.client.call_tool(
                    "slow", {"seconds": 10 * TIMEOUT, "steps": 2}, progress_callback=on_progress
                )
                pytest.fail("the slow call returned although it was cancelled")
        finally:
            ended.set()

    nursery.start_soon(slow)
    with trio.fail_after(WAIT):
        await started.wait()
    scope.cancel()
    await ended.wait()
    assert scope.cancelled_caught
    return scope


async def cancellations_seen_by_the_child(sdk: SdkClient, at_least: int) -> int:
    """How many ``slow`` calls the child saw cancelled, once at least ``at_least`` were."""
    with trio.move_on_after(WAIT):
        counted = await sdk.client.call_tool("cancelled_slow_calls", {"at_least": at_least})
        return int(counted.structured_content["result"])  # type: ignore[index]
    pytest.fail(f"the child did not see {at_least} cancelled calls within {WAIT}s")


async def pid_of_child(sdk: SdkClient) -> int:
    return int((await sdk.client.call_tool("pid", {})).structured_content["result"])  # type: ignore[index]


async def crash_the_child(sdk: SdkClient) -> MCPError:
    """Call ``crash``: the child exits before replying; the bridge answers the call with an error."""
    with pytest.raises(MCPError) as raised:
        await sdk.client.call_tool("crash", {})
    assert raised.value.code == -32000, raised.value  # CONNECTION_CLOSED: the child exited
    return raised.value


# -- a TCP proxy that can drop the connection carrying a given request ------------------------------


@attrs.define(eq=False)
class _Pipe:
    scope: trio.CancelScope
    downstream: trio.SocketStream
    request: bytearray = attrs.field(factory=bytearray)  # the current request, as far as sent
    silent: bool = False  # dropped for the client only: the bridge's side stays open, unaware


@attrs.define(eq=False)
class DroppingProxy:
    """Forwards loopback TCP connections to ``target_port``; :meth:`drop` closes the connections
    whose current HTTP request contains a marker, as a client that went away would (or, with
    ``silently``, only the client's side: a middlebox that lost the connection, which the bridge
    does not notice)."""

    target_port: int
    port: int = 0
    pipes: list[_Pipe] = attrs.field(factory=list)
    heads: list[bytes] = attrs.field(factory=list)  # the first chunk of every request, lower-cased

    async def serve(self, task_status: trio.TaskStatus[None]) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._forward, listeners)

    async def _forward(self, downstream: trio.SocketStream) -> None:
        upstream = await trio.open_tcp_stream("127.0.0.1", self.target_port)
        pipe = _Pipe(trio.CancelScope(), downstream)
        self.pipes.append(pipe)
        async with downstream, upstream:
            with pipe.scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._pump, downstream, upstream, pipe, True)
                    nursery.start_soon(self._pump, upstream, downstream, pipe, False)
        self.pipes.remove(pipe)

    async def _pump(
        self, source: trio.SocketStream, sink: trio.SocketStream, pipe: _Pipe, requests: bool
    ) -> None:
        try:
            async for chunk in source:
                if pipe.silent:
                    continue  # what the bridge still sends goes nowhere
                if requests:
                    if chunk.split(b" ", 1)[0] in (b"GET", b"POST", b"DELETE"):
                        pipe.request.clear()
                        self.heads.append(chunk.lower())
                    pipe.request += chunk
                await sink.send_all(chunk)
            if not pipe.silent:
                await sink.send_eof()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            if not pipe.silent:
                pipe.scope.cancel()  # one side reset: close both, as a proxy would
        if pipe.silent:
            await trio.sleep_forever()  # the bridge's side stays open until the proxy stops

    def drop(self, marker: bytes, *, silently: bool = False) -> int:
        dropped = [pipe for pipe in self.pipes if marker in pipe.request]
        for pipe in dropped:
            if silently:
                pipe.silent = True
                pipe.downstream.socket.shutdown(socket.SHUT_RDWR)  # the client sees its end
            else:
                pipe.scope.cancel()
        return len(dropped)


@asynccontextmanager
async def _bare_errors() -> AsyncIterator[None]:
    """Re-raise a lone exception bare when a nursery or task group wrapped it in a group.

    Otherwise the test body's own AssertionError reaches pytest nested one group deeper per
    nursery it crossed.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        sole: BaseException = group
        while isinstance(sole, BaseExceptionGroup) and len(sole.exceptions) == 1:
            sole = sole.exceptions[0]
        if sole is group:
            raise
        raise sole from None
