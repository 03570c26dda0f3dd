"""The official ``mcp`` SDK's HTTP clients against the bridge's HTTP listener: the legacy era.

    SDK Client --Streamable HTTP--> mcp-bridge --listen http://127.0.0.1:0/mcp --stdio--> sdk_server.py
    SDK Client --HTTP+SSE (2024-11-05): GET /sse, POST /messages?session_id=...--/

Neither end was written against the bridge: the client is the SDK's ``Client`` over its
``streamable_http_client`` (``mode="legacy"``: the ``initialize`` handshake, then a session named
by ``Mcp-Session-Id``) or its ``sse_client``; the child is ``tests/sdk_server.py``, an SDK
``MCPServer``, with its opt-in tools (``slow`` and ``cancelled_slow_calls`` for progress and
cancellation, ``ask_client`` and ``client_roots`` for requests from the server to the client,
``pid`` and ``crash`` for restarts). Each legacy session has a child of its own in per-connection
mode, and in auto mode too (a client that opens with ``initialize`` is given its own child); in
shared mode the bridge owns the handshake of the one child.

The client's request ids are strings (see ``sdkhttp.py``, which holds the helpers). The 2026-07-28
era is in ``test_http_sdk_modern.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CreateMessageResult, ListRootsResult, Root, TextContent
from sdkhttp import (
    LEGACY_VERSION,
    ROOTS,
    TIMEOUT,
    DroppingProxy,
    cancellations_seen_by_the_child,
    check_progress,
    check_tools_with_string_ids,
    crash_the_child,
    http_bridge,
    http_client,
    pid_of_child,
    sdk_client,
    start_slow_call_then_cancel,
    texts,
    url_of,
)

from channels import HttpOptions, ListenOptions

from conftest import poll

# -- Streamable HTTP, legacy sessions ---------------------------------------------------------------


@pytest.mark.parametrize("child_mode", ["per-connection", "shared", "auto"])
async def test_a_legacy_sdk_client_lists_and_calls_tools_over_streamable_http_and_its_string_ids_come_back_unchanged(
    child_mode: str,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge(child_mode) as daemon:
            before = daemon.statistics().children  # the shared child, if there is one
            async with http_client(url_of(daemon)) as sdk:
                await check_tools_with_string_ids(sdk, LEGACY_VERSION)
            await poll(lambda: daemon.statistics().children == before)  # its DELETE stopped its child


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


async def test_a_legacy_sdk_client_whose_stream_was_lost_unnoticed_by_the_bridge_resumes_it_and_gets_the_result() -> (
    None
):
    # The POST's stream is cut for the SDK only (a middlebox lost it; the bridge's side stays
    # open): its Last-Event-ID resumption takes the stream over instead of getting 409 twice.
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as daemon, trio.open_nursery() as nursery:
            port = int(url_of(daemon).rsplit(":", 1)[1].split("/")[0])
            proxy = DroppingProxy(port)
            await nursery.start(proxy.serve)
            async with http_client(f"http://127.0.0.1:{proxy.port}/mcp") as sdk:
                first = trio.Event()

                async def on_progress(done: float, total: float | None, message: str | None) -> None:
                    first.set()

                async def drop_after_first_progress() -> None:
                    await first.wait()
                    assert proxy.drop(b'"slow"', silently=True) == 1

                nursery.start_soon(drop_after_first_progress)
                result = await sdk.client.call_tool(
                    "slow", {"seconds": 2.0, "steps": 4}, progress_callback=on_progress
                )
                assert texts(result) == ["done"]
                assert [head for head in proxy.heads if b"last-event-id:" in head], proxy.heads  # resumed
                assert sdk.wire.cancelled == []
            nursery.cancel_scope.cancel()


async def sampling(context: Any, params: Any) -> CreateMessageResult:
    """The SDK client's sampling callback: the prompt, answered."""
    return CreateMessageResult(
        role="assistant",
        content=TextContent(type="text", text=f"sampled: {params.messages[0].content.text}"),
        model="test",
    )


async def roots(context: Any) -> ListRootsResult:
    """The SDK client's roots callback."""
    return ListRootsResult(roots=[Root(uri=uri) for uri in ROOTS])  # type: ignore[arg-type]


@pytest.mark.parametrize("child_mode", ["per-connection", "shared", "auto"])
async def test_a_legacy_tool_that_asks_the_client_gets_the_sdk_clients_sampling_and_roots_answers(
    child_mode: str,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            http_bridge(child_mode) as daemon,
            http_client(url_of(daemon), sampling_callback=sampling, list_roots_callback=roots) as sdk,
        ):
            assert texts(await sdk.client.call_tool("ask_client", {"prompt": "2 + 2?"})) == [
                "sampled: 2 + 2?"
            ]
            assert texts(await sdk.client.call_tool("client_roots", {})) == ["\n".join(ROOTS)]


