"""HandoffLock: the writers' lock on the relay's and the WebSocket channel's hot paths."""

from __future__ import annotations

import trio
import trio.testing

from channels import HandoffLock

TIMEOUT = 5  # seconds; nothing here waits on I/O


async def test_a_free_lock_is_taken_without_a_checkpoint() -> None:
    lock = HandoffLock()
    with trio.fail_after(TIMEOUT), trio.CancelScope() as scope:
        scope.cancel()  # a checkpoint here would raise Cancelled
        await lock.acquire()
    assert lock.held


async def test_waiters_get_the_lock_in_the_order_they_came() -> None:
    lock = HandoffLock()
    order: list[int] = []

    async def take(number: int) -> None:
        await lock.acquire()
        order.append(number)
        await trio.sleep(0)
        lock.release()

    with trio.fail_after(TIMEOUT):
        await lock.acquire()
        async with trio.open_nursery() as nursery:
            for number in range(5):
                nursery.start_soon(take, number)
                await trio.testing.wait_all_tasks_blocked()
            lock.release()
    assert order == [0, 1, 2, 3, 4]
    assert not lock.held


async def test_a_released_lock_goes_to_the_waiter_and_no_newcomer_can_take_it_in_between() -> None:
    lock = HandoffLock()
    got_it = trio.Event()

    async def waiter() -> None:
        await lock.acquire()
        got_it.set()
        lock.release()

    with trio.fail_after(TIMEOUT):
        await lock.acquire()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            lock.release()
            assert lock.held  # handed over, not freed
            assert not lock.try_acquire()
            await got_it.wait()
    assert not lock.held


async def test_a_cancelled_waiter_leaves_the_line_without_the_lock() -> None:
    lock = HandoffLock()
    first_scope = trio.CancelScope()
    second_got_it = trio.Event()

    async def first() -> None:
        with first_scope:
            await lock.acquire()
            raise AssertionError("a cancelled waiter must not get the lock")

    async def second() -> None:
        await lock.acquire()
        second_got_it.set()
        lock.release()

    with trio.fail_after(TIMEOUT):
        await lock.acquire()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(second)
            await trio.testing.wait_all_tasks_blocked()
            first_scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            lock.release()
            await second_got_it.wait()
    assert not lock.held
