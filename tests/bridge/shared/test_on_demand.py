"""``start = "on-demand"`` with a shared child: started by the first request, stopped when idle.

Real children and real Unix sockets; the idle period is virtual: trio's MockClock flows at the real
rate and is jumped past ``idle_stop`` (outside ``fail_after``, whose deadline would pass too), so
the stop comes exactly when the test says and never by accident.
"""

from __future__ import annotations

import stat
import sys
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from bridge import ChildSpec, Daemon, Limits, ServeConfig
from bridge._child.supervisor import RestartPolicy, SupervisorState

from conftest import (
    EXAMPLE_SERVER,
    LineClient,
    call,
    example_server,
    poll,
    process_exists,
    result_text,
    running_bridge,
    wait_until_gone,
)

TIMEOUT = 20
IDLE = 3600.0  # virtual seconds: reached only by jumping the clock
FAST_RESTARTS = RestartPolicy(floor=0.01, cap=0.05, crash_limit=2, crash_window=IDLE)


def on_demand(
    sock_dir: Path, argv: tuple[str, ...] = (), **options: Any
) -> AbstractAsyncContextManager[Daemon]:
    """A daemon serving ``argv`` (the example server) with one shared child, on demand."""
    return running_bridge(
        argv or example_server(),
        [f"unix:{sock_dir}/s.sock"],
        child_mode="shared",
        start="on-demand",
        idle_stop=IDLE,
        **options,
    )


async def pass_idle_period(daemon: Daemon, clock: trio.testing.MockClock) -> None:
    """Let every task settle, then jump the clock past ``idle_stop``."""
    with trio.fail_after(TIMEOUT):
        await trio.testing.wait_all_tasks_blocked()
    clock.jump(IDLE)


