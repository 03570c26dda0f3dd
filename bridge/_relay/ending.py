"""Why a relayed connection ended: the :class:`Ending` record and the two endings the client causes.

The first condition that ends a connection is recorded as an ``Ending`` (by whichever part of the
relay notices it); its error then answers every request still in flight.
"""

from __future__ import annotations

from typing import Any

import attrs

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
