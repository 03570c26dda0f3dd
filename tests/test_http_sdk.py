"""The official ``mcp`` SDK's HTTP clients against the bridge's HTTP listener: the legacy era.

    SDK Client --Streamable HTTP--> mcp-bridge --listen http://127.0.0.1:0/mcp --stdio--> sdk_server.py
    SDK Client --HTTP+SSE (2024-11-05): GET /sse, POST /messages?session_id=...--/

Neither end was written against the bridge: the client is the SDK's ``Client`` over its
``streamable_http_client`` (``mode="legacy"``: the ``initialize`` handshake, then a session named
by ``Mcp-Session-Id``) or its ``sse_client``; the child is ``tests/sdk_server.py``, an SDK
``MCPServer``, with its opt-in tools (``slow`` and ``cancelled_slow_calls`` for progress and
cancellation, ``ask_client`` and ``client_roots`` for requests from the server to the client,
``pid`` and ``crash`` for restarts). Each legacy session has a child of its own (per-connection;
also in auto mode, where a client that opens with ``initialize`` is given its own child).

The SDK numbers requests with integers; :class:`StringIds` turns each into the same digits as a
string on the way out, the type a bridge that mapped ids loosely would lose, and records what the
client sent and got back. The 2026-07-28 era is in ``test_http_sdk_modern.py``.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Self

import attrs
import pytest
import trio
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp.types import (
    CreateMessageResult,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    ListRootsResult,
    Root,
    TextContent,
)
from test_e2e_sdk import _bare_errors

from bridge import Daemon

from conftest import poll, running_bridge

SDK_SERVER = str(Path(__file__).resolve().parent / "sdk_server.py")
SDK_ARGV = (sys.executable, SDK_SERVER, "--extra-tools", "--client-tools", "--crash-tools")
TOOLS = ["add", "ask_client", "blob", "cancelled_slow_calls", "client_roots", "crash", "echo", "pid", "slow"]
LEGACY_VERSION = "2025-11-25"  # what the SDK client proposes with mode="legacy", and the server accepts
TIMEOUT = 30  # seconds for a whole test: a daemon, one or two SDK server start-ups, some round trips
WAIT = 10  # seconds for one awaited event (a first progress, a cancellation seen by the child)
ECHO_TEXT = "over HTTP\nsecond line, é ✓"
ROOTS = ["file:///work/project-a", "file:///work/project-b"]


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

    result = await sdk.client.call_tool(
        "slow", {"seconds": 0.3, "steps": steps}, progress_callback=on_progress
    )
    assert texts(result) == ["done"]
    assert progress == [(step, steps, f"step {step} of {steps}") for step in range(1, steps + 1)]
    (call_id,) = sdk.wire.ids("tools/call")
    assert sdk.wire.progress_tokens == [call_id] * steps  # the client's own token, a string still


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
    request: bytearray = attrs.field(factory=bytearray)  # the current request, as far as sent


@attrs.define(eq=False)
class DroppingProxy:
    """Forwards loopback TCP connections to ``target_port``; :meth:`drop` closes the connections
    whose current HTTP request contains a marker, as a client that went away would."""

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
        pipe = _Pipe(trio.CancelScope())
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
                if requests:
                    if chunk.split(b" ", 1)[0] in (b"GET", b"POST", b"DELETE"):
                        pipe.request.clear()
                        self.heads.append(chunk.lower())
                    pipe.request += chunk
                await sink.send_all(chunk)
            await sink.send_eof()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pipe.scope.cancel()  # one side reset: close both, as a proxy would

    def drop(self, marker: bytes) -> int:
        dropped = [pipe for pipe in self.pipes if marker in pipe.request]
        for pipe in dropped:
            pipe.scope.cancel()
        return len(dropped)


# -- Streamable HTTP, legacy sessions ---------------------------------------------------------------


@pytest.mark.parametrize("child_mode", ["per-connection", "shared", "auto"])
async def test_a_legacy_sdk_client_lists_and_calls_tools_over_streamable_http_and_its_string_ids_come_back_unchanged(
    child_mode: str,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge(child_mode) as daemon, http_client(url_of(daemon)) as sdk:
            await check_tools_with_string_ids(sdk, LEGACY_VERSION)


async def test_legacy_progress_notifications_reach_the_sdk_clients_progress_callback_with_its_token() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as daemon, http_client(url_of(daemon)) as sdk:
            await check_progress(sdk)


async def test_a_legacy_sdk_client_cancels_with_notifications_cancelled_and_the_child_stops_that_call() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as daemon, http_client(url_of(daemon)) as sdk:
            async with trio.open_nursery() as nursery:
                await start_slow_call_then_cancel(sdk, nursery)
            assert sdk.wire.cancelled == sdk.wire.ids("tools/call")[-1:]  # the SDK sent the frame
            assert await cancellations_seen_by_the_child(sdk, 1) == 1
            assert (await sdk.client.call_tool("add", {"a": 1, "b": 1})).structured_content == {"result": 2}


async def test_in_the_legacy_era_a_dropped_connection_is_not_a_cancellation_the_sdk_client_resumes_and_gets_the_result() -> (
    None
):
    # The POST carrying the slow call is cut after its first progress; the SDK resumes the stream
    # with Last-Event-ID (the bridge sent a priming event and a retry delay, 2025-11-25) and gets
    # the rest of the progress and the result; the child never saw a cancellation.
    steps = 4
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as daemon, trio.open_nursery() as nursery:
            port = int(url_of(daemon).rsplit(":", 1)[1].split("/")[0])
            proxy = DroppingProxy(port)
            await nursery.start(proxy.serve)
            async with http_client(f"http://127.0.0.1:{proxy.port}/mcp") as sdk:
                progress: list[float] = []
                first = trio.Event()

                async def on_progress(done: float, total: float | None, message: str | None) -> None:
                    progress.append(done)
                    first.set()

                async def drop_after_first_progress() -> None:
                    await first.wait()
                    assert proxy.drop(b'"slow"') == 1

                nursery.start_soon(drop_after_first_progress)
                result = await sdk.client.call_tool(
                    "slow", {"seconds": 2.0, "steps": steps}, progress_callback=on_progress
                )
                assert texts(result) == ["done"]
                assert progress == [float(step) for step in range(1, steps + 1)]
                assert [head for head in proxy.heads if b"last-event-id:" in head], proxy.heads  # resumed
                assert sdk.wire.cancelled == []
                assert await cancellations_seen_by_the_child(sdk, 0) == 0
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize("child_mode", ["per-connection", "auto"])
async def test_a_legacy_tool_that_asks_the_client_gets_the_sdk_clients_sampling_and_roots_answers(
    child_mode: str,
) -> None:
    asked: list[str] = []

    async def sampling(context: Any, params: Any) -> CreateMessageResult:
        prompt = params.messages[0].content.text
        asked.append(prompt)
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=f"sampled: {prompt}"), model="test"
        )

    async def roots(context: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=uri) for uri in ROOTS])  # type: ignore[arg-type]

    with trio.fail_after(TIMEOUT):
        async with (
            http_bridge(child_mode) as daemon,
            http_client(url_of(daemon), sampling_callback=sampling, list_roots_callback=roots) as sdk,
        ):
            assert texts(await sdk.client.call_tool("ask_client", {"prompt": "2 + 2?"})) == [
                "sampled: 2 + 2?"
            ]
            assert asked == ["2 + 2?"]
            assert texts(await sdk.client.call_tool("client_roots", {})) == ["\n".join(ROOTS)]


async def test_a_legacy_session_whose_child_crashed_answers_404_and_a_new_sdk_client_session_gets_a_new_child() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as daemon:
            async with http_client(url_of(daemon)) as sdk:
                first_pid = await pid_of_child(sdk)
                await crash_the_child(sdk)
                await poll(lambda: daemon.statistics().children == 0)  # the session closed first
                with pytest.raises(MCPError) as gone:
                    await sdk.client.call_tool("add", {"a": 1, "b": 2})
                assert gone.value.code == -32001, gone.value  # the bridge's 404 body: session not found
            async with http_client(url_of(daemon)) as again:
                assert await pid_of_child(again) != first_pid
                assert (await again.client.call_tool("add", {"a": 1, "b": 2})).structured_content == {
                    "result": 3
                }


# -- HTTP+SSE, the 2024-11-05 transport ------------------------------------------------------------


async def test_the_sdk_sse_client_lists_and_calls_tools_with_progress_and_sampling_over_the_2024_11_05_transport() -> (
    None
):
    async def sampling(context: Any, params: Any) -> CreateMessageResult:
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text="over SSE"), model="test"
        )

    with trio.fail_after(TIMEOUT):
        async with http_bridge() as daemon:
            base = url_of(daemon).removesuffix("/mcp")
            async with sdk_client(sse_client(f"{base}/sse"), sampling_callback=sampling) as sdk:
                await check_tools_with_string_ids(sdk, LEGACY_VERSION)
                assert texts(await sdk.client.call_tool("ask_client", {"prompt": "?"})) == ["over SSE"]


async def test_the_sdk_sse_client_cancels_with_notifications_cancelled_over_the_2024_11_05_transport() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as daemon:
            base = url_of(daemon).removesuffix("/mcp")
            async with sdk_client(sse_client(f"{base}/sse")) as sdk:
                async with trio.open_nursery() as nursery:
                    await start_slow_call_then_cancel(sdk, nursery)
                assert sdk.wire.cancelled == sdk.wire.ids("tools/call")[-1:]
                assert await cancellations_seen_by_the_child(sdk, 1) == 1
