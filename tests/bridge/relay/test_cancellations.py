"""The queue of timed-out requests' cancellations (bridge/_relay/cancellations.py), with no child.

How they reach a real child is tested with each mode's request timeout (test_relay_timeouts.py,
tests/bridge/shared); here, what the queue itself promises: the message, the bound, the wait.
"""

from __future__ import annotations

import trio
import trio.testing

from bridge._relay.cancellations import TimeoutCancellations

TIMEOUT = 5


def cancellation(request_id: object, reason: str) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id, "reason": reason},
    }


async def test_take_waits_for_a_cancellation_and_returns_every_one_queued_oldest_first() -> None:
    cancellations = TimeoutCancellations(limit=4)
    taken: list[object] = []
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:

            async def take() -> None:
                taken.extend(await cancellations.take())

            nursery.start_soon(take)
            await trio.testing.wait_all_tasks_blocked()
            assert taken == []  # nothing queued yet: it waits
            cancellations.add(7, 30)
            cancellations.add("x", 1.5)
        assert taken == [cancellation(7, "timed out after 30s"), cancellation("x", "timed out after 1.5s")]
        cancellations.add(8, 30)
        assert await cancellations.take() == [cancellation(8, "timed out after 30s")]  # forgotten once taken


async def test_beyond_the_limit_the_oldest_is_dropped_and_clear_forgets_every_one() -> None:
    cancellations = TimeoutCancellations(limit=2)
    for request_id in (1, 2, 3):
        cancellations.add(request_id, 10)
    with trio.fail_after(TIMEOUT):
        assert [item["params"]["requestId"] for item in await cancellations.take()] == [2, 3]
    cancellations.add(4, 10)
    cancellations.clear()  # the child is gone
    with trio.move_on_after(0.05):  # bounded: take must wait, there being nothing to take
        await cancellations.take()
        raise AssertionError("take returned with nothing queued")
