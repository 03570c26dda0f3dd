"""A 2026-07-28 request served in its POST's own task agrees with one served by a handler task.

    SDK Client --one POST per request--> mcp-bridge (--child shared) --> sdk_server.py

With the shared child running, the bridge serves each 2026-07-28 request in the HTTP request's own
task (``Connections.serve_exchange``); with request metrics on (``--admin``), the channel is
wrapped, and the request takes the general path: a task of its own, beside the response. Both must
give the client the same results, progress and cancellation, and count the request alike.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
from mcp.shared.exceptions import MCPError
from sdkhttp import (
    SDK_ARGV,
    TIMEOUT,
    _bare_errors,
    cancellations_seen_by_the_child,
    check_progress,
    check_tools_with_string_ids,
    http_client,
    start_slow_call_then_cancel,
    url_of,
)

from bridge import ChildSpec, Daemon, Limits, ServeConfig
from bridge._relay.requests import RequestMetrics
from channels import ListenOptions, parse_address

MODERN_VERSION = "2026-07-28"
PATHS = ["own-task", "handler-task"]


@asynccontextmanager
async def modern_bridge(path: str, limits: Limits | None = None) -> AsyncIterator[Daemon]:
    """The daemon in this process with the shared child; request metrics force the handler task."""
    config = ServeConfig(
        listen=(parse_address("http://127.0.0.1:0/mcp"),),
        child=ChildSpec(argv=SDK_ARGV),
        limits=limits or Limits(),
        listen_options=ListenOptions(),
        child_mode="shared",
    )
    daemon = Daemon(config, request_metrics=RequestMetrics() if path == "handler-task" else None)
    async with _bare_errors(), trio.open_nursery() as nursery:
        await nursery.start(daemon.run)
        try:
            yield daemon
        finally:
            daemon.stop()


@pytest.mark.parametrize("path", PATHS)
async def test_a_2026_07_28_request_gets_the_same_results_progress_and_cancellation_whichever_task_serves_it(
    path: str,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with modern_bridge(path) as daemon, http_client(url_of(daemon), MODERN_VERSION) as sdk:
            await check_tools_with_string_ids(sdk, MODERN_VERSION)
            await check_progress(sdk)
            async with trio.open_nursery() as nursery:
                await start_slow_call_then_cancel(sdk, nursery)
            assert await cancellations_seen_by_the_child(sdk, 1) == 1
            statistics = daemon.statistics()
            assert statistics.connections_total >= 6  # each request a connection of its own
            assert statistics.connections_by_transport["http"] == statistics.connections_total
            assert statistics.children == 1


@pytest.mark.parametrize("path", PATHS)
async def test_a_2026_07_28_request_in_flight_when_the_bridge_stops_is_told_so_whichever_task_serves_it(
    path: str,
) -> None:
    started = trio.Event()
    outcome: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        started.set()

    with trio.fail_after(TIMEOUT):
        async with modern_bridge(path, Limits(drain_timeout=0.5)) as daemon:
            async with http_client(url_of(daemon), MODERN_VERSION) as sdk, trio.open_nursery() as nursery:

                async def slow() -> None:
                    try:
                        await sdk.client.call_tool(
                            "slow", {"seconds": 10 * TIMEOUT, "steps": 2}, progress_callback=on_progress
                        )
                        outcome.append("result")
                    except MCPError as exc:
                        outcome.append(str(exc))

                nursery.start_soon(slow)
                await started.wait()
                daemon.stop()  # graceful: the drain answers what is still in flight
    assert len(outcome) == 1 and "Connection closed" in outcome[0], outcome
