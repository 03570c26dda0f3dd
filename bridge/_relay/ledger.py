"""One connection's book of requests: which await a reply, whether none does, and when each times out.

Both of the relay's directions write in it: the client → child pump opens requests and cancels
them, the child → client pump closes them as the replies go out, and :meth:`Ledger.expire_requests`
answers those that outlive ``request_timeout``. The ledger also remembers the child's own requests
to the client, so that only the client's answers to them reach the child, and which requests in
flight are ``tools/list``, whose replies per-tool scopes filter (:mod:`.scopes`).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from channels import JSONObject, MessageChannel, RequestId

from .._errors import REQUEST_TIMEOUT, error_response
from .cancellations import TimeoutCancellations
from .inflight import InFlight

logger = logging.getLogger("bridge.relay")

# How many deadlines per allowed request in flight the queue may hold before the answered ones
# are swept out: twice, so that each sweep is paid for by as many appends as it keeps entries.
DEADLINES_KEPT_PER_LIMIT = 2


@attrs.define(eq=False)
class Ledger:
    """The requests of one connection, in both directions.

    Args:
        max_in_flight: most client requests in flight at once (and most child requests
            remembered).
        request_timeout: how long a client request may stay in flight; ``None`` for no limit.

    Attributes:
        in_flight: the client's requests awaiting a reply (the child's, or the bridge's error for a
            timeout).
        child_requests: ids of the child's requests to the client not answered yet (oldest
            forgotten first, beyond ``max_in_flight``).
        tool_lists: ``tools/list`` requests in flight whose replies are filtered, id → the token
            :meth:`InFlight.open` gave it (so that a later request reusing the id is told apart).
    """

    max_in_flight: int
    request_timeout: float | None
    in_flight: InFlight = attrs.field(init=False)
    child_requests: dict[Any, None] = attrs.field(init=False, factory=dict)
    tool_lists: dict[Any, int] = attrs.field(init=False, factory=dict)
    # What wait_idle waits on, made by the first waiter and dropped when set: a connection's
    # requests, answered one at a time, make no Event each (its attrs __init__ and set).
    _idle: trio.Event | None = attrs.field(init=False, default=None)
    # The fields below serve the request timeout only, and exist only with one: every connection
    # has a ledger, and an empty deque is 624 bytes, an Event about 300.
    # (deadline, id, token) of requests in flight, in admission order; with one timeout for all,
    # that is also deadline order, so a deque replaces a heap.
    _deadlines: deque[tuple[float, Any, int]] = attrs.field(init=False)
    _deadline_added: trio.Event = attrs.field(init=False)
    _cancellations: TimeoutCancellations = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.in_flight = InFlight(self.max_in_flight)
        if self.request_timeout is not None:
            self._deadlines = deque()
            self._deadline_added = trio.Event()
            self._cancellations = TimeoutCancellations(self.max_in_flight)

    def opened(self, request_id: Any, lists_tools: bool = False) -> None:
        """A client request is forwarded: it is in flight, with a deadline if there is a timeout.

        ``lists_tools``: it is a ``tools/list`` whose reply is to be filtered (:meth:`lists_tools`).

        Raises:
            DuplicateRequest: ``request_id`` is already in flight.
            TooManyRequests: ``max_in_flight`` requests are.
        """
        token = self.in_flight.open(request_id)
        if lists_tools:
            tool_lists = self.tool_lists
            tool_lists[request_id] = token
            if len(tool_lists) > DEADLINES_KEPT_PER_LIMIT * self.max_in_flight:
                # Those answered by the bridge (timed out, cancelled) are never taken: sweep them.
                for stale in [
                    key for key, kept in tool_lists.items() if not self.in_flight.is_open(key, kept)
                ]:
                    del tool_lists[stale]
        if self.request_timeout is not None:
            self._deadlines.append((trio.current_time() + self.request_timeout, request_id, token))
            if len(self._deadlines) > DEADLINES_KEPT_PER_LIMIT * self.max_in_flight:
                self._forget_answered_deadlines()
            self._deadline_added.set()

    def opened_all(self, request_ids: list[RequestId]) -> bool:
        """Client requests are forwarded together: :meth:`opened` for each, or nothing; whether done.

        None is opened (False) where :meth:`InFlight.open_all` refuses the batch: the caller then
        books them one by one, each refusal answered. None of them is a ``tools/list`` to filter.
        """
        first = self.in_flight.open_all(request_ids)
        if first is None:
            return False
        if self.request_timeout is not None:
            deadline = trio.current_time() + self.request_timeout
            self._deadlines.extend(
                (deadline, request_id, token) for token, request_id in enumerate(request_ids, first)
            )
            if len(self._deadlines) > DEADLINES_KEPT_PER_LIMIT * self.max_in_flight:
                self._forget_answered_deadlines()
            self._deadline_added.set()
        return True

    def _forget_answered_deadlines(self) -> None:
        """Drop the deadlines of requests no longer in flight, except the first.

        An answered request leaves its deadline in the queue until the deadline passes: without
        this, a busy connection would keep one per request of the last ``request_timeout``
        seconds. The first stays, since :meth:`expire_requests` may be sleeping until it.
        """
        deadlines = self._deadlines
        first = deadlines.popleft()
        kept = [entry for entry in deadlines if self.in_flight.is_open(entry[1], entry[2])]
        deadlines.clear()
        deadlines.append(first)
        deadlines.extend(kept)

    def lists_tools(self, request_id: Any) -> bool:
        """Whether the reply about to go out for ``request_id`` answers a ``tools/list`` to filter.

        Asked once per reply to a request in flight: the answer is forgotten.
        """
        token = self.tool_lists.pop(request_id, None)
        return token is not None and self.in_flight.is_open(request_id, token)

    def check_idle(self) -> None:
        """Wake :meth:`wait_idle` if no request is in flight any more."""
        if self._idle is not None and not len(self.in_flight):
            self._idle.set()
            self._idle = None

    async def wait_idle(self) -> None:
        """Return once no request is in flight."""
        while len(self.in_flight):
            if self._idle is None:
                self._idle = trio.Event()
            await self._idle.wait()

    def remember_child_request(self, request_id: Any) -> None:
        """The child sent the client a request: the client's answer to it may go to the child."""
        self.child_requests[request_id] = None
        if len(self.child_requests) > self.max_in_flight:
            del self.child_requests[next(iter(self.child_requests))]

    async def expire_requests(
        self,
        send_to_child: Callable[[list[JSONObject]], Awaitable[bool]],
        reply: Callable[[JSONObject], Awaitable[bool]],
        client: MessageChannel,
    ) -> None:
        """Answer requests still in flight after ``request_timeout`` with ``-32001``; run it only then.

        The answer goes through ``reply``; ``client`` is named in the log. A request whose reply
        from the child is being written is left to it. One that timed out stays owed its answer
        until that is written, so that a connection ending meanwhile answers it instead. Each is
        also cancelled at the child (``notifications/cancelled``, as the stdio binding asks)
        through ``send_to_child``, by a task of its own (started with the first timeout): a child
        that reads nothing holds up neither this answer nor the next timeout. The child's late
        reply, if any, is dropped.
        """
        timeout = self.request_timeout
        assert timeout is not None  # run only with a timeout
        cancelling = False  # the task that writes cancellations starts with the first timeout
        async with trio.open_nursery() as nursery:
            while True:
                while not self._deadlines:
                    self._deadline_added = trio.Event()
                    await self._deadline_added.wait()
                deadline, request_id, token = self._deadlines[0]
                await trio.sleep_until(deadline)
                self._deadlines.popleft()
                in_flight = self.in_flight
                if not in_flight.is_open(request_id, token) or in_flight.is_being_written(request_id):
                    continue
                in_flight.time_out(request_id)
                logger.info("%s: request %r timed out after %gs", client.peer, request_id, timeout)
                self._cancellations.add(request_id, timeout)
                if not cancelling:
                    cancelling = True
                    nursery.start_soon(self._send_cancellations, send_to_child)
                if await reply(
                    error_response(
                        request_id, REQUEST_TIMEOUT, "Request timed out", "request-timeout", timeout=timeout
                    )
                ):
                    in_flight.answered(request_id)
                    self.check_idle()

    async def _send_cancellations(self, send_to_child: Callable[[list[JSONObject]], Awaitable[bool]]) -> None:
        """Write the cancellations of requests that timed out to the child, as it reads them."""
        while True:
            if not await send_to_child(await self._cancellations.take()):
                return  # the child's stdin is closed: the connection is ending
