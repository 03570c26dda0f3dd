"""The official ``mcp`` SDK's Streamable HTTP client against the bridge's HTTP listener: 2026-07-28.

    SDK Client --one POST per request--> mcp-bridge --listen http://127.0.0.1:0/mcp --> sdk_server.py
                                         (--child shared, or auto: the one shared child;
                                          per-connection: a child for each request)

The client is the SDK's ``Client`` for a URL, pinned to the era (``mode="2026-07-28"``, no probe)
or negotiating it (``mode="auto"``: a ``server/discover`` probe, which the dual-era SDK server
answers, so it settles on 2026-07-28). There are no sessions: each request is one POST whose
response carries its progress and its result, closing that response is how the client cancels,
and a restarted child is invisible but for the in-flight request it cost. The last test runs the
daemon as a separate process (``python -m bridge``, auto mode by default) with a legacy and a
modern SDK client at once. The helpers are in ``sdkhttp.py``, the legacy era in ``test_http_sdk.py``.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
from sdkhttp import (
    LEGACY_VERSION,
    SDK_ARGV,
    TIMEOUT,
    SdkClient,
    _bare_errors,
    cancellations_seen_by_the_child,
    check_progress,
    check_tools_with_string_ids,
    crash_the_child,
    http_bridge,
    http_client,
    pid_of_child,
    start_slow_call_then_cancel,
    url_of,
)

from conftest import BridgeProcess, bridge_process

MODERN_VERSION = "2026-07-28"
MODES = ["2026-07-28", "auto"]  # the SDK client's mode=; both end up in the 2026-07-28 era
SHARING = ["shared", "auto"]  # the daemon's child mode; auto settles on shared for this server


@pytest.mark.parametrize("child_mode", [*SHARING, "per-connection"])  # the last: a child per request
@pytest.mark.parametrize("mode", MODES)
async def test_a_2026_07_28_sdk_client_lists_and_calls_tools_over_streamable_http_and_its_string_ids_come_back_unchanged(
    mode: str, child_mode: str
) -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge(child_mode) as daemon, http_client(url_of(daemon), mode) as sdk:
            await check_tools_with_string_ids(sdk, MODERN_VERSION)


async def test_two_2026_07_28_sdk_clients_whose_string_ids_collide_get_their_own_results_from_the_shared_child() -> (
    None
):
    calls = 8
    with trio.fail_after(TIMEOUT):
        async with (
            http_bridge("shared") as daemon,
            http_client(url_of(daemon), MODERN_VERSION) as a,
            http_client(url_of(daemon), MODERN_VERSION) as b,
        ):
            results: dict[tuple[str, int], object] = {}

            async def add(name: str, sdk: SdkClient, base: int, i: int) -> None:
                results[name, i] = (await sdk.client.call_tool("add", {"a": base, "b": i})).structured_content

            for sdk in (a, b):  # listed first, so that both number their calls alike
                await sdk.client.list_tools()
            async with trio.open_nursery() as nursery:
                for i in range(calls):
                    nursery.start_soon(add, "A", a, 1000, i)
                    nursery.start_soon(add, "B", b, 2000, i)
            assert results == {
                (name, i): {"result": base + i}
                for name, base in (("A", 1000), ("B", 2000))
                for i in range(calls)
            }
            assert a.wire.ids("tools/call") and set(a.wire.ids("tools/call")) == set(b.wire.ids("tools/call"))
            assert daemon.statistics().children == 1


@pytest.mark.parametrize("mode", MODES)
async def test_2026_07_28_progress_notifications_reach_the_sdk_clients_progress_callback_with_its_token(
    mode: str,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge("shared") as daemon, http_client(url_of(daemon), mode) as sdk:
            await check_progress(sdk)


@pytest.mark.parametrize("mode", MODES)
async def test_a_2026_07_28_sdk_client_cancels_by_closing_the_response_and_the_child_stops_that_call(
    mode: str,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge("shared") as daemon, http_client(url_of(daemon), mode) as sdk:
            async with trio.open_nursery() as nursery:
                await start_slow_call_then_cancel(sdk, nursery)
            assert await cancellations_seen_by_the_child(sdk, 1) == 1
            assert (await sdk.client.call_tool("add", {"a": 1, "b": 1})).structured_content == {"result": 2}


@pytest.mark.parametrize("child_mode", SHARING)
async def test_after_the_shared_child_crashed_the_next_2026_07_28_request_is_served_by_the_restarted_child(
    child_mode: str,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge(child_mode) as daemon, http_client(url_of(daemon), "2026-07-28") as sdk:
            first_pid = await pid_of_child(sdk)
            await crash_the_child(sdk)
            assert await pid_of_child(sdk) != first_pid  # waited for the restart, then served
            assert (await sdk.client.call_tool("add", {"a": 1, "b": 2})).structured_content == {"result": 3}
            assert daemon.statistics().children == 1


# -- the daemon as a separate process ----------------------------------------------------------------


@asynccontextmanager
async def http_daemon_process(*flags: str) -> AsyncIterator[BridgeProcess]:
    """``python -m bridge FLAGS --listen http://127.0.0.1:0/mcp -- SDK server``; its log printed."""
    bridge: BridgeProcess | None = None
    try:
        async with (
            _bare_errors(),
            bridge_process(*flags, "--listen", "http://127.0.0.1:0/mcp", "--", *SDK_ARGV) as bridge,
        ):
            yield bridge
    finally:
        if bridge is not None:
            print(f"daemon, its stderr:\n{bridge.log()}", file=sys.stderr)


async def test_the_bridge_as_a_process_in_auto_mode_serves_a_legacy_and_a_2026_07_28_sdk_client_over_http_at_once() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with http_daemon_process() as daemon:
            (url,) = daemon.addresses
            async with http_client(url, "legacy") as legacy, http_client(url, "auto") as modern:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(check_tools_with_string_ids, legacy, LEGACY_VERSION)
                    nursery.start_soon(check_tools_with_string_ids, modern, MODERN_VERSION)
                await check_progress(modern)
            log = daemon.log()
            assert "a legacy client, given its own child" in log, log
