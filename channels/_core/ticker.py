"""Coarse deadlines for many waiters, checked by one task (no cancel scope on the hot path).

An HTTP request has two deadlines that almost never fire: the time to read it (idle, head, body)
and the time its answer may take before the response turns into an event stream. A trio cancel
scope per deadline costs a measurable part of a small request (entering, arming and closing it),
so the HTTP listener registers its waiters here instead, and one task wakes every :data:`TICK`
seconds and expires those whose deadline passed. A deadline fires up to one tick late.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import trio

# How often deadlines are checked: the precision of the HTTP listener's read timeouts (10 s by
# default) and of its 1 s wait before a response turns into an event stream.
TICK = 0.25


class Waiter(Protocol):
    """Something with a deadline (``trio.current_time()`` units) that may move while it waits."""

    @property
    def deadline(self) -> float: ...

    def expire(self) -> None:
        """The deadline passed: stop waiting (cancel a read, wake a wait)."""


class Ticker:
    """The waiters of one HTTP address; :meth:`run` expires each one whose deadline passed, once."""

    def __init__(self, tick: float = TICK) -> None:
        self.tick = tick
        self._waiters: set[Waiter] = set()

    def add(self, waiter: Waiter) -> None:
        self._waiters.add(waiter)

    def discard(self, waiter: Waiter) -> None:
        self._waiters.discard(waiter)

    def waiters(self) -> list[Waiter]:
        return list(self._waiters)

    async def run(self, done: Callable[[], bool] = lambda: False) -> None:
        """Check the deadlines every tick, until cancelled or ``done()``."""
        while not done():
            await trio.sleep(self.tick)
            now = trio.current_time()
            for waiter in [waiter for waiter in self._waiters if waiter.deadline <= now]:
                self._waiters.discard(waiter)
                waiter.expire()
