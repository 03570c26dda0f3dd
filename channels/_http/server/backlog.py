"""A session's backpressure: bytes queued for its client and not yet written, and the wait for room.

The channel side of a session (or of a 2026-07-28 request) waits here before it queues a message
on a :class:`~channels._http.server.stream.ResponseStream`, while the HTTP side writes them out.
"""

from __future__ import annotations

import attrs
import trio

from ..._core.errors import SendTimeout

# Bytes queued for a client and not written (a session's, or one response's: what a client that
# does not read can make the bridge hold), beyond which the bridge's sends wait, up to its send
# timeout. As much as shared mode queues per client (Limits.client_queue_bytes); one message of
# any size still passes when nothing is queued.
BACKLOG_LIMIT = 8 * 1024 * 1024


@attrs.define(eq=False)
class Backlog:
    """Bytes queued and not yet written, over all of a session's streams (backpressure).

    Attributes:
        unwritten: bytes queued and not written.
    """

    unwritten: int = 0
    # Made by a sender that waits for room, and only then: most backlogs (one per 2026-07-28
    # request) never have one waiting.
    _room: trio.Event | None = None

    def add(self, size: int) -> None:
        self.unwritten += size

    def remove(self, size: int) -> None:
        self.unwritten = max(0, self.unwritten - size)
        if self._room is not None:
            self._room.set()

    def progressed(self) -> None:
        """The client took part of a response: progress, though no message is written whole yet."""
        if self._room is not None:
            self._room.set()

    async def make_room(self, timeout: float | None) -> None:
        """Backpressure: wait while more than :data:`BACKLOG_LIMIT` bytes are queued.

        ``timeout`` bounds the time without progress, not the whole wait: a client reading its
        responses steadily (many of them, each at its own pace) may keep the backlog over the
        limit for long, and is not too slow for it; one that reads nothing at all for
        ``timeout`` seconds is. Progress is any byte the client takes (:meth:`progressed`), not
        only a whole message (:meth:`remove`): many large responses read at once may each take
        longer than ``timeout``.

        Raises:
            SendTimeout: the client read nothing for ``timeout`` seconds.
        """
        limit = float("inf") if timeout is None else timeout
        while self.unwritten > BACKLOG_LIMIT:
            with trio.move_on_after(limit) as waited:
                room = self._room = trio.Event()
                await room.wait()
            if waited.cancelled_caught:
                raise SendTimeout(f"the client read nothing for {timeout:g}s")
