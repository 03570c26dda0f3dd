"""Replies from a child that answer no request in flight: dropped, counted and logged (rate-limited).

A child that writes the same reply twice, or a reply to an id nobody sent, must not reach any
client: every request gets exactly one reply (docs/design.md §5.1). A late reply to a request the
client cancelled, or that the bridge already answered, is an expected race and only counted at
debug level; anything else is a WARNING naming the id, a few a second at most.
"""

from __future__ import annotations

import logging

import trio

from .._child.stderr import RateLimiter

logger = logging.getLogger("bridge.relay")

# WARNING lines per second about stray replies, per child; the rest are counted and the count
# given with the next line. As many as for junk on a child's stdout (GARBAGE_LOGS_PER_SECOND):
# both are a misbehaving child, and a flood must not fill the journal.
STRAY_REPLY_LOGS_PER_SECOND = 5


class StrayReplies:
    """Counts the child replies dropped because they answer no request in flight; one per child.

    Attributes:
        count: replies dropped so far that answered nothing the bridge knew (duplicates, unknown
            ids); late replies to cancelled or already-answered requests are not counted. Summed
            by the daemon over its children (``mcp_bridge_stray_replies_total``).
    """

    def __init__(self) -> None:
        self.count = 0
        self._limiter = RateLimiter(STRAY_REPLY_LOGS_PER_SECOND)

    def late(self, where: object, request_id: object) -> None:
        """A reply to a request that was cancelled or answered by the bridge: an expected race."""
        logger.debug("%s: dropped the child's late reply to request %r", where, request_id)

    def stray(self, where: object, request_id: object) -> None:
        """A reply to no request in flight (a duplicate, or an id nobody sent): drop, count, warn."""
        self.count += 1
        allowed, suppressed = self._limiter.admit(trio.current_time())
        if allowed:
            logger.warning(
                "%s: dropped the child's reply to no request in flight (a duplicate or an unknown id): "
                "id %r%s",
                where,
                request_id,
                f" ({suppressed} more dropped)" if suppressed else "",
            )
