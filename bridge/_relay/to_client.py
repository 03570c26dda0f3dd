"""The child → client direction of a relay: read the child, deliver its messages, watch it exit.

Replies reach the client only for requests in flight, each exactly once: a reply is marked
answered only after it was written. Junk on the child's stdout is logged and dropped; an over-long
reply is answered with ``-31001`` for its request (docs/design.md §5). With per-tool scopes, a
``tools/list`` reply lists only the tools the client may call (:mod:`.scopes`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from itertools import repeat
from operator import contains, itemgetter
from typing import Any, cast

import attrs
import trio

from channels import JSONObject, MessageChannel, MessageTooLarge, ProtocolError

from .._child.process import ChildProcess, describe_exit
from .._errors import REPLY_TOO_LARGE, error_response
from .._limits import Limits
from .ending import Ending
from .inflight import InFlight
from .scopes import ToolScopes
from .strays import StrayReplies
from .writers import BATCH

logger = logging.getLogger("bridge.relay")

_ID = itemgetter("id")
_DICTS_ONLY = {dict}


def _all_awaited(items: list[JSONObject | ProtocolError], awaiting: dict[Any, int]) -> dict[Any, None] | None:
    """The ids of a batch of replies (valid messages) to requests awaiting them, each once; else ``None``.

    ``None`` if any item is something else: bad output, a request or notification of the child,
    a reply to no request awaiting it (``id`` null, a stray, a late one) or a second reply.
    """
    if {*map(type, items)} != _DICTS_ONLY:
        return None  # a bad message
    messages = cast("list[JSONObject]", items)  # dicts only, as checked
    if any(map(contains, messages, repeat("method"))):
        return None
    answered = dict.fromkeys(map(_ID, messages))  # a valid message without "method" has an "id"
    if len(answered) != len(items) or not awaiting.keys() >= answered.keys():
        return None
    return answered


@attrs.define(eq=False)
class ToClient:
    """Moves one child's messages to its client until the child's output ends.

    Args:
        child: the child serving only this client; read here (its owner stops it).
        client: the client's channel, named in the log (written through ``send_to_client``).
        limits: bounds and timeouts.
        in_flight: the client's requests awaiting a reply (closed here as replies go out).
        remember_child_request: notes a request of the child, which the client may answer.
        check_idle: wakes those waiting for no request in flight, if none is.
        end: records why the connection ended (the first call wins).
        send_to_client: writes messages to the client, with the lines they arrived as where those
            may be forwarded (:meth:`ClientWriter.send <.writers.ClientWriter.send>`); False if it
            is gone or was given up on.
        tool_scopes: the scopes each tool needs (none by default).
        lists_tools: whether a reply answers a ``tools/list`` to filter (:meth:`Ledger.lists_tools`).
    """

    child: ChildProcess
    client: MessageChannel
    limits: Limits
    _in_flight: InFlight
    _remember_child_request: Callable[[Any], None]
    _check_idle: Callable[[], None]
    _end: Callable[[Ending], None]
    _send_to_client: Callable[[list[JSONObject], list[bytes | None]], Awaitable[bool]]
    _tool_scopes: ToolScopes = attrs.field(factory=ToolScopes, kw_only=True)
    _lists_tools: Callable[[Any], bool] = attrs.field(default=lambda request_id: False, kw_only=True)
    _child_eof: trio.Event = attrs.field(init=False, factory=trio.Event)
    # watch_child's wait for the exit, cut short when the child's stdout ends first
    _exit_wait: trio.CancelScope = attrs.field(init=False, factory=trio.CancelScope)
    _strays: StrayReplies = attrs.field(init=False, factory=StrayReplies)

    @property
    def stray_replies(self) -> int:
        """The child's replies dropped so far because they answered no request in flight."""
        return self._strays.count

    async def run(self) -> None:
        """Pump until the child's stdout ends, the client cannot be written to, or must be ended."""
        channel = self.child.channel
        while True:
            try:
                items, lines = await channel.receive_batch_lines(BATCH)
            except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError):
                self._child_eof.set()
                self._exit_wait.cancel()
                return
            # The child's messages go to the client as the lines they arrived in where those are
            # canonical and the message is not changed here (docs/design.md §5.2); a changed or
            # bridge-written message goes with None and is encoded afresh.
            # The requests answered: insertion-ordered, and a set's membership test. One reply alone
            # (a call at a time) costs less through _sort than the batch's checks.
            answered = (
                None if len(items) < 2 or self._tool_scopes else _all_awaited(items, self._in_flight.awaiting)
            )
            if answered is not None:  # the usual batch: as _sort would, without a loop in Python
                out: list[JSONObject] = items  # type: ignore[assignment]  # dicts only, as checked
                out_lines = lines
            else:
                out, out_lines, answered = [], [], {}
                self._sort(items, lines, out, out_lines, answered)
            if out:
                # Deliver first, then mark answered: a write that fails or is cancelled leaves the
                # requests in flight, to be answered by the bridge: never twice, never not at all.
                # Meanwhile they are being written, which keeps a request timeout from answering them.
                self._in_flight.writing(answered)
                if not await self._send_to_client(out, out_lines):
                    return
                self._in_flight.written(answered)
                self._check_idle()
            # Nothing of this batch is kept while waiting for the next: a 16 MiB reply is freed once
            # written, not when the child writes again.
            del items, lines, out, out_lines, answered

    def _sort(
        self,
        items: list[JSONObject | ProtocolError],
        lines: list[bytes | None],
        out: list[JSONObject],
        out_lines: list[bytes | None],
        answered: dict[Any, None],
    ) -> None:
        """Sort a batch from the child into what goes to the client and which requests it answers.

        ``out`` gets the messages (``out_lines`` their lines, or None where encoded afresh),
        ``answered`` the ids; strays are dropped and counted, bad output dealt with, and the batch
        cut short at output that ends the connection.
        """
        in_flight = self._in_flight
        awaiting = in_flight.awaiting  # `in in_flight`, without a Python call per reply
        filters_tools = bool(self._tool_scopes)
        for item, line in zip(items, lines, strict=True):
            if isinstance(item, ProtocolError):
                if not self._child_sent_bad_output(item, out, out_lines, answered):
                    break
                continue
            if "method" in item:  # a request (remembered: the client may answer it) or a notification
                if "id" in item:
                    self._remember_child_request(item["id"])
                out.append(item)
                out_lines.append(line)
                continue
            request_id = item["id"]  # a response
            if request_id is None:
                out.append(item)  # an error the child could not attribute
                out_lines.append(line)
            elif request_id in awaiting and request_id not in answered:
                if filters_tools and self._lists_tools(request_id):
                    item = self._tool_scopes.filter_reply(item, self.client.peer.scopes)
                    line = None  # the filtered reply is encoded afresh
                out.append(item)
                out_lines.append(line)
                answered[request_id] = None
            elif request_id in answered or not in_flight.was_cancelled(request_id):
                # A second reply to one request (both in this batch, or the first already
                # delivered), or a reply to an id the client never sent.
                self._strays.stray(self.client.peer, request_id)
            else:
                self._strays.late(self.client.peer, request_id)

    def _child_sent_bad_output(
        self,
        error: ProtocolError,
        out: list[JSONObject],
        out_lines: list[bytes | None],
        answered: dict[Any, None],
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
            out_lines.append(None)
            answered[request_id] = None
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

    async def watch_child(self) -> None:
        """End the connection when the child exits or closes its stdout.

        What the child wrote last is read first, for a bounded time: a grandchild may keep stdout
        open.
        """
        with self._exit_wait:  # one task, not a nursery of two: it is there for every connection
            await self.child.wait()
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