async def test_an_on_demand_shared_child_starts_on_the_first_request_stops_in_mcp_order_when_idle_and_starts_again(
    sock_dir: Path, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.rate = 1
    async with on_demand(sock_dir) as daemon:
        with trio.fail_after(TIMEOUT):
            assert daemon.statistics().children == 0 and daemon.healthy()
            assert "idle (not started yet)" in daemon.describe()
            client = await LineClient.open(daemon.addresses[0])
            assert result_text(await client.call(1, "echo", text="first")) == "first"
            assert daemon._shared is not None and daemon._shared.child is not None
            child = daemon._shared.child
            grandchild = int(result_text(await client.call(2, "spawn_grandchild")))
            await client.aclose()
            await poll(lambda: daemon._children.usage.users == 0)
            assert child.returncode is None  # the client is gone, the period has not passed
        await pass_idle_period(daemon, mock_clock)
        with trio.fail_after(TIMEOUT):
            await poll(lambda: daemon._shared is None)
            # Closing stdin was enough (the example server exits on EOF: status 0, no signal): the
            # child is reaped, and the group's SIGKILL takes the grandchild (its death is
            # asynchronous, hence the wait): nothing is left in /proc.
            assert child.returncode == 0 and not process_exists(child.pid)
            await wait_until_gone(grandchild)
            assert daemon.statistics().children == 0 and daemon.statistics().idle_stops == 1
            assert daemon.healthy() and "idle (stopped on demand)" in daemon.describe()
            again = await LineClient.open(daemon.addresses[0])
            assert result_text(await again.call(3, "echo", text="again")) == "again"
            assert daemon._shared is not None and daemon._shared.child is not None
            assert daemon._shared.child.pid != child.pid
            assert "shared child ready" in daemon.describe()


async def test_a_connected_client_keeps_the_on_demand_child_running_past_the_idle_period(
    sock_dir: Path, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.rate = 1
    async with on_demand(sock_dir) as daemon:
        with trio.fail_after(TIMEOUT):
            client = await LineClient.open(daemon.addresses[0])
            assert result_text(await client.call(1, "echo", text="x")) == "x"
            assert daemon._shared is not None
            child = daemon._shared.child
        await pass_idle_period(daemon, mock_clock)
        with trio.fail_after(TIMEOUT):
            await trio.testing.wait_all_tasks_blocked()
            assert daemon._shared is not None and daemon._shared.child is child
            assert result_text(await client.call(2, "echo", text="still")) == "still"
            assert daemon.statistics().idle_stops == 0
            # Once it leaves, the next period does stop the child: the wait above was the client's.
            await client.aclose()
            await poll(lambda: daemon._children.usage.users == 0)
        await pass_idle_period(daemon, mock_clock)
        with trio.fail_after(TIMEOUT):
            await poll(lambda: daemon._shared is None)
            assert child is not None and not process_exists(child.pid)


async def test_a_request_in_flight_keeps_the_on_demand_child_running_past_the_idle_period(
    sock_dir: Path, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.rate = 1
    # The client sends its request and its end of input: it is served only for that request, whose
    # reply the half-close still delivers (the half-close bound outlasts the jump).
    limits = Limits(half_close_timeout=4 * IDLE)
    async with on_demand(sock_dir, limits=limits) as daemon:
        with trio.fail_after(TIMEOUT):
            client = await LineClient.open(daemon.addresses[0])
            await client.send(call("slow", "sleep", seconds=1))
            await client.send_eof()
            await poll(lambda: daemon.statistics().requests_in_flight == 1)
            assert daemon._shared is not None
            child = daemon._shared.child
        await pass_idle_period(daemon, mock_clock)
        with trio.fail_after(TIMEOUT):
            (reply,) = await client.receive_until_eof()
            assert reply["id"] == "slow" and result_text(reply) == "slept"
            assert daemon._shared is not None and daemon._shared.child is child
            assert daemon.statistics().idle_stops == 0


async def test_an_on_demand_child_that_cannot_start_answers_the_request_with_the_reason_and_the_next_request_tries_again(
    sock_dir: Path, tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.rate = 1
    command = tmp_path / "server"  # not there yet
    async with on_demand(sock_dir, argv=(str(command),)) as daemon:
        with trio.fail_after(TIMEOUT):
            client = await LineClient.open(daemon.addresses[0])
            await client.send(call(1, "echo", text="x"))
            (reply,) = await client.receive_until_eof()
            assert reply["id"] == 1 and reply["error"]["code"] == -32000
            assert reply["error"]["data"]["reason"] == "child-start-failed"
            assert str(command) in reply["error"]["data"]["detail"]
            assert not daemon.stopping and daemon.healthy() and daemon._shared is None
            command.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{EXAMPLE_SERVER}"\n')
            command.chmod(command.stat().st_mode | stat.S_IXUSR)
            retry = await LineClient.open(daemon.addresses[0])
            assert result_text(await retry.call(2, "echo", text="started")) == "started"


async def test_an_on_demand_shared_child_that_crash_loops_is_given_up_and_the_next_connection_starts_it_again(
    sock_dir: Path, tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.rate = 1
    ready = tmp_path / "ready"  # the server exits at once until this file exists
    script = f'if [ -e "{ready}" ]; then exec "{sys.executable}" "{EXAMPLE_SERVER}"; fi; exit 3'
    async with on_demand(sock_dir, argv=("sh", "-c", script), restart_policy=FAST_RESTARTS) as daemon:
        with trio.fail_after(TIMEOUT):
            client = await LineClient.open(daemon.addresses[0])
            await client.send(call(1, "echo", text="x"))
            replies = await client.receive_until_eof()  # answered, then disconnected at the give-up
            assert [reply["error"]["code"] for reply in replies] == [-32000]
            shared = daemon._shared
            assert shared is not None
            await poll(lambda: shared.supervisor.state is SupervisorState.FAILED)
            assert not daemon.stopping and not daemon.healthy()  # /readyz says so, the daemon lives
            ready.touch()
            again = await LineClient.open(daemon.addresses[0])
            assert result_text(await again.call(2, "echo", text="back")) == "back"
            assert daemon._shared is not shared and daemon.healthy()


def test_an_idle_stop_that_is_not_positive_is_refused_when_the_config_is_built() -> None:
    spec = ChildSpec(argv=("true",))
    with pytest.raises(ValueError, match="idle_stop"):
        ServeConfig(listen=["unix:/tmp/x.sock"], child=spec, start="on-demand", idle_stop=0)
    assert ServeConfig(listen=[], child=spec, start="on-demand").idle_stop == 600  # ten minutes
