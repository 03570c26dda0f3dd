"""Why a relayed connection ended: the :class:`Ending` record and the two endings the client causes.

The first condition that ends a connection is recorded as an ``Ending`` (by whichever part of the
relay notices it, through its :class:`FirstEnding`); its error then answers every request still in
flight.
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

from .._errors import CONNECTION_CLOSED


@attrs.frozen
class Ending:
    """Why a connection ended, and the error that answers its requests still in flight.

    Attributes:
        description: for the log.
        reason: ``error.data.reason`` of the replies to requests still in flight.
        code: their ``error.code``.
        data: further ``error.data`` fields.
        answers_unread: whether what the client had sent but the relay had not read yet is
            still read (bounded) and its requests answered with this error (:mod:`.unread`);
            False where the client is gone or is not trusted to frame.
    """

    description: str
    reason: str
    code: int = CONNECTION_CLOSED
    data: dict[str, Any] = attrs.field(factory=dict)
    answers_unread: bool = True


CLIENT_DONE = Ending("client closed the connection", "client-closed")
CLIENT_GONE = Ending("client disconnected", "client-disconnected", answers_unread=False)
STOPPED_AT_ONCE = Ending("the bridge was stopped at once", "shutting-down", answers_unread=False)


@attrs.define(eq=False)
class FirstEnding:
    """A connection's first :class:`Ending`, recorded by whichever part of its relay sees one first.

    An object of its own rather than a method of the relay: the parts that end the connection hold
    it, and not the relay that holds them, so no reference cycle keeps a finished relay (with its
    client's and its child's objects) until the next full collection.

    Attributes:
        ending: the first ending recorded, ``None`` before.
        ended: set once there is one.
        cut_short: cancelled once there is one (the relay's wait for a stop at once).
    """

    ending: Ending | None = None
    ended: trio.Event = attrs.field(factory=trio.Event)
    cut_short: trio.CancelScope = attrs.field(factory=trio.CancelScope)

    def end(self, ending: Ending) -> None:
        """Record ``ending`` if it is the first."""
        if self.ending is None:
            self.ending = ending
            self.ended.set()
            self.cut_short.cancel()
