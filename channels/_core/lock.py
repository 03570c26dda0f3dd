"""A FIFO lock for hot paths where it is almost never contended."""

from __future__ import annotations

from typing import final

import trio


@final
class HandoffLock:
    """Mutual exclusion handed from holder to waiter in arrival order.

    ``trio.Lock`` checks its owner, registers parking-lot breakers and asks trio for the current
    task on every acquire and release; on a relay's path, which takes a lock for every write and
    almost never finds it held, that costs more than the write's own bookkeeping. This lock is a
    flag while nobody waits, and a ``trio.lowlevel.ParkingLot`` when someone does: ``release``
    hands the lock straight to the longest-waiting task, so the flag never drops in between and
    no newcomer can jump the queue.

    It does not know its owner: the caller pairs each acquire with one ``release``, in a
    ``finally``. A cancelled ``acquire`` did not take the lock.
    """

    __slots__ = ("_held", "_waiters")

    def __init__(self) -> None:
        self._held = False
        self._waiters = trio.lowlevel.ParkingLot()

    @property
    def held(self) -> bool:
        """Whether some task holds the lock."""
        return self._held

    def try_acquire(self) -> bool:
        """Take the lock if it is free, without yielding; True if taken."""
        if self._held:
            return False
        self._held = True
        return True

    async def acquire(self) -> None:
        """Take the lock, waiting in line if it is held. Not a checkpoint when it is free."""
        if self._held:
            await self._waiters.park()  # returns holding the lock: release hands it over
        else:
            self._held = True

    def release(self) -> None:
        """Hand the lock to the longest-waiting task, or free it."""
        if self._waiters:
            self._waiters.unpark()
        else:
            self._held = False
