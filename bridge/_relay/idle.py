"""Closing a connection that has been silent too long: no traffic either way, nothing in flight.

A half-open connection (its peer vanished without a FIN) or one a client simply forgot would
otherwise hold its child process for ever. The listener chooses the timeout
(:attr:`~channels.MessageChannel.idle_timeout`: off for ``unix:`` by default, one hour for
``tcp:`` and ``tls:``); the relay enforces it, since only it knows what is in flight. A request
in flight, however long, keeps the connection open: the timeout counts from the end of the last
traffic once nothing is awaited.

A daemon's relays share one :class:`IdleTimer`: one task and one heap of deadlines for all its
connections, instead of a cancel scope and a deadline per connection (about 1.3 KiB each).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Awaitable, Callable

import attrs
import trio

from .ending import Ending


@attrs.define(eq=False)
class IdleWatch:
    """When the connection last saw traffic, and the task that ends it once it has been idle too long.

    Args:
        timeout: seconds of silence (with nothing in flight) after which the connection ends.
    """

    timeout: float
    _last: float = attrs.field(init=False, factory=trio.current_time)

    def touch(self) -> None:
        """Traffic passed, either way."""
        self._last = trio.current_time()

    def ending(self) -> Ending:
        """Why the connection ends."""
        return Ending(f"connection idle for {self.timeout:g}s", "idle-timeout")

    async def run(self, wait_idle: Callable[[], Awaitable[None]], end: Callable[[Ending], None]) -> None:
        """End the connection (through ``end``) once it has been idle for ``timeout``.

        ``wait_idle`` returns once no request is in flight.
        """
        while True:
            await wait_idle()
            deadline = self._last + self.timeout
            if trio.current_time() >= deadline:
                end(self.ending())
                return
            await trio.sleep_until(deadline)


@attrs.define(eq=False)
class TimedWatch(IdleWatch):
    """An :class:`IdleWatch` an :class:`IdleTimer` keeps: what it checks, and when it checks next.

    Args:
        timeout: as :class:`IdleWatch`'s.
        busy: the number of requests in flight.
        end: ends the connection; ``None`` once the watch has left its timer.
    """

    busy: Callable[[], int]
    end: Callable[[Ending], None] | None
    due: float = attrs.field(init=False, default=0.0)  # the timer checks it then; its heap's order

    def __lt__(self, other: TimedWatch) -> bool:
        return self.due < other.due


@attrs.define(eq=False)
class IdleTimer:
    """Ends the idle connections of every :class:`TimedWatch` added, from one task (:meth:`run`).

    Each watch is checked at its ``due`` time, first its ``timeout`` after its last traffic. Busy
    then, it is checked again one ``timeout`` later: no task waits for the last request in flight
    to be answered, since the reply that leaves nothing in flight is traffic (it touches), so the
    connection cannot have been idle long enough before that. Those checks are one per
    ``timeout`` (an hour by default on ``tcp:``), and no connection ends earlier than
    :meth:`IdleWatch.run` would end it. A watch withdrawn stays in the heap until it is due or
    until the withdrawn ones are half of it, when they are swept out: the heap holds at most
    twice the watches in use.
    """

    _heap: list[TimedWatch] = attrs.field(init=False, factory=list)
    _withdrawn: int = attrs.field(init=False, default=0)  # in the heap, their ``end`` None
    _sleep: trio.CancelScope = attrs.field(init=False, factory=trio.CancelScope)  # run's wait

    def add(self, watch: TimedWatch) -> None:
        """Watch a connection from now on, until it ends or is :meth:`withdraw`-n."""
        watch.due = watch._last + watch.timeout
        heapq.heappush(self._heap, watch)
        if watch.due < self._sleep.deadline:
            self._sleep.deadline = watch.due

    def withdraw(self, watch: TimedWatch) -> None:
        """Stop watching (its connection is ending, or a graceful stop began); idempotent."""
        if watch.end is None:
            return
        watch.end = None
        self._withdrawn += 1
        if self._withdrawn * 2 > len(self._heap):
            self._heap = [kept for kept in self._heap if kept.end is not None]
            heapq.heapify(self._heap)
            self._withdrawn = 0

    async def run(self, until: trio.Event) -> None:
        """End each watched connection once it has been idle for its ``timeout``, until ``until``.

        Returns once ``until`` is set (a graceful stop: the connections drain instead).
        """
        while True:
            heap = self._heap
            with trio.move_on_at(heap[0].due if heap else math.inf) as self._sleep:
                await until.wait()
                return
            self._expire(trio.current_time())

    def _expire(self, now: float) -> None:
        heap = self._heap
        while heap and heap[0].due <= now:
            watch = heapq.heappop(heap)
            end = watch.end
            if end is None:
                self._withdrawn -= 1
            elif watch.busy():
                watch.due = now + watch.timeout
                heapq.heappush(heap, watch)
            elif now >= watch._last + watch.timeout:
                watch.end = None
                end(watch.ending())
            else:
                watch.due = watch._last + watch.timeout
                heapq.heappush(heap, watch)
