"""The child's side of shared mode: writing to the current child, reading it, routing what it says.

The supervisor hands each child it starts to :meth:`ChildLink.serve`. Routing is the router's;
this module applies the policies to what the child writes:

* replies go to the client whose request they answer (over-long ones are answered with
  ``-31001``); a ``tools/list`` reply is filtered for that client's scopes (per-tool scopes,
  :mod:`bridge._relay.scopes`: one child's reply may go to clients with different tokens);
* requests from the child (legacy sampling, roots, elicitation, ping) go to the only client with
  requests in flight; if there is none or more than one, the child gets an error reply
  (``-32601``, ``data.reason`` ``no-client-to-route-to``);
* progress by token and subscription notifications by id go to their owner only;
  ``notifications/message`` to the only client with requests in flight, else to every legacy
  client; anything else (list changes, resource updates) to every legacy client;
* when the child exits, every request in flight gets ``-32000`` (``child-exited``).

Nothing here waits for a client: messages for clients are queued by ``deliver``. What clients send
the child is queued (bounded) and written by one task per child, so the requests of every client
that arrive in one pass of the scheduler reach the child in one write. A request that comes alone to
an idle child (no other request in flight, nothing queued, no write in progress: one client calling
one at a time) is written by its sender's task if the child's pipe takes it whole at once, sparing
the writer's trip through the scheduler; a pipe takes a write of up to ``PIPE_BUF`` bytes whole or
not at all, so a sender cancelled meanwhile never leaves part of a line in the child's input.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import attrs
import trio

from channels import JSONObject, MessageTooLarge, ProtocolError

from .._child.process import ChildProcess, describe_exit
from .._errors import CONNECTION_CLOSED, REPLY_TOO_LARGE, error_response
from .._limits import Limits
from .._relay.scopes import ToolScopes
from .._relay.strays import StrayReplies
from .._relay.writers import BATCH
from .clients import Client
from .handshake import REPLAY_ID, Handshake
from .router import ClientKey, Router, subscription_meta

logger = logging.getLogger("bridge.shared")

METHOD_NOT_FOUND = -32601

# Client messages queued for the child's writer before their senders wait for it: four of the
# relay's batches (writers.BATCH), so that a pass of the scheduler's worth of one-message clients
# (2026-07-28 requests) goes in one write, while a child that stops reading holds up its clients.
CHILD_QUEUE = 4 * BATCH


@attrs.define(eq=False)
class ChildLink:
    """The shared child as the clients reach it: one child at a time, restarted by the supervisor.

    Args:
        name: the child's name, for the log.
        limits: bounds and timeouts (``exit_drain_timeout``).
        router: routing of ids, progress tokens, cancellations and subscriptions.
        clients: the clients being served, by key (the legacy ones get session-wide messages).
        deliver: queues a message for a client.
        end_legacy_clients: disconnects every legacy client, with a reason.
        handshake: the legacy handshake the bridge owns (replayed to a restarted child).
        child_ready: called once a child serves (after the handshake's replay, if any).
        child_gone: called when it stops serving.
        done: set when every client is gone: the child is served no longer.
        tool_scopes: the scopes each tool needs (``tools/list`` replies are filtered by them).
    """

    name: str
    limits: Limits
    _router: Router
    _clients: dict[ClientKey, Client]
    _deliver: Callable[[ClientKey, JSONObject, int], None]
    _end_legacy_clients: Callable[[str], None]
    _handshake: Handshake
    _child_ready: Callable[[], None]
    _child_gone: Callable[[], None]
    _done: trio.Event
    _tool_scopes: ToolScopes = attrs.field(factory=ToolScopes)
    _child: ChildProcess | None = attrs.field(init=False, default=None)
    _child_lock: trio.Lock = attrs.field(init=False, factory=trio.Lock)
    # Refusals of the child's requests that nobody can answer: the child's reader collects them
    # and writes them after each batch, so that routing itself never waits on the child's stdin.
    _refusals: list[JSONObject] = attrs.field(init=False, factory=list)
    _strays: StrayReplies = attrs.field(init=False, factory=StrayReplies)
    # Client messages for the child, in order, not taken by a write yet (send_checked queues them,
    # the child's writer task or any send takes them first); the first of them encoded already if
    # send_checked tried to write it at once (it is not encoded twice).
    _queued: list[JSONObject] = attrs.field(init=False, factory=list)
    _first_encoded: bytes | None = attrs.field(init=False, default=None)
    _wake: trio.Event = attrs.field(init=False, factory=trio.Event)  # the writer: something queued
    _room: trio.Event = attrs.field(init=False, factory=trio.Event)  # senders: the queue was taken

    @property
    def child(self) -> ChildProcess | None:
        """The child serving now, if any."""
        return self._child

    @property
    def stray_replies(self) -> int:
        """The children's replies dropped so far because they answered no request in flight."""
        return self._strays.count

    async def serve(self, child: ChildProcess) -> None:
        """Serve one child the supervisor started, until its output ends or ``done`` is set."""
        self._child = child
        try:
            if self._handshake.result is not None and not await self._handshake.replay(
                child, self.read, self.send
            ):
                self._end_legacy_clients("the handshake could not be replayed to the restarted child")
            self._child_ready()
            async with trio.open_nursery() as serving:

                async def until_stopped() -> None:
                    await self._done.wait()
                    serving.cancel_scope.cancel()

                serving.start_soon(until_stopped)
                serving.start_soon(self._write_queued)
                await self.read(child)
                serving.cancel_scope.cancel()
        finally:
            self._child = None
            self._child_gone()
            # What this child never got is not for the next: its requests are answered just below.
            self._queued.clear()
            self._first_encoded = None
            self._room.set()
            # Its last output is awaited only if it ended by itself: one stopped on request
            # (``done``) has no client left to read it, and is told to stop only after this.
            if not self._done.is_set():
                with trio.move_on_after(self.limits.exit_drain_timeout):
                    await child.wait()
            what = describe_exit(child.returncode) if child.returncode is not None else "closed its stdout"
            for client_key, request_id in self._router.fail_all():
                self._deliver(
                    client_key,
                    error_response(
                        request_id,
                        CONNECTION_CLOSED,
                        "Connection closed",
                        "child-exited",
                        detail=f"the shared child {what}",
                        **({"returncode": child.returncode} if child.returncode is not None else {}),
                    ),
                    256,
                )
            self._handshake.child_gone()

    # -- reading the child -----------------------------------------------------------------------

    async def read(self, child: ChildProcess) -> None:
        """Read and route what ``child`` writes, until its output ends or cannot be trusted."""
        channel = child.channel
        while True:
            try:
                message = await channel.receive()
            except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError):
                return
            except ProtocolError as exc:
                if not self._bad_child_line(child, exc):
                    return
                continue
            self._route(message, channel.last_message_bytes)
            while True:  # whatever else is buffered, without a trip through the scheduler
                try:
                    message = channel.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
                except ProtocolError as exc:
                    if not self._bad_child_line(child, exc):
                        return
                    continue
                self._route(message, channel.last_message_bytes)
            # Nothing read is kept while waiting: a 16 MiB reply is freed once routed, not when
            # the child writes again.
            del message
            await self._flush_child_requests()

    def _bad_child_line(self, child: ChildProcess, error: ProtocolError) -> bool:
        """Deal with one bad line from the child; False if its output cannot be trusted any more.

        Junk is counted and dropped; an over-long reply is answered for its request. On False this
        child's run ends, and every request in flight is answered.
        """
        if isinstance(error, MessageTooLarge):
            return self._reply_too_large(error)
        child.note_garbage(error)
        return True

    def _reply_too_large(self, error: MessageTooLarge) -> bool:
        if type(error.request_id) is not int:
            logger.error(
                "[%s] the shared child wrote a message over %d bytes naming no request; restarting it",
                self.name,
                error.limit,
            )
            return False
        routed = self._router.child_response({"jsonrpc": "2.0", "id": error.request_id, "result": None})
        if routed is not None:
            client_key, reply = routed
            self._deliver(
                client_key,
                error_response(
                    reply["id"], REPLY_TOO_LARGE, "Reply too large", "reply-too-large", limit=error.limit
                ),
                256,
            )
        return True

    async def _flush_child_requests(self) -> None:
        if self._refusals:
            refusals, self._refusals = self._refusals, []
            await self.send(refusals)

    def _route(self, message: JSONObject, size: int) -> None:
        if "method" not in message:  # a response (kind(), inlined: one per reply)
            request_id = message["id"]
            if request_id == REPLAY_ID:
                self._handshake.replay_answered(message)
                return
            handshake = request_id is not None and request_id == self._handshake.wire_id
            if handshake:
                self._handshake.answered(message)
            lists_tools = bool(self._tool_scopes.rules) and self._router.lists_tools(request_id)
            routed = self._router.child_response(message)
            if routed is not None:
                if lists_tools:
                    routed = self._filtered(*routed)
                self._deliver(*routed, size)
            elif request_id is not None:
                where = f"[{self.name}] shared child"
                if handshake or self._router.is_late(request_id):
                    self._strays.late(where, request_id)
                else:
                    self._strays.stray(where, request_id)
            return
        if "id" in message:  # a request
            in_flight = self._router.clients_in_flight()
            if len(in_flight) == 1:
                target = in_flight[0]
                self._deliver(target, self._router.child_request(target, message), size)
            else:
                self._refusals.append(
                    error_response(
                        message["id"],
                        METHOD_NOT_FOUND,
                        "No client to route to",
                        "no-client-to-route-to",
                        clients_with_requests_in_flight=len(in_flight),
                    )
                )
            return
        method = message["method"]
        if method == "notifications/progress":
            routed = self._router.child_progress(message)
        elif method == "notifications/cancelled":
            routed = self._router.child_cancel(message)
        else:
            routed = self._router.child_subscription(message)
            if routed is None and subscription_meta(message) is not None:
                return  # its subscription is over (cancelled, or its client left): nobody's now
            if routed is None and method == "notifications/message":
                in_flight = self._router.clients_in_flight()
                if len(in_flight) == 1:
                    routed = in_flight[0], message
        if routed is not None:
            self._deliver(*routed, size)
        elif method not in ("notifications/progress", "notifications/cancelled"):
            for client in list(self._clients.values()):
                if client.legacy:
                    self._deliver(client.key, message, size)

    def _filtered(self, client_key: ClientKey, reply: JSONObject) -> tuple[ClientKey, JSONObject]:
        """A ``tools/list`` reply as this client may see it (a client gone sees nothing anyway)."""
        client = self._clients.get(client_key)
        scopes = client.channel.peer.scopes if client is not None else frozenset()
        return client_key, self._tool_scopes.filter_reply(reply, scopes)

    # -- writing to the child -------------------------------------------------------------------

    @property
    def takes_one_at_once(self) -> bool:
        """Whether :meth:`send_checked` of one message returns without waiting (the queue has room)."""
        return len(self._queued) < CHILD_QUEUE

    async def send_checked(self, messages: Sequence[JSONObject]) -> None:
        """Forward routed client messages: queue them for the child's writer.

        Waits only while the queue is over :data:`CHILD_QUEUE` (backpressure from the child's
        stdin). Requests that cannot reach the child (there is none: it is going down) are
        answered at once, so none waits for a child that will never see it.
        """
        if not messages:
            return
        child = self._child
        if child is None:
            self._answer_unsent(messages)
            return
        if (
            not self._queued
            and self._router.pending == len(messages) == 1  # an idle child: nothing to batch it with
            and not self._child_lock.locked()
        ):
            data = child.channel.encode_batch(messages)
            if child.channel.send_encoded_nowait(data):
                return  # written whole, and nothing was before it
            self._first_encoded = data
        self._queued.extend(messages)
        self._wake.set()
        while len(self._queued) > CHILD_QUEUE and self._child is not None:
            if self._room.is_set():
                self._room = trio.Event()
            await self._room.wait()

    async def _write_queued(self) -> None:
        """The child's writer: write what clients queued, all of it at once, until cancelled."""
        while True:
            while not self._queued:
                self._wake = trio.Event()
                await self._wake.wait()
            await self.send(())

    def _answer_unsent(self, messages: Sequence[JSONObject]) -> None:
        """Answer the requests among ``messages`` that did not reach the child."""
        for message in messages:
            if "method" in message and "id" in message:
                taken = self._router.take(message["id"])
                if taken is not None:
                    self._deliver(
                        taken[0],
                        error_response(
                            taken[1],
                            CONNECTION_CLOSED,
                            "Connection closed",
                            "child-exited",
                            detail="the shared child was going down",
                        ),
                        256,
                    )

    async def send(self, messages: Sequence[JSONObject]) -> bool:
        """Write ``messages`` to the current child, after what clients queued for it.

        False if they did not reach it (there is none or its stdin is closed).
        """
        child = self._child
        if child is None:
            return False
        try:
            self._child_lock.acquire_nowait()
        except trio.WouldBlock:
            await self._child_lock.acquire()
        queued, self._queued = self._queued, []
        first, self._first_encoded = self._first_encoded, None
        if queued:
            self._room.set()
        try:
            parts = [] if first is None else [first]  # queued[0], encoded by send_checked
            rest = queued if first is None else queued[1:]
            if messages:
                rest = [*rest, *messages]
            if rest:
                parts.append(child.channel.encode_batch(rest))
            if parts:  # (one part alone is written as it is, not copied)
                await child.channel.send_encoded(b"".join(parts))
            return True
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._answer_unsent(queued)
            return False
        except BaseException:  # cancelled part way: what clients queued may not have been written
            self._answer_unsent(queued)
            raise
        finally:
            self._child_lock.release()
