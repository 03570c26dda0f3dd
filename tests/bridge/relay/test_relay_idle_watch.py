"""The idle timeout is watched by the task that waits for a graceful stop, not by one of its own
(bridge/_relay/idle.py ``IdleWatch.watch``), in virtual time as in test_relay_timeouts.py."""

from __future__ import annotations

import trio
import trio.testing
from test_relay_timeouts import VIRTUAL_DEADLINE, make_relay, run_then_close, tool_request

from bridge import Limits


def tasks_under(nursery: trio.Nursery) -> int:
    """The tasks running in ``nursery`` and in every nursery below it."""
    return sum(1 + sum(tasks_under(inner) for inner in task.child_nurseries) for task in nursery.child_tasks)


async def test_an_idle_timeout_costs_a_connection_no_task_of_its_own(autojump_clock) -> None:
    counts = []
    for idle_timeout in (None, 60.0):
        relay, _client, _child = make_relay(Limits(), idle_timeout=idle_timeout)
        with trio.fail_after(VIRTUAL_DEADLINE):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run_then_close, relay)
                await trio.testing.wait_all_tasks_blocked()
                counts.append(tasks_under(nursery))
                relay.stop_now.set()
    assert counts[0] == counts[1]


async def test_a_graceful_stop_still_ends_a_connection_with_an_idle_timeout_after_its_drain(
    autojump_clock,
) -> None:
    relay, client, child = make_relay(Limits(drain_timeout=5), idle_timeout=60)
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_then_close, relay)
            await client.send(tool_request(1))
            await child.server.receive()
            await trio.sleep(10)
            relay.stopping.set()
            await trio.sleep(1)  # the request in flight keeps it open for the drain
            assert relay.ending is None
            await child.server.send({"jsonrpc": "2.0", "id": 1, "result": {}})
            assert (await client.receive())["id"] == 1
    assert relay.ending is not None and relay.ending.reason == "shutting-down"
