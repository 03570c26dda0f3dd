"""Closing a connection that has been silent too long: no traffic either way, nothing in flight.

A half-open connection (its peer vanished without a FIN) or one a client simply forgot would
otherwise hold its child process for ever. The listener chooses the timeout
(:attr:`~channels.MessageChannel.idle_timeout`: off for ``unix:`` by default, one hour for
``tcp:`` and ``tls:``); the relay enforces it, since only it knows what is in flight. A request
in flight, however long, keeps the connection open: the timeout counts from the end of the last
traffic once nothing is awaited.
"""

from __future__ import annotations

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

    async def run(self, wait_idle: Callable[[], Awaitable[None]], end: Callable[[Ending], None]) -> None:
        """End the connection (through ``end``) once it has been idle for ``timeout``.

        ``wait_idle`` returns once no request is in flight.
        """
        while True:
            await wait_idle()
            deadline = self._last + self.timeout
            if trio.current_time() >= deadline:
                end(Ending(f"connection idle for {self.timeout:g}s", "idle-timeout"))
                return
            await trio.sleep_until(deadline)

    async def watch(
        self, stopping: trio.Event, busy: Callable[[], int], end: Callable[[Ending], None]
    ) -> bool:
        """:meth:`run` in a task that also waits for ``stopping``: True if it ended the connection.

        Returns False once ``stopping`` is set. ``busy`` is the number of requests in flight. No
        task waits for the last of them to be answered: while one is, the watch wakes one
        ``timeout`` later, since the reply that leaves nothing in flight is traffic (it touches), so
        the connection cannot have been idle long enough before that. Those wakes are one per
        ``timeout`` (an hour by default on ``tcp:``), and it never ends a connection earlier
        than :meth:`run`.
        """
        while True:
            now = trio.current_time()
            if busy():
                deadline = now + self.timeout
            else:
                deadline = self._last + self.timeout
                if now >= deadline:
                    end(Ending(f"connection idle for {self.timeout:g}s", "idle-timeout"))
                    return True
            with trio.move_on_at(deadline):
                await stopping.wait()
                return False
