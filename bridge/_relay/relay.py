"""Per-connection relay: one client channel to one child, with stdio semantics kept exactly.

Messages pass both ways unchanged in meaning (re-encoded canonically by the channels). The relay keeps
the bookkeeping that makes the guarantees hold (docs/design.md §5):

* every request the client sends gets exactly one reply: the child's, or the bridge's error when the
  child exits, the connection is ending, or the request cannot be forwarded (1);
* bad client input is answered (``-32700``/``-32600``) and never reaches the child; junk on the
  child's stdout is logged and dropped (2);
* every queue is bounded and a slow side gets backpressure, never buffering (4).

Tasks, all inside :meth:`Relay.run`: ``ToChild.run`` (client → child, :mod:`.to_child`),
``ToClient.run`` (child → client, :mod:`.to_client`), ``ToClient.watch_child``, ``_watch_stop``
(with an idle timeout, ``IdleWatch.watch`` first: :mod:`.idle`) and, with a request timeout,
``Ledger.expire_requests`` (:mod:`.ledger`, the book of requests both directions keep); ``run``'s
own task watches ``stop_now``. The first condition that ends the
connection is recorded as an :class:`~.ending.Ending`; a write to the client in progress is let finish (within
``send_timeout``), the tasks are then cancelled, the requests still in flight are answered with the
Ending's error, and ``run`` returns. Closing the client and stopping the child are
left to their owners. This module wires the pieces: each gets what it uses, not the relay.

There is no queue between the pumps and the client: each pump writes its batch itself, under a lock
(the child's replies and the bridge's own errors share the connection; :mod:`.writers`). A client
that does not read therefore stops the child pump, which stops reading the child, whose writes then
block: memory per connection is one batch per direction, and the backpressure reaches the child, as
it would on stdio. A write that makes no progress for ``send_timeout`` ends the connection. (With one
child per connection, a slow client can only stall its own child; a shared child needs per-client
queues.)
"""

from __future__ import annotations

import attrs
import trio

from channels import MessageChannel, cancelled_when

from .._child.process import ChildProcess
from .._limits import Limits
from .ending import STOPPED_AT_ONCE, Ending, FirstEnding
from .idle import IdleWatch
from .ledger import Ledger
from .scopes import ToolScopes
from .to_child import ToChild
from .to_client import ToClient
from .unread import answer_unread, ending_error, linger
from .writers import ChildWriter, ClientWriter


