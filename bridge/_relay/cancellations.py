"""Cancellations of requests that timed out, queued for the child and written as it reads them.

Both modes cancel at the child a request the bridge answered with ``-32001`` (``notifications/
cancelled``, as the stdio binding asks): the relay's :class:`~.ledger.Ledger` and shared mode's
admission. A child that reads nothing must hold up neither that answer nor the next timeout, so
the cancellations wait here, bounded, for a task of their own that writes them to the child.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import trio

from channels import JSONObject


class TimeoutCancellations:
    """The cancellations of requests that timed out, not written to the child yet.

    At most ``limit`` (``max_in_flight``: the requests one client may have at the child), the
    oldest dropped beyond. A child that reads nothing for that long loses a cancellation, which
    only asks it to stop early: its late reply is dropped either way.
    """

    __slots__ = ("_added", "_queue")

    def __init__(self, limit: int) -> None:
        self._queue: deque[JSONObject] = deque(maxlen=limit)
        self._added = trio.Event()

    def add(self, request_id: Any, timeout: float) -> None:
        """Queue the cancellation of ``request_id`` (the child's id), which timed out after ``timeout``."""
        self._queue.append(
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": request_id, "reason": f"timed out after {timeout:g}s"},
            }
        )
        self._added.set()

    def clear(self) -> None:
        """Forget those not written yet: the child they were for is gone, and its requests with it."""
        self._queue.clear()

    async def take(self) -> list[JSONObject]:
        """Wait until one is queued; return every one queued, oldest first, forgetting them."""
        while not self._queue:
            self._added = trio.Event()
            await self._added.wait()
        cancellations = list(self._queue)
        self._queue.clear()
        return cancellations
