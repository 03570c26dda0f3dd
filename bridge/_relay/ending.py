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
    """

    description: str
    reason: str
    code: int = CONNECTION_CLOSED
    data: dict[str, Any] = attrs.field(factory=dict)


CLIENT_DONE = Ending("client closed the connection", "client-closed")
CLIENT_GONE = Ending("client disconnected", "client-disconnected")
