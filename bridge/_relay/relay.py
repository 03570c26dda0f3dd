"""Per-connection relay: one client channel to one child, with stdio semantics kept exactly.

Messages pass both ways unchanged in meaning (re-encoded canonically by the channels). The relay keeps
the bookkeeping that makes the guarantees hold (DESIGN.md §5):

* every request the client sends gets exactly one reply: the child's, or the bridge's error when the
  child exits, the connection is ending, or the request cannot be forwarded (1);
* bad client input is answered (``-32700``/``-32600``) and never reaches the child; junk on the
  child's stdout is logged and dropped (2);
* every queue is bounded and a slow side gets backpressure, never buffering (4).

Tasks, all inside :meth:`Relay.run`: ``_pump_client`` (client → child), ``_pump_child`` (child →
client), ``_watch_child``, ``_watch_stopping`` and ``_watch_stop_now``. The first condition that ends
the connection is recorded as an :class:`Ending`; the tasks are then cancelled, the requests still in
flight are answered with the Ending's error, and ``run`` returns. Closing the client and stopping the
child are left to their owners.

There is no queue between the pumps and the client: each pump writes its batch itself, under a lock
(the child's replies and the bridge's own errors share the connection). A client that does not read
therefore stops the child pump, which stops reading the child, whose writes then block: memory per
connection is one batch per direction, and the backpressure reaches the child, as it would on stdio.
A write that makes no progress for ``send_timeout`` ends the connection. (With one child per
connection, a slow client can only stall its own child; a shared child needs per-client queues.)
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

import attrs
import trio

from channels import (
    INVALID_REQUEST,
    HandoffLock,
    JSONObject,
    Kind,
    MessageChannel,
    MessageTooLarge,
    ProtocolError,
    SendTimeout,
    is_request_id,
    kind,
    receive_batch,
)

from .._child.process import ChildProcess, describe_exit
from .._errors import (
    CONNECTION_CLOSED,
    REPLY_TOO_LARGE,
    REQUEST_TIMEOUT,
    bad_input_reply,
    error_response,
    too_many_requests,
)
from .._limits import Limits
from .inflight import DuplicateRequest, InFlight, TooManyRequests

logger = logging.getLogger("bridge.relay")

# How many deadlines per allowed request in flight the queue may hold before the answered ones
# are swept out: twice, so that each sweep is paid for by as many appends as it keeps entries.
DEADLINES_KEPT_PER_LIMIT = 2

# Most messages moved per read or write: one system call carries a whole pipelined burst, while a
# flood of small messages still yields to other connections regularly.
BATCH = 64


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


@attrs.define(eq=False)
class Relay:
    """Relays one client channel and one child until either side ends.

    Args:
        client: the client's channel. The relay reads and writes it, and sets its
            ``send_timeout`` to ``limits.send_timeout``; the caller owns and closes it.
        child: the child serving only this client. The relay reads and writes its channel; the
            caller owns the child and stops it afterwards.
        limits: bounds and timeouts.
        stopping: set by the daemon when a graceful stop begins: new requests are refused, those in
            flight get ``limits.drain_timeout`` to finish.
        stop_now: set by the daemon to end at once: requests in flight are answered with an error.

    Attributes:
        ending: why the connection ended, once it has (``None`` before).
    """

    client: MessageChannel
    child: ChildProcess
    limits: Limits
    stopping: trio.Event = attrs.field(factory=trio.Event)
    stop_now: trio.Event = attrs.field(factory=trio.Event)

    ending: Ending | None = attrs.field(init=False, default=None)
    _in_flight: InFlight = attrs.field(init=False)
    _child_requests: dict[Any, None] = attrs.field(init=False, factory=dict)
    _idle: trio.Event = attrs.field(init=False, factory=trio.Event)
    _ended: trio.Event = attrs.field(init=False, factory=trio.Event)
    _child_eof: trio.Event = attrs.field(init=False, factory=trio.Event)
    _write_lock: HandoffLock = attrs.field(init=False, factory=HandoffLock)
    _child_write_lock: HandoffLock = attrs.field(init=False, factory=HandoffLock)
    # (deadline, id, token) of requests in flight, in admission order; with one timeout for all,
    # that is also deadline order, so a deque replaces a heap.
    _deadlines: deque[tuple[float, Any, int]] = attrs.field(init=False, factory=deque)
    _deadline_added: trio.Event = attrs.field(init=False, factory=trio.Event)
    _client_writable: bool = attrs.field(init=False, default=True)

    def __attrs_post_init__(self) -> None:
        self._in_flight = InFlight(self.limits.max_in_flight)
        self._idle.set()
        self.client.send_timeout = self.limits.send_timeout

    @property
    def in_flight(self) -> int:
        """Requests awaiting a reply."""
        return len(self._in_flight)

    async def run(self) -> Ending:
        """Relay until the connection ends; return why. Call it once.

        Every request still in flight when the connection ends is answered with the
        :class:`Ending`'s error before this returns (if the client can still be written to).
        Never raises for transport failures. If cancelled, the relay's tasks are cancelled and
        requests in flight are left unanswered.
        """
        async with trio.open_nursery() as tasks:
            tasks.start_soon(self._pump_client)
            tasks.start_soon(self._pump_child)
            tasks.start_soon(self._watch_child)
            tasks.start_soon(self._watch_stopping)
            tasks.start_soon(self._watch_stop_now)
            if self.limits.request_timeout is not None:
                tasks.start_soon(self._expire_requests)
            await self._ended.wait()
            tasks.cancel_scope.cancel()
        assert self.ending is not None
        await self._answer_in_flight(self.ending)
        return self.ending

    # -- ending --------------------------------------------------------------------------------

    def _end(self, ending: Ending) -> None:
        if self.ending is None:
            self.ending = ending
            self._ended.set()

    async def _answer_in_flight(self, ending: Ending) -> None:
        replies = [
            error_response(
                request_id,
                ending.code,
                "Connection closed",
                ending.reason,
                detail=ending.description,
                **ending.data,
            )
            for request_id in self._in_flight.take_all()
        ]
        if replies:
            await self._send_to_client(replies)

    async def _wait_idle(self) -> None:
        while len(self._in_flight):
            await self._idle.wait()

    def _opened(self, request_id: Any) -> None:
        token = self._in_flight.open(request_id)
        if self._idle.is_set():
            self._idle = trio.Event()
        if self.limits.request_timeout is not None:
            self._deadlines.append((trio.current_time() + self.limits.request_timeout, request_id, token))
            if len(self._deadlines) > DEADLINES_KEPT_PER_LIMIT * self.limits.max_in_flight:
                self._forget_answered_deadlines()
            self._deadline_added.set()

    def _forget_answered_deadlines(self) -> None:
        """Drop the deadlines of requests no longer in flight, except the first.

        An answered request leaves its deadline in the queue until the deadline passes: without
        this, a busy connection would keep one per request of the last ``request_timeout``
        seconds. The first stays, since ``_expire_requests`` may be sleeping until it.
        """
        deadlines = self._deadlines
        first = deadlines.popleft()
        kept = [entry for entry in deadlines if self._in_flight.is_open(entry[1], entry[2])]
        deadlines.clear()
        deadlines.append(first)
        deadlines.extend(kept)

    def _check_idle(self) -> None:
        if not len(self._in_flight):
            self._idle.set()

    # -- client to child -----------------------------------------------------------------------

    async def _pump_client(self) -> None:
        consecutive_errors = 0
        while True:
            try:
                items = await receive_batch(self.client, BATCH)
            except trio.EndOfChannel:
                await self._half_closed()
                return
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._end(CLIENT_GONE)
                return
            forward: list[JSONObject] = []
            for item in items:
                if isinstance(item, ProtocolError):
                    consecutive_errors += 1
                    if not await self._answer_bad_input(item, consecutive_errors):
                        return
                    continue
                consecutive_errors = 0
                if await self._admit(item):
                    forward.append(item)
            if forward and not await self._send_to_child(forward):
                await self._child_input_closed()
                return

    async def _answer_bad_input(self, error: ProtocolError, count: int) -> bool:
        """Answer one bad message; False when the connection must end because of it."""
        await self._reply(bad_input_reply(error))
        logger.info("%s: %s", self.client.peer, error)
        if isinstance(error, MessageTooLarge):
            # The rest of that line is skipped, but a peer that sends one is not trusted to frame.
            self._end(Ending("client sent an over-long message", "message-too-large", INVALID_REQUEST))
            return False
        if count >= self.limits.max_consecutive_errors:
            self._end(
                Ending(
                    f"client sent {count} invalid messages in a row",
                    "too-many-invalid-messages",
                    INVALID_REQUEST,
                )
            )
            return False
        return True

    async def _admit(self, message: JSONObject) -> bool:
        """Book-keep one valid client message; False if it is answered here instead of forwarded."""
        message_kind = kind(message)
        if message_kind is Kind.REQUEST:
            request_id = message["id"]
            if self.stopping.is_set():
                await self._reply(
                    error_response(
                        request_id,
                        CONNECTION_CLOSED,
                        "Connection closed",
                        "shutting-down",
                        detail="the bridge is stopping",
                    )
                )
                return False
            try:
                self._opened(request_id)
            except DuplicateRequest:
                await self._reply(
                    error_response(
                        request_id,
                        INVALID_REQUEST,
                        "Invalid Request",
                        "duplicate-id",
                        detail="this id is already in flight",
                    )
                )
                return False
            except TooManyRequests:
                await self._reply(too_many_requests(request_id, self.limits.max_in_flight))
                return False
            return True
        if message_kind is Kind.NOTIFICATION:
            if message["method"] == "notifications/cancelled":
                params = message.get("params")
                cancelled = params.get("requestId") if isinstance(params, dict) else None
                if is_request_id(cancelled) and self._in_flight.cancel(cancelled):
                    self._check_idle()
            return True
        # A response: only to a request the child sent to this client.
        if message["id"] in self._child_requests:
            del self._child_requests[message["id"]]
            return True
        logger.debug(
            "%s: dropped a response to no request of the child: id %r", self.client.peer, message["id"]
        )
        return False

    async def _send_to_child(self, messages: list[JSONObject]) -> bool:
        """Write to the child (waiting while it does not read); False if its stdin is closed."""
        await self._child_write_lock.acquire()  # free: no trip through the scheduler
        try:
            await self.child.channel.send_many(messages)
            return True
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        finally:
            self._child_write_lock.release()

    async def _expire_requests(self) -> None:
        """Answer requests still in flight after ``request_timeout`` with ``-32001``.

        They are cancelled at the child (``notifications/cancelled``, as the stdio binding asks);
        the child's late reply, if any, is then dropped.
        """
        timeout = self.limits.request_timeout
        while True:
            while not self._deadlines:
                self._deadline_added = trio.Event()
                await self._deadline_added.wait()
            deadline, request_id, token = self._deadlines[0]
            await trio.sleep_until(deadline)
            self._deadlines.popleft()
            if not self._in_flight.is_open(request_id, token):
                continue
            self._in_flight.cancel(request_id)
            self._check_idle()
            logger.info("%s: request %r timed out after %gs", self.client.peer, request_id, timeout)
            await self._send_to_child(
                [
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": {"requestId": request_id, "reason": f"timed out after {timeout:g}s"},
                    }
                ]
            )
            await self._reply(
                error_response(
                    request_id, REQUEST_TIMEOUT, "Request timed out", "request-timeout", timeout=timeout
                )
            )

    async def _half_closed(self) -> None:
        """The client sent EOF: deliver what is in flight (bounded), then end."""
        with trio.move_on_after(self.limits.half_close_timeout):
            await self._wait_idle()
            self._end(CLIENT_DONE)
            return
        self._end(
            Ending(
                f"client's requests were unanswered {self.limits.half_close_timeout}s "
                "after it closed its end",
                "half-close-timeout",
            )
        )

    async def _child_input_closed(self) -> None:
        # Usually the child has exited and _watch_child is about to say so with its status.
        with trio.move_on_after(self.limits.exit_drain_timeout + 0.5):
            await self._ended.wait()
        self._end(Ending("child closed its stdin", "child-exited"))

    # -- child to client -----------------------------------------------------------------------

    async def _pump_child(self) -> None:
        channel = self.child.channel
        while True:
            try:
                items = await receive_batch(channel, BATCH)
            except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError):
                self._child_eof.set()
                return
            out: list[JSONObject] = []
            answered: list[Any] = []
            for item in items:
                if isinstance(item, ProtocolError):
                    if not self._child_sent_bad_output(item, out, answered):
                        break
                    continue
                message_kind = kind(item)
                if message_kind is Kind.RESPONSE:
                    request_id = item["id"]
                    if request_id is None:
                        out.append(item)  # an error the child could not attribute
                    elif request_id in self._in_flight:
                        out.append(item)
                        answered.append(request_id)
                    else:
                        self._in_flight.close(request_id)
                        logger.debug(
                            "%s: dropped the child's reply to no request in flight: id %r",
                            self.client.peer,
                            request_id,
                        )
                    continue
                if message_kind is Kind.REQUEST:
                    self._remember_child_request(item["id"])
                out.append(item)
            if not out:
                continue
            # Deliver first, then mark answered: a write that fails or is cancelled leaves the
            # requests in flight, to be answered by the bridge: never twice, never not at all.
            if not await self._send_to_client(out):
                return
            for request_id in answered:
                self._in_flight.close(request_id)
            self._check_idle()

    def _remember_child_request(self, request_id: Any) -> None:
        self._child_requests[request_id] = None
        if len(self._child_requests) > self.limits.max_in_flight:
            del self._child_requests[next(iter(self._child_requests))]

    def _child_sent_bad_output(
        self, error: ProtocolError, out: list[JSONObject], answered: list[Any]
    ) -> bool:
        """Deal with one bad line from the child; False if the connection must end because of it."""
        if not isinstance(error, MessageTooLarge):
            self.child.note_garbage(error)
            return True
        limit = error.limit
        request_id = error.request_id
        if request_id is not None and request_id in self._in_flight:
            logger.warning(
                "[%s pid %d] reply to %r is larger than %d bytes; answering with an error",
                self.child.spec.name,
                self.child.pid,
                request_id,
                limit,
            )
            out.append(
                error_response(request_id, REPLY_TOO_LARGE, "Reply too large", "reply-too-large", limit=limit)
            )
            answered.append(request_id)
            return True
        # A message that cannot be attributed may have been any request's reply; the only way to
        # keep "every request gets exactly one reply" is to end the connection and answer them all.
        self._end(
            Ending(
                f"child wrote a message larger than {limit} bytes that could not be attributed to a request",
                "reply-too-large",
                REPLY_TOO_LARGE,
                {"limit": limit},
            )
        )
        return False

    async def _watch_child(self) -> None:
        """End the connection when the child exits or closes its stdout.

        What the child wrote last is read first, for a bounded time: a grandchild may keep stdout
        open.
        """
        async with trio.open_nursery() as either:

            async def exited() -> None:
                await self.child.wait()
                either.cancel_scope.cancel()

            async def closed_stdout() -> None:
                await self._child_eof.wait()
                either.cancel_scope.cancel()

            either.start_soon(exited)
            either.start_soon(closed_stdout)
        with trio.move_on_after(self.limits.exit_drain_timeout):
            await self._child_eof.wait()
            await self.child.wait()
        returncode = self.child.returncode
        if returncode is None:
            self._end(Ending("child closed its stdout", "child-exited"))
        else:
            self._end(
                Ending(f"child {describe_exit(returncode)}", "child-exited", data={"returncode": returncode})
            )

    # -- stopping and the client writer ----------------------------------------------------------

    async def _watch_stopping(self) -> None:
        await self.stopping.wait()
        with trio.move_on_after(self.limits.drain_timeout):
            await self._wait_idle()
        self._end(Ending("the bridge is stopping", "shutting-down"))

    async def _watch_stop_now(self) -> None:
        await self.stop_now.wait()
        self._end(Ending("the bridge was stopped at once", "shutting-down"))

    async def _reply(self, message: JSONObject) -> bool:
        """Send one reply written by the bridge itself."""
        return await self._send_to_client([message])

    async def _send_to_client(self, messages: list[JSONObject]) -> bool:
        """Write to the client; False if the client is gone or was given up on.

        Waits while the client does not read (backpressure), at most ``send_timeout`` per write
        (the client channel's own timeout, armed only when a write has to wait).

        A write cancelled half-way may have left part of a line on the wire; nothing is written to
        that client after it, since the next byte would corrupt the framing.
        """
        if not self._client_writable:
            return False
        await self._write_lock.acquire()  # free: no trip through the scheduler
        try:
            if not self._client_writable:
                return False
            self._client_writable = False  # until the write has completed
            await self.client.send_many(messages)
            self._client_writable = True
            return True
        except SendTimeout:
            self._end(Ending(f"client read nothing for {self.limits.send_timeout}s", "client-too-slow"))
            return False
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._end(CLIENT_GONE)
            return False
        finally:
            self._write_lock.release()
