"""cancelled_when: a block that runs until it ends or something else happens first."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from channels import cancelled_when

TIMEOUT = 5  # seconds; nothing here waits on I/O


async def test_a_block_that_ends_first_ends_as_usual_and_the_wait_is_cancelled() -> None:
    waits_cancelled = []

    async def wait() -> None:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            waits_cancelled.append(True)
            raise

    with trio.fail_after(TIMEOUT):
        async with cancelled_when(wait) as cutoff:
            await trio.testing.wait_all_tasks_blocked()  # the wait has begun
    assert not cutoff.happened
    assert waits_cancelled == [True]


async def test_what_happens_first_cancels_the_block_quietly_and_says_so() -> None:
    stop = trio.Event()
    reached_after = False
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_set_when_blocked, stop)
            async with cancelled_when(stop.wait) as cutoff:
                await trio.sleep_forever()
            reached_after = True
    assert cutoff.happened
    assert reached_after


async def test_a_wait_that_has_already_happened_cancels_the_block_at_its_first_checkpoint() -> None:
    stop = trio.Event()
    stop.set()
    steps = []
    with trio.fail_after(TIMEOUT):
        async with cancelled_when(stop.wait) as cutoff:
            steps.append("before")
            await trio.sleep_forever()
            steps.append("after")  # never
    assert cutoff.happened
    assert steps == ["before"]


async def test_an_exception_from_the_block_arrives_as_itself_not_in_a_group() -> None:
    with trio.fail_after(TIMEOUT), pytest.raises(ValueError, match="from the block"):
        async with cancelled_when(trio.sleep_forever):
            raise ValueError("from the block")


async def test_an_exception_from_the_wait_arrives_as_itself_and_cancels_the_block() -> None:
    cancelled = []

    async def failing_wait() -> None:
        raise OSError("from the wait")

    with trio.fail_after(TIMEOUT), pytest.raises(OSError, match="from the wait"):
        async with cancelled_when(failing_wait):
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                cancelled.append(True)
                raise
    assert cancelled == [True]


async def test_a_cancellation_from_outside_still_reaches_the_block_and_is_not_taken_for_the_wait() -> None:
    with trio.fail_after(TIMEOUT):
        with trio.CancelScope() as outer:
            outer.cancel()
            async with cancelled_when(trio.sleep_forever) as cutoff:
                await trio.sleep_forever()
    assert outer.cancelled_caught
    assert not cutoff.happened


async def _set_when_blocked(event: trio.Event) -> None:
    await trio.testing.wait_all_tasks_blocked()
    event.set()
