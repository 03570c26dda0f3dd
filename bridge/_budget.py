"""A byte budget: how much may be queued for one client before its producers wait."""

from __future__ import annotations

import trio


class ByteBudget:
    """Admits holders while their sizes add up to at most ``limit`` bytes.

    One holder alone may exceed the limit (a single message larger than the budget must still
    pass, or it would wait forever); everyone else then waits until it is released.

    Args:
        limit: bytes that may be held at once.
    """

    __slots__ = ("_closed", "_released", "limit", "used")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._closed = False
        self._released = trio.Event()

    async def acquire(self, size: int) -> None:
        """Wait until ``size`` bytes fit, then hold them. Cancel-safe: nothing is held if
        cancelled.

        Raises:
            trio.ClosedResourceError: the budget was closed (its consumer is gone), also while
                waiting.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        while not self._closed and self.used and self.used + size > self.limit:
            await self._released.wait()
        if self._closed:
            raise trio.ClosedResourceError("nobody consumes this budget any more")
        self.used += size

    def close(self) -> None:
        """The consumer is gone: fail every present and future :meth:`acquire`."""
        self._closed = True
        self._released.set()

    def release(self, size: int) -> None:
        """Give back ``size`` bytes and wake the waiters."""
        self.used -= size
        self._released.set()
        self._released = trio.Event()
