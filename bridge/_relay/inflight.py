"""Which requests of one client are awaiting a reply. Sans-IO.

Ids are kept as the client sent them: ``1`` and ``"1"`` are different requests (``dict`` keys keep
that distinction, and ``bool`` ids never get this far), so a reply is matched with its exact id.
"""

from __future__ import annotations

from collections import OrderedDict

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
    """

    __slots__ = ("_cancelled", "_ids", "_opened", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._ids: dict[RequestId, int] = {}
        self._cancelled: OrderedDict[RequestId, None] = OrderedDict()
        self._opened = 0

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._ids

    def open(self, request_id: RequestId) -> int:
        """A request was forwarded; return its token.

        The token tells it apart from a later request that reuses the id (see :meth:`is_open`).

        Raises:
            DuplicateRequest: ``request_id`` is already in flight.
            TooManyRequests: the limit is reached.
        """
        if request_id in self._ids:
            raise DuplicateRequest(request_id)
        if len(self._ids) >= self.limit:
            raise TooManyRequests(request_id)
        self._cancelled.pop(request_id, None)
        self._opened += 1
        self._ids[request_id] = self._opened
        return self._opened

    def is_open(self, request_id: RequestId, token: int) -> bool:
        """Whether the request that :meth:`open` gave ``token`` is still in flight."""
        return self._ids.get(request_id) == token

    def close(self, request_id: RequestId) -> bool:
        """A reply arrived; return whether to forward it.

        True if it answers a request in flight; False if it is late for a cancelled request or
        answers nothing we know (drop it).
        """
        if request_id in self._ids:
            del self._ids[request_id]
            return True
        self._cancelled.pop(request_id, None)
        return False

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
        """The client cancelled a request: it no longer expects a reply. True if it was in flight."""
        if request_id not in self._ids:
            return False
        del self._ids[request_id]
        self._cancelled[request_id] = None
        if len(self._cancelled) > REMEMBERED_CANCELLATIONS:
            self._cancelled.popitem(last=False)
        return True

    def take_all(self) -> list[RequestId]:
        """Every id still in flight, oldest first; the set is then empty."""
        ids = list(self._ids)
        self._ids.clear()
        return ids