def _no_traffic_watch() -> None:
    """Traffic is not watched: the connection has no idle timeout."""


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
        tool_scopes: the scopes each tool needs, checked against ``client.peer.scopes``
            (:mod:`.scopes`): refused calls never reach the child, ``tools/list`` is filtered.

    Attributes:
        ending: why the connection ended, once it has (``None`` before).
    """

    client: MessageChannel
    child: ChildProcess
    limits: Limits
    stopping: trio.Event = attrs.field(factory=trio.Event)
    stop_now: trio.Event = attrs.field(factory=trio.Event)
    tool_scopes: ToolScopes = attrs.field(factory=ToolScopes)

    # run's wait for stop_now is cut short by the ending: a task less for every connection
    _first: FirstEnding = attrs.field(init=False, factory=FirstEnding)
    _ledger: Ledger = attrs.field(init=False)
    _client_writer: ClientWriter = attrs.field(init=False)
    _child_writer: ChildWriter = attrs.field(init=False)
    _to_child: ToChild = attrs.field(init=False)
    _to_client: ToClient = attrs.field(init=False)
    _idle: IdleWatch | None = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        limits = self.limits
        ledger = self._ledger = Ledger(limits.max_in_flight, limits.request_timeout)
        self.client.send_timeout = limits.send_timeout
        idle_timeout = self.client.idle_timeout
        idle = self._idle = IdleWatch(idle_timeout) if idle_timeout else None
        touch = idle.touch if idle is not None else _no_traffic_watch
        end = self._first.end  # the parts hold it, never the relay (no reference cycle)
        client_writer = self._client_writer = ClientWriter(self.client, limits.send_timeout, end, touch=touch)
        child_writer = self._child_writer = ChildWriter(self.child.channel)
        self._to_child = ToChild(
            self.client,
            limits,
            self.stopping,
            in_flight=ledger.in_flight,
            child_requests=ledger.child_requests,
            opened=ledger.opened,
            opened_all=ledger.opened_all,
            check_idle=ledger.check_idle,
            wait_idle=ledger.wait_idle,
            ended=self._first.ended,
            end=end,
            reply=client_writer.reply,
            send_to_child=child_writer.send,
            touch=touch,
            tool_scopes=self.tool_scopes,
        )
        self._to_client = ToClient(
            self.child,
            self.client,
            limits,
            in_flight=ledger.in_flight,
            remember_child_request=ledger.remember_child_request,
            check_idle=ledger.check_idle,
            end=end,
            send_to_client=client_writer.send,
            tool_scopes=self.tool_scopes,
            lists_tools=ledger.lists_tools,
        )

    @property
    def ending(self) -> Ending | None:
        """Why the connection ended, once it has (``None`` before)."""
        return self._first.ending

    @property
    def in_flight(self) -> int:
        """Requests awaiting a reply."""
        return len(self._ledger.in_flight)

    @property
    def stray_replies(self) -> int:
        """The child's replies dropped so far because they answered no request in flight."""
        return self._to_client.stray_replies

    async def run(self) -> Ending:
        """Relay until the connection ends; return why. Call it once.

        Every request still in flight when the connection ends is answered with the
        :class:`Ending`'s error before this returns (if the client can still be written to), and
        so is every request the client had sent but the relay had not handled: read within the
        bounds of :mod:`.unread` unless the ending says otherwise, after which the client's write
        side is shut (where the channel can half-close) and what it still sends is dropped until it
        closes, within bounds (:func:`.unread.linger`); the client must then only be closed.
        A stop at once (``stop_now``) cuts both short.
        Never raises for transport failures. If cancelled, the relay's tasks are cancelled and
        requests in flight are left unanswered.
        """
        async with trio.open_nursery() as tasks:
            tasks.start_soon(self._to_child.run)
            tasks.start_soon(self._to_client.run)
            tasks.start_soon(self._to_client.watch_child)
            tasks.start_soon(self._watch_stop)
            if self.limits.request_timeout is not None:
                tasks.start_soon(
                    self._ledger.expire_requests,
                    self._child_writer.send,
                    self._client_writer.reply,
                    self.client,
                )
            with self._first.cut_short:  # cancelled by the first ending
                await self.stop_now.wait()
                self._first.end(STOPPED_AT_ONCE)
            await self._finish_write()
            tasks.cancel_scope.cancel()
        self._client_writer.resume()
        ending = self.ending
        assert ending is not None
        await self._answer_in_flight(ending)
        if ending.answers_unread:
            async with cancelled_when(self.stop_now.wait):  # until done, or a stop at once
                await answer_unread(self.client, self._to_child.unread, ending, self._client_writer.send)
                await linger(self.client)
        return ending

    # -- ending --------------------------------------------------------------------------------

    async def _finish_write(self) -> None:
        """Let a write to the client in progress end (bounded) before the tasks are cancelled.

        Cut half-way, it would leave part of a line on the wire, after which nothing could be
        written: the requests in flight would go unanswered. A stop at once cuts it short.
        """
        async with cancelled_when(self.stop_now.wait):
            await self._client_writer.finish_write()

    async def _answer_in_flight(self, ending: Ending) -> None:
        replies = [ending_error(request_id, ending) for request_id in self._ledger.in_flight.take_all()]
        if replies:
            await self._client_writer.send(replies)

    # -- stopping ------------------------------------------------------------------------------

    async def _watch_stop(self) -> None:
        """End the connection when a graceful stop begins, after the drain, or idle too long.

        With an idle timeout, the same task watches it until the stop begins
        (:meth:`.IdleWatch.watch`): a task less for every ``tcp:`` or ``tls:`` connection.
        A stop at once is :meth:`run`'s own task's to watch, from the start: a program embedding
        the relay may set ``stop_now`` alone.
        """
        idle, end = self._idle, self._first.end
        if idle is not None and await idle.watch(self.stopping, self._ledger.in_flight.__len__, end):
            return
        await self.stopping.wait()
        with trio.move_on_after(self.limits.drain_timeout):
            await self._ledger.wait_idle()
        end(Ending("the bridge is stopping", "shutting-down"))
