"""The warm pool (--prespawn): children started before their connection, with real processes."""

from __future__ import annotations

import logging
import os
import signal

import trio

from conftest import (
    LineClient,
    call,
    example_server,
    poll,
    process_exists,
    result_text,
    running_bridge,
)

TIMEOUT = 20


async def test_a_new_connection_is_served_by_a_prespawned_child_and_the_pool_refills(sock_dir, caplog):
    caplog.set_level(logging.INFO, logger="bridge.daemon")
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [f"unix:{sock_dir}/s.sock"], prespawn=2) as daemon:
            await poll(lambda: daemon.statistics().prespawned == 2)
            ready = {child.pid for child in daemon._pool.ready}  # type: ignore[union-attr]
            client = await LineClient.open(daemon.addresses[0])
            assert result_text(await client.call(1, "echo", text="warm")) == "warm"
            connected = [
                record.getMessage()
                for record in caplog.records
                if "connected; child pid" in record.getMessage()
            ]
            assert len(connected) == 1 and connected[0].endswith("(prespawned)")
            assert int(connected[0].split("child pid ")[1].split()[0]) in ready
            await poll(lambda: daemon.statistics().prespawned == 2)  # a replacement started
            assert daemon._pool.started == 3  # type: ignore[union-attr]
            await client.aclose()


async def test_a_prespawned_child_that_exits_before_use_is_replaced(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [f"unix:{sock_dir}/s.sock"], prespawn=1) as daemon:
            await poll(lambda: daemon.statistics().prespawned == 1)
            (first,) = daemon._pool.ready  # type: ignore[union-attr]
            os.kill(first.pid, signal.SIGKILL)
            await poll(
                lambda: (
                    [child.pid for child in daemon._pool.ready]  # type: ignore[union-attr]
                    not in ([], [first.pid])
                )
            )
            client = await LineClient.open(daemon.addresses[0])
            assert result_text(await client.call(1, "echo", text="fresh")) == "fresh"


async def test_waiting_prespawned_children_are_stopped_when_the_daemon_stops(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [f"unix:{sock_dir}/s.sock"], prespawn=3) as daemon:
            await poll(lambda: daemon.statistics().prespawned == 3)
            pids = [child.pid for child in daemon._pool.ready]  # type: ignore[union-attr]
        assert not any(process_exists(pid) for pid in pids)


async def test_a_child_that_cannot_be_prespawned_is_reported_and_the_daemon_keeps_serving(sock_dir, caplog):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            ("/nonexistent/server",), [f"unix:{sock_dir}/s.sock"], prespawn=1
        ) as daemon:
            await poll(lambda: any("cannot prespawn" in record.getMessage() for record in caplog.records))
            client = await LineClient.open(daemon.addresses[0])
            await client.send(call(1, "echo", text="x"))
            (reply,) = await client.receive_until_eof()
    assert reply["error"]["data"]["reason"] == "child-start-failed"
