"""Which requests of one client are awaiting a reply. Sans-IO.

Ids are kept as the client sent them: ``1`` and ``"1"`` are different requests (``dict`` keys keep
that distinction, and ``bool`` ids never get this far), so a reply is matched with its exact id.

A request is *open* from :meth:`InFlight.open` (:meth:`InFlight.open_all` for a batch) until its
reply has been written: the child's (:meth:`InFlight.writing`, then :meth:`InFlight.written`), or
the bridge's error when it timed out (:meth:`InFlight.time_out`, then :meth:`InFlight.answered`).
Until then it is in flight, and answered by the relay if the connection ends
(:meth:`InFlight.take_all`). Each step keeps the other answer out: a reply being written is not
timed out, and the child's reply to a request that timed out is dropped as late. A request the
client cancels (:meth:`InFlight.cancel`) is closed at once, even while its reply is being
written: its id may then be used again, and the new request is not closed by that reply. Every
request gets exactly one reply (docs/design.md §5.1).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from channels import RequestId

# Cancelled ids remembered so that the child's late reply can be dropped (the spec asks servers not
# to reply to a cancelled request, but tolerates races); beyond this the oldest are forgotten.
REMEMBERED_CANCELLATIONS = 256


class DuplicateRequest(Exception):
    """The client reused an id that is still in flight (the spec forbids it)."""


class TooManyRequests(Exception):
    """The client already has the maximum number of requests in flight."""


class InFlight:
    """The set of a client's request ids that still need exactly one reply.

    Args:
        limit: most requests in flight at once.

    Attributes:
        awaiting: the ids whose reply from the child is awaited, id → token (``request_id in
            awaiting`` is ``request_id in self``, without a call per reply). Read it; only the
            methods here change it.
    """

    __slots__ = ("_cancelled", "_ids", "_opened", "_timed_out", "_writing", "awaiting", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        # Awaiting the child's reply: id → token.
        self._ids: dict[RequestId, int] = {}
        self.awaiting = self._ids  # the same dict, never replaced (take_all clears it)
        # Of those, the ones whose reply from the child is being written.
        self._writing: set[RequestId] = set()
        # Timed out: the bridge's error is due, and not written yet.
        self._timed_out: dict[RequestId, None] = {}
        self._cancelled: OrderedDict[RequestId, None] = OrderedDict()
        self._opened = 0

    def __len__(self) -> int:
        """Requests still owed a reply: awaiting the child's, or the bridge's error for a timeout."""
        return len(self._ids) + len(self._timed_out)

    def __contains__(self, request_id: object) -> bool:
        """Whether the child's reply to ``request_id`` is awaited (and may be forwarded)."""
        return request_id in self._ids

    def open(self, request_id: RequestId) -> int:
        """A request was forwarded; return its token.

        The token tells it apart from a later request that reuses the id (see :meth:`is_open`).

        Raises:
            DuplicateRequest: ``request_id`` is already in flight.
            TooManyRequests: the limit is reached.
        """
        ids, timed_out = self._ids, self._timed_out
        if request_id in ids or request_id in timed_out:
            raise DuplicateRequest(request_id)
        if len(ids) + len(timed_out) >= self.limit:  # len(self), without a call per request
            raise TooManyRequests(request_id)
        self._cancelled.pop(request_id, None)
        self._opened += 1
        self._ids[request_id] = self._opened
        return self._opened

    def open_all(self, request_ids: list[RequestId]) -> int | None:
        """Requests were forwarded together: open all of them, or none; the first one's token.

        The others' tokens follow it, one apart, in order. ``None`` (nothing opened) if
        :meth:`open` would refuse any of them, one after the other: an id in flight, twice in
        ``request_ids``, or more than the limit. One call for a batch, where :meth:`open` is one
        per request.
        """
        ids, timed_out = self._ids, self._timed_out
        first = self._opened + 1
        batch = dict(zip(request_ids, range(first, first + len(request_ids)), strict=True))
        if (
            len(batch) != len(request_ids)
            or len(ids) + len(timed_out) + len(batch) > self.limit
            or not ids.keys().isdisjoint(batch)
            or not timed_out.keys().isdisjoint(batch)
        ):
            return None
        if self._cancelled:
            for request_id in batch:
                self._cancelled.pop(request_id, None)
        ids.update(batch)
        self._opened += len(batch)
        return first

    def is_open(self, request_id: RequestId, token: int) -> bool:
        """Whether the request that :meth:`open` gave ``token`` is still in flight."""
        return self._ids.get(request_id) == token

    def is_being_written(self, request_id: RequestId) -> bool:
        """Whether the child's reply to ``request_id`` is being written to the client."""
        return request_id in self._writing

    def writing(self, request_ids: Iterable[RequestId]) -> None:
        """The child's replies to these requests in flight are being written: none may time out.

        Once written, each is closed (:meth:`written`); if the write fails, the connection ends and
        they are answered with the rest (:meth:`take_all`). One writer marks them: it calls
        :meth:`written` before it marks the next.
        """
        self._writing.update(request_ids)

    def written(self, request_ids: Iterable[RequestId]) -> None:
        """The replies to these requests, marked :meth:`writing`, were written: each is closed.

        One cancelled meanwhile was closed then (:meth:`cancel`), and its id may already be in
        use again by a new request, which stays open: the id is closed only if still marked.
        """
        ids, writing = self._ids, self._writing
        for request_id in request_ids:
            # Marked means it is the same request: cancel and take_all unmark what they
            # close, and open refuses an id while it is in flight.
            if request_id in writing:
                del ids[request_id]
        writing.difference_update(request_ids)  # one call for the batch, not one per reply

    def was_cancelled(self, request_id: RequestId) -> bool:
        """A reply to no request in flight: whether it is the late reply to a cancelled one.

        True at most once per cancellation (the id is forgotten); False for a reply that answers
        nothing we know, such as a second reply to the same request.
        """
        if request_id in self._cancelled:
            del self._cancelled[request_id]
            return True
        return False

    def cancel(self, request_id: RequestId) -> bool:
        """The client cancelled a request: it no longer expects a reply. True if it was in flight.

        The child's reply to it, if one comes, is dropped as late; unless that reply is being
        written already (:meth:`writing`): it goes out, and any later one is a second reply.
        """
        if request_id not in self._ids:
            return False
        del self._ids[request_id]
        writing = self._writing
        if request_id in writing:
            writing.remove(request_id)
        else:
            self._remember_cancelled(request_id)
        return True

    def time_out(self, request_id: RequestId) -> None:
        """A request in flight, whose reply is not being written, timed out: the bridge answers it.

        The child's reply to it is dropped from now on (as late, :meth:`was_cancelled`); the
        request stays owed a reply, and counted, until :meth:`answered`.
        """
        del self._ids[request_id]
        self._remember_cancelled(request_id)
        self._timed_out[request_id] = None

    def answered(self, request_id: RequestId) -> None:
        """The bridge's error for a request that timed out was written."""
        self._timed_out.pop(request_id, None)

    def _remember_cancelled(self, request_id: RequestId) -> None:
        self._cancelled[request_id] = None
        if len(self._cancelled) > REMEMBERED_CANCELLATIONS:
            self._cancelled.popitem(last=False)

    def take_all(self) -> list[RequestId]:
        """Every id still owed a reply, oldest first (those timed out first); the set is then empty."""
        ids = [*self._timed_out, *self._ids]
        self._timed_out.clear()
        self._ids.clear()
        self._writing.clear()
        return ids
