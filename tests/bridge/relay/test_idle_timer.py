"""One idle timer for many connections (bridge/_relay/idle.py ``IdleTimer``): one task, one heap,
each connection still ended exactly its idle timeout after its last traffic, in virtual time."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from test_relay_idle_watch import tasks_under
from test_relay_timeouts import (
    VIRTUAL_DEADLINE,
    FakeChild,
    channel_pair,
    make_relay,
    run_then_close,
    tool_request,
)

from bridge import Limits, Relay
from bridge._relay.ending import Ending
from bridge._relay.idle import IdleTimer, TimedWatch
from channels import StreamChannel

TIMEOUT = 60.0
CONNECTIONS = 20


def daemon_relays(
    count: int, limits: Limits, stopping: trio.Event, timer: IdleTimer
) -> list[tuple[Relay, StreamChannel, FakeChild]]:
    """Relays as a daemon makes them: one ``stopping`` event and one idle timer for all."""
    relays = []
    for _ in range(count):
        client, client_end = channel_pair()
        client_end.idle_timeout = TIMEOUT
        bridge_end, server = channel_pair()
        child = FakeChild(bridge_end, server)
        relay = Relay(client_end, child, limits, stopping, idle_timer=timer)  # type: ignore[arg-type]
        relays.append((relay, client, child))
    return relays


class Ends:
    """Records when each watch's connection was ended."""

    def __init__(self) -> None:
        self.at: dict[int, float] = {}

    def watch(self, key: int, busy: list[int] | None = None) -> TimedWatch:
        in_flight = busy if busy is not None else [0]

        def end(ending: Ending) -> None:
            assert ending.reason == "idle-timeout" and key not in self.at
            self.at[key] = trio.current_time()

        return TimedWatch(TIMEOUT, lambda: in_flight[0], end)


async def test_many_connections_share_one_timer_task_and_each_is_ended_on_time(autojump_clock) -> None:
    ends = Ends()
    timer = IdleTimer()
    stop = trio.Event()
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(timer.run, stop)
            start = trio.current_time()
            watches = []
            for key in range(CONNECTIONS):  # one a second: every deadline a different one
                watch = ends.watch(key)
                timer.add(watch)
                watches.append(watch)
                await trio.sleep(1)
            await trio.sleep(TIMEOUT / 2 - CONNECTIONS)
            watches[0].touch()  # traffic half-way: its timeout counts from here
            await trio.testing.wait_all_tasks_blocked()
            assert tasks_under(nursery) == 1
            await trio.sleep(2 * TIMEOUT)
            stop.set()
    expected = {key: start + key + TIMEOUT for key in range(CONNECTIONS)}
    expected[0] = start + TIMEOUT / 2 + TIMEOUT
    assert ends.at == pytest.approx(expected)


async def test_a_connection_busy_past_its_idle_timeout_is_ended_a_timeout_after_its_last_reply(
    autojump_clock,
) -> None:
    ends = Ends()
    timer = IdleTimer()
    stop = trio.Event()
    busy = [1]
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(timer.run, stop)
            watch = ends.watch(0, busy)
            timer.add(watch)
            timer.add(ends.watch(1))  # an idle neighbour ends on time meanwhile
            await trio.sleep(10 * TIMEOUT + 5)  # ten timeouts with a request in flight
            assert list(ends.at) == [1]
            busy[0] = 0
            watch.touch()  # the reply that leaves nothing in flight
            replied = trio.current_time()
            await trio.sleep(2 * TIMEOUT)
            stop.set()
    assert ends.at[0] == pytest.approx(replied + TIMEOUT)


async def test_a_withdrawn_connection_is_never_ended_and_the_timer_holds_at_most_twice_those_in_use(
    autojump_clock,
) -> None:
    ends = Ends()
    timer = IdleTimer()
    stop = trio.Event()
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(timer.run, stop)
            kept = ends.watch(-1)
            timer.add(kept)
            for key in range(CONNECTIONS):  # short connections, each withdrawn as it ends
                watch = ends.watch(key)
                timer.add(watch)
                timer.withdraw(watch)
                timer.withdraw(watch)  # idempotent
                assert len(timer._heap) <= 2
            await trio.sleep(2 * TIMEOUT)
            stop.set()
    assert list(ends.at) == [-1]


async def test_a_graceful_stop_ends_the_shared_timer_and_each_relay_still_drains(autojump_clock) -> None:
    timer = IdleTimer()
    with trio.fail_after(VIRTUAL_DEADLINE):
        stopping = trio.Event()
        relays = daemon_relays(3, Limits(drain_timeout=5), stopping, timer)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(timer.run, stopping)
            for relay, _client, _child in relays:
                nursery.start_soon(run_then_close, relay)
            busy, client, child = relays[0]
            await client.send(tool_request(1))
            await child.server.receive()
            await trio.sleep(TIMEOUT / 2)
            stopping.set()
            await trio.sleep(1)  # the request in flight keeps its connection open for the drain
            assert busy.ending is None
            await child.server.send({"jsonrpc": "2.0", "id": 1, "result": {}})
            assert (await client.receive())["id"] == 1
    assert [relay.ending.reason for relay, _, _ in relays if relay.ending] == ["shutting-down"] * 3


async def test_relays_given_one_timer_are_ended_when_idle_without_a_task_of_their_own(autojump_clock) -> None:
    timer = IdleTimer()
    stop = trio.Event()
    with trio.fail_after(VIRTUAL_DEADLINE):
        relays = daemon_relays(3, Limits(), trio.Event(), timer)
        alone, _client, _child = make_relay(Limits())  # no idle timeout: the tasks of a relay
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_then_close, alone)
            await trio.testing.wait_all_tasks_blocked()
            tasks_of_one = tasks_under(nursery)
            nursery.start_soon(timer.run, stop)
            for relay, _client, _child in relays:
                nursery.start_soon(run_then_close, relay)
            await trio.testing.wait_all_tasks_blocked()
            assert tasks_under(nursery) == 4 * tasks_of_one + 1
            await trio.sleep(TIMEOUT / 2)
            assert all(relay.ending is None for relay, _, _ in relays)
            await trio.sleep(TIMEOUT)
            assert [relay.ending.reason for relay, _, _ in relays if relay.ending] == ["idle-timeout"] * 3
            alone.stop_now.set()
            stop.set()
