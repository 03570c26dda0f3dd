"""``start = "on-demand"`` beyond the shared child: the warm pool and the ``auto`` probe.

Real children and real Unix sockets; the idle period is virtual (trio's MockClock flowing at the
real rate, jumped past ``idle_stop`` outside ``fail_after``).
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from bridge import Daemon

from conftest import LineClient, example_server, poll, process_exists, result_text, running_bridge

TIMEOUT = 20
IDLE = 3600.0  # virtual seconds: reached only by jumping the clock


def on_demand(sock_dir: Path, **options: Any) -> AbstractAsyncContextManager[Daemon]:
    """A daemon serving the example server on demand, stopping its child only when the clock is jumped."""
    return running_bridge(
        example_server(), [f"unix:{sock_dir}/s.sock"], start="on-demand", idle_stop=IDLE, **options
    )


async def idle_period_passes(daemon: Daemon, clock: trio.testing.MockClock) -> None:
    """Wait until no connection is served and every task has settled; jump past ``idle_stop``."""
    with trio.fail_after(TIMEOUT):
        await poll(lambda: daemon._children.usage.users == 0)
        await trio.testing.wait_all_tasks_blocked()
    clock.jump(IDLE)


async def test_with_prespawn_on_demand_the_pool_fills_on_first_use_and_is_emptied_when_idle(
    sock_dir: Path, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.rate = 1
    async with on_demand(sock_dir, child_mode="per-connection", prespawn=2) as daemon:
        with trio.fail_after(TIMEOUT):
            assert daemon._pool is None and daemon.statistics().prespawned == 0
            client = await LineClient.open(daemon.addresses[0])
            assert result_text(await client.call(1, "echo", text="first")) == "first"
            await poll(lambda: daemon.statistics().prespawned == 2)
            assert daemon._pool is not None
            waiting = [child.pid for child in daemon._pool.ready]
            await client.aclose()
        await idle_period_passes(daemon, mock_clock)
        with trio.fail_after(TIMEOUT):
            await poll(lambda: daemon._pool is None)
            assert not any(process_exists(pid) for pid in waiting)
            assert daemon.statistics().prespawned == 0 and daemon.statistics().children == 0
            assert "idle (stopped on demand)" in daemon.describe() and daemon.healthy()
            again = await LineClient.open(daemon.addresses[0])
            assert result_text(await again.call(2, "echo", text="again")) == "again"
            await poll(lambda: daemon.statistics().prespawned == 2)  # filled again on this use


async def test_in_auto_mode_on_demand_the_server_is_probed_at_the_first_request_and_only_once(
    sock_dir: Path, mock_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    mock_clock.rate = 1
    caplog.set_level(logging.INFO, logger="bridge.daemon")
    async with on_demand(sock_dir, child_mode="auto") as daemon:
        with trio.fail_after(TIMEOUT):
            assert daemon.mode == "auto" and daemon.statistics().children == 0  # not probed yet
            client = await LineClient.open(daemon.addresses[0])
            assert result_text(await client.call(1, "echo", text="first")) == "first"
            assert daemon.mode == "shared" and daemon._shared is not None
            first = daemon._shared.child
            await client.aclose()
        await idle_period_passes(daemon, mock_clock)
        with trio.fail_after(TIMEOUT):
            await poll(lambda: daemon._shared is None)
            assert first is not None and not process_exists(first.pid)
            again = await LineClient.open(daemon.addresses[0])
            assert result_text(await again.call(2, "echo", text="again")) == "again"
            assert daemon.mode == "shared" and daemon._shared is not None
    probes = [record for record in caplog.records if record.getMessage().startswith("child mode ")]
    assert len(probes) == 1  # the era of a command does not change while the daemon runs
