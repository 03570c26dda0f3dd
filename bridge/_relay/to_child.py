"""The client → child direction of a relay: read the client, answer what is bad, forward the rest.

Bad client input is answered (``-32700``/``-32600``) and never reaches the child; requests are
refused here when the bridge is stopping, when the id is already in flight or when too many are,
and a ``tools/call`` the caller's scopes do not allow (:mod:`.scopes`); the client's answers reach
the child only for requests the child sent (docs/design.md §5).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from itertools import repeat
from operator import contains, itemgetter
from typing import Any, cast

import attrs
import trio

from channels import (
    INVALID_REQUEST,
    JSONObject,
    MessageChannel,
    MessageTooLarge,
    ProtocolError,
    RequestId,
    is_request_id,
)

from .._errors import CONNECTION_CLOSED, bad_input_reply, error_response, too_many_requests
from .._limits import Limits
from .ending import CLIENT_DONE, CLIENT_GONE, Ending
from .inflight import DuplicateRequest, InFlight, TooManyRequests
from .scopes import ToolScopes
from .writers import BATCH

logger = logging.getLogger("bridge.relay")

_ID = itemgetter("id")
_DICTS_ONLY = {dict}


def _request_ids(items: list[JSONObject | ProtocolError]) -> list[RequestId] | None:
    """The ids of a batch of requests only (valid messages, as received); ``None`` if any is not one."""
    if {*map(type, items)} != _DICTS_ONLY:
        return None  # a bad message
    messages = cast("list[JSONObject]", items)  # dicts only, as checked
    if not all(map(contains, messages, repeat("method"))):
        return None  # a response
    try:
        return list(map(_ID, messages))
    except KeyError:  # a notification
        return None


@attrs.define(eq=False)
class ToChild:
    """Moves one client's messages to its child until the client ends or must be ended.

    Args:
        client: the client's channel, read here (the relay's owner closes it).
        limits: bounds and timeouts.
        stopping: set when a graceful stop begins: new requests are refused.
        in_flight: the client's requests awaiting a reply (read for cancellations).
        child_requests: the child's requests to the client not answered yet.
        opened: books a forwarded request, and whether it is a ``tools/list`` to filter
            (:meth:`Ledger.opened`).
        opened_all: books requests forwarded together, all or none; whether it did
            (:meth:`Ledger.opened_all`).
        check_idle: wakes those waiting for no request in flight, if none is.
        wait_idle: returns once no request is in flight.
        ended: set once the connection has an ending.
        end: records why the connection ended (the first call wins).
        reply: sends the client one reply written by the bridge.
        send_to_child: writes messages to the child, with the lines they arrived as where those
            may be forwarded (:meth:`ChildWriter.send <.writers.ChildWriter.send>`); False if its
            stdin is closed.
        touch: notes traffic from the client (for the idle timeout).
        tool_scopes: the scopes each tool needs (none by default).

    Attributes:
        unread: messages received from the client but not handled yet; what is left of them when
            the relay's tasks are cancelled is answered by :func:`.unread.answer_unread`.
    """

    client: MessageChannel
    limits: Limits
    stopping: trio.Event
    _in_flight: InFlight
    _child_requests: dict[Any, None]
    _opened: Callable[[Any, bool], None]
    _opened_all: Callable[[list[RequestId]], bool]
    _check_idle: Callable[[], None]
    _wait_idle: Callable[[], Awaitable[None]]
    _ended: trio.Event
    _end: Callable[[Ending], None]
    _reply: Callable[[JSONObject], Awaitable[bool]]
    _send_to_child: Callable[[list[JSONObject], list[bytes | None]], Awaitable[bool]]
    _touch: Callable[[], None] = attrs.field(default=lambda: None, kw_only=True)
    _tool_scopes: ToolScopes = attrs.field(factory=ToolScopes, kw_only=True)
    unread: deque[JSONObject | ProtocolError] = attrs.field(init=False, factory=deque)

    async def run(self) -> None:
        """Pump until the client's end of input, a failure, or a reason to end the connection."""
        consecutive_errors = 0
        while True:
            try:
                items, lines = await self.client.receive_batch_lines(BATCH)
            except trio.EndOfChannel:
                await self._half_closed()
                return
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._end(CLIENT_GONE)
                return
            self._touch()
            # Read once per batch and again after each wait: only another task sets it.
            stopping = self.stopping.is_set()
            # One message alone (a call at a time) costs less through the loop than the batch's checks.
            if len(items) > 1 and not stopping and not self._tool_scopes.rules:  # (not bool(): a call)
                request_ids = _request_ids(items)
                if request_ids is not None and self._opened_all(request_ids):
                    # The usual batch, requests only, each admitted: as the loop below would,
                    # without a call per request. Nothing was awaited: nothing is unread.
                    consecutive_errors = 0
                    if not await self._send_to_child(cast("list[JSONObject]", items), lines):
                        await self._child_input_closed()
                        return
                    del items, lines
                    continue
            # The client's messages go to the child unchanged, as the lines they arrived in where
            # those are canonical (docs/design.md §5.2): ``forward_lines[i]`` is ``forward[i]``'s.
            forward: list[JSONObject] = []
            forward_lines: list[bytes | None] = []
            unread = self.unread  # empty here: each batch is handled whole, or the pump returns
            unread.extend(items)
            # An item leaves ``unread`` only once handled: a task cancelled while answering it
            # (the connection ended) leaves it to be answered by the relay.
            index = -1
            while unread:
                index += 1
                item = unread[0]
                if isinstance(item, ProtocolError):
                    consecutive_errors += 1
                    go_on = await self._answer_bad_input(item, consecutive_errors)
                    unread.popleft()
                    if not go_on:
                        return
                    stopping = self.stopping.is_set()
                    continue
                consecutive_errors = 0
                verdict = self._admit(item, stopping)
                if verdict is True:
                    forward.append(item)
                    forward_lines.append(lines[index])
                elif verdict is not False:
                    await self._reply(verdict)
                    stopping = self.stopping.is_set()
                unread.popleft()
            if forward and not await self._send_to_child(forward, forward_lines):
                await self._child_input_closed()
                return
            # Nothing of this batch is kept while waiting for the next: a connection that goes
            # quiet holds no message, and a large one is freed once written, not on the next read.
            # (A batch is never empty, so the last item is bound.)
            del items, lines, forward, forward_lines, item

    async def _answer_bad_input(self, error: ProtocolError, count: int) -> bool:
        """Answer one bad message; False when the connection must end because of it."""
        await self._reply(bad_input_reply(error))
        logger.info("%s: %s", self.client.peer, error)
        if isinstance(error, MessageTooLarge):
            # The rest of that line is skipped, but a peer that sends one is not trusted to frame.
            self._end(
                Ending(
                    "client sent an over-long message",
                    "message-too-large",
                    INVALID_REQUEST,
                    answers_unread=False,
                )
            )
            return False
        if count >= self.limits.max_consecutive_errors:
            self._end(
                Ending(
                    f"client sent {count} invalid messages in a row",
                    "too-many-invalid-messages",
                    INVALID_REQUEST,
                    answers_unread=False,
                )
            )
            return False
        return True

    def _admit(self, message: JSONObject, stopping: bool) -> JSONObject | bool:
        """Book-keep one valid client message: forward it (True), drop it (False), or answer it.

        ``stopping``: whether :attr:`stopping` is set (read by the caller, once per batch and
        after each wait).

        Returns the reply that answers it here instead of forwarding it, if any. Synchronous, so
        that the usual message costs no coroutine: only a refusal is written, by the caller.
        """
        if "method" not in message:
            # A response: only to a request the child sent to this client.
            if message["id"] in self._child_requests:
                del self._child_requests[message["id"]]
                return True
            logger.debug(
                "%s: dropped a response to no request of the child: id %r", self.client.peer, message["id"]
            )
            return False
        if "id" not in message:  # a notification
            if message["method"] == "notifications/cancelled":
                params = message.get("params")
                cancelled = params.get("requestId") if isinstance(params, dict) else None
                if is_request_id(cancelled) and self._in_flight.cancel(cancelled):
                    self._check_idle()
            return True
        request_id = message["id"]
        if stopping:
            return error_response(
                request_id,
                CONNECTION_CLOSED,
                "Connection closed",
                "shutting-down",
                detail="the bridge is stopping",
            )
        lists_tools = False
        if self._tool_scopes.rules:  # (not bool(), a call per request)
            refusal = self._tool_scopes.refuse_call(message, self.client.peer)
            if refusal is not None:
                return refusal
            lists_tools = message["method"] == "tools/list"
        try:
            self._opened(request_id, lists_tools)
        except DuplicateRequest:
            return error_response(
                request_id,
                INVALID_REQUEST,
                "Invalid Request",
                "duplicate-id",
                detail="this id is already in flight",
            )
        except TooManyRequests:
            return too_many_requests(request_id, self.limits.max_in_flight)
        return True

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
        # Usually the child has exited and ToClient.watch_child is about to say so with its status.
        with trio.move_on_after(self.limits.exit_drain_timeout + 0.5):
            await self._ended.wait()
        self._end(Ending("child closed its stdin", "child-exited"))