async def test_a_legacy_server_request_made_while_two_calls_are_in_flight_reaches_the_sdk_client_and_is_answered() -> (
    None
):
    # With two requests in flight the bridge cannot tell which one the child asks for: the
    # sampling request goes out on the SDK client's standalone GET stream.
    with trio.fail_after(TIMEOUT):
        async with (
            http_bridge() as daemon,
            http_client(url_of(daemon), sampling_callback=sampling) as sdk,
            trio.open_nursery() as nursery,
        ):
            running, slow_result = trio.Event(), []

            async def on_progress(done: float, total: float | None, message: str | None) -> None:
                running.set()

            async def slow() -> None:
                arguments = {"seconds": 1.0, "steps": 2}
                slow_result.append(
                    await sdk.client.call_tool("slow", arguments, progress_callback=on_progress)
                )

            nursery.start_soon(slow)
            await running.wait()
            assert texts(await sdk.client.call_tool("ask_client", {"prompt": "meanwhile"})) == [
                "sampled: meanwhile"
            ]
        assert texts(slow_result[0]) == ["done"]


@pytest.mark.parametrize("child_mode", ["per-connection", "auto"])
async def test_a_legacy_session_whose_child_crashed_answers_404_and_a_new_sdk_client_session_gets_a_new_child(
    child_mode: str,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge(child_mode) as daemon:
            before = daemon.statistics().children
            async with http_client(url_of(daemon)) as sdk:
                first_pid = await pid_of_child(sdk)
                await crash_the_child(sdk)
                await poll(lambda: daemon.statistics().children == before)  # the session closed first
                with pytest.raises(MCPError) as gone:
                    await sdk.client.call_tool("add", {"a": 1, "b": 2})
                assert gone.value.code == -32001, gone.value  # the bridge's 404 body: session not found
            async with http_client(url_of(daemon)) as again:
                assert await pid_of_child(again) != first_pid
                assert (await again.client.call_tool("add", {"a": 1, "b": 2})).structured_content == {
                    "result": 3
                }


async def test_with_a_shared_child_a_legacy_session_outlives_a_child_crash_the_bridge_replays_the_handshake() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with http_bridge("shared") as daemon, http_client(url_of(daemon)) as sdk:
            first_pid = await pid_of_child(sdk)
            await crash_the_child(sdk)
            assert await pid_of_child(sdk) != first_pid  # the same session, a restarted child
            assert (await sdk.client.call_tool("add", {"a": 1, "b": 2})).structured_content == {"result": 3}


async def test_a_legacy_session_whose_client_cancelled_a_call_then_went_away_is_ended_after_the_idle_timeout() -> (
    None
):
    # Long enough for the SDK's first call to follow its initialize on a loaded CI machine (at 0.3 s
    # the session was once reaped in that gap, and the call got 404 before anything was cancelled).
    idle_timeout = 1.0
    options = ListenOptions(http=HttpOptions(session_idle_timeout=idle_timeout))
    with trio.fail_after(TIMEOUT):
        async with http_bridge(listen_options=options) as daemon:
            # Gone without a DELETE: its connections close, and nothing ends the session but idleness.
            async with sdk_client(streamable_http_client(url_of(daemon), terminate_on_close=False)) as sdk:
                async with trio.open_nursery() as nursery:
                    await start_slow_call_then_cancel(sdk, nursery)
                assert await cancellations_seen_by_the_child(sdk, 1) == 1  # stopped: it will never answer
            assert daemon.statistics().children == 1
            with trio.move_on_after(10 * idle_timeout):  # the timeout, the reaper's period, and slack
                await poll(lambda: daemon.statistics().children == 0)
            assert daemon.statistics().children == 0, "the session's child still runs"


# -- HTTP+SSE, the 2024-11-05 transport ------------------------------------------------------------


def sse_url(daemon: Any) -> str:
    return url_of(daemon).removesuffix("/mcp") + "/sse"


@pytest.mark.parametrize("child_mode", ["per-connection", "auto"])
async def test_the_sdk_sse_client_lists_and_calls_tools_with_progress_and_sampling_over_the_2024_11_05_transport(
    child_mode: str,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge(child_mode) as daemon:
            before = daemon.statistics().children
            async with sdk_client(sse_client(sse_url(daemon)), sampling_callback=sampling) as sdk:
                await check_tools_with_string_ids(sdk, LEGACY_VERSION)
                await check_progress(sdk)
                assert texts(await sdk.client.call_tool("ask_client", {"prompt": "?"})) == ["sampled: ?"]
            await poll(lambda: daemon.statistics().children == before)  # closing the stream stopped it


async def test_the_sdk_sse_client_cancels_with_notifications_cancelled_over_the_2024_11_05_transport() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as daemon, sdk_client(sse_client(sse_url(daemon))) as sdk:
            async with trio.open_nursery() as nursery:
                await start_slow_call_then_cancel(sdk, nursery)
            assert sdk.wire.cancelled == sdk.wire.ids("tools/call")[-1:]
            assert await cancellations_seen_by_the_child(sdk, 1) == 1
