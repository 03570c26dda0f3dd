"""Who is using the daemon's child right now: the count ``start = "on-demand"`` stops it by.

Every connection the daemon serves is a user from before its child is started (or looked up) until
it has ended, so "no user" means no client connected and no request in flight: a Streamable HTTP
request of a modern client is a connection of its own for as long as it runs, and a legacy
session is one until it ends. :meth:`Usage.idle_for` is what the daemon's idle stop waits on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import attrs
import trio


@attrs.define(eq=False)
class Usage:
    """A count of users, and a wait for it to stay at zero for a while.

    Owned by the daemon; :meth:`using` is called by whoever serves a connection.
    """

    users: int = 0
    # Made by the waiter (only on demand is there one), so a request's coming and going makes none.
    _changed: trio.Event | None = attrs.field(init=False, default=None)

    @contextmanager
    def using(self) -> Iterator[None]:
        """Count one user while the block runs."""
        self.add()
        try:
            yield
        finally:
            self.remove()

    def add(self) -> None:
        """Count one more user; the caller calls :meth:`remove` once it has ended, come what may."""
        self._change(+1)

    def remove(self) -> None:
        """One user has ended."""
        self._change(-1)

    def _change(self, delta: int) -> None:
        self.users += delta
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def _wait_change(self) -> None:
        if self._changed is None:
            self._changed = trio.Event()
        await self._changed.wait()

    async def idle_for(self, seconds: float) -> None:
        """Return once there has been no user for ``seconds`` on end.

        Any user coming or going starts the period again (one that came and went left at the
        end of its request). The caller checks :attr:`users` again under its own lock before
        acting, since a user may come at any checkpoint after this returns.
        """
        while True:
            while self.users:
                await self._wait_change()
            with trio.move_on_after(seconds) as period:
                await self._wait_change()
            if period.cancelled_caught:
                return
