"""Waiting for no request in flight (``Ledger.wait_idle``, a graceful stop's drain and the idle
watch): every waiter wakes once the last reply is written, and a connection whose requests are
answered with nobody waiting makes nothing for it (bridge/_relay/ledger.py)."""

from __future__ import annotations

import trio
import trio.testing

from bridge._relay.ledger import Ledger

TIMEOUT = 5  # seconds: nothing here does I/O; a wait that never ends fails the test


def reply_written(ledger: Ledger, request_id: int) -> None:
    """What the relay does once a reply to ``request_id`` is written to the client."""
    ledger.in_flight.writing([request_id])
    ledger.in_flight.written([request_id])
    ledger.check_idle()


async def test_waiting_for_no_request_in_flight_returns_at_once_when_none_is() -> None:
    ledger = Ledger(max_in_flight=4, request_timeout=None)
    with trio.fail_after(TIMEOUT):
        await ledger.wait_idle()


async def test_every_waiter_wakes_once_the_last_request_in_flight_is_answered_not_before() -> None:
    ledger = Ledger(max_in_flight=4, request_timeout=None)
    ledger.opened(1)
    ledger.opened(2)
    woken: list[str] = []

    async def wait(name: str) -> None:
        await ledger.wait_idle()
        woken.append(name)

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait, "drain")
            nursery.start_soon(wait, "idle watch")
            await trio.testing.wait_all_tasks_blocked()
            reply_written(ledger, 1)
            await trio.testing.wait_all_tasks_blocked()
            assert woken == []
            reply_written(ledger, 2)
    assert sorted(woken) == ["drain", "idle watch"]


async def test_a_waiter_woken_after_new_requests_came_waits_for_those_too() -> None:
    ledger = Ledger(max_in_flight=4, request_timeout=None)
    ledger.opened(1)
    woken = trio.Event()

    async def wait() -> None:
        await ledger.wait_idle()
        woken.set()

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            reply_written(ledger, 1)
            ledger.opened(2)  # before the woken waiter runs
            await trio.testing.wait_all_tasks_blocked()
            assert not woken.is_set()
            reply_written(ledger, 2)
            await woken.wait()


def test_requests_answered_with_nobody_waiting_make_no_event() -> None:
    ledger = Ledger(max_in_flight=4, request_timeout=None)
    for request_id in range(3):
        ledger.opened(request_id)
        reply_written(ledger, request_id)
        assert ledger._idle is None  # made by a waiter only
