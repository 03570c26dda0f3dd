"""Shared mode: one supervised child serves every client of every listener.

Sound for modern (stateless, 2026-07-28) servers, and made sound for legacy ones by the bridge owning
the ``initialize`` handshake. Routing is :class:`~bridge._shared.router.Router`'s; this module moves
messages and applies the policies:

* **Handshake (legacy clients).** The first client's ``initialize`` goes to the child; its result is
  cached and every later client's ``initialize`` is answered from it (the protocol version the
  first client negotiated applies to all). Only the first ``notifications/initialized`` reaches the
  child. After a restart the bridge replays the cached ``initialize`` (and ``initialized``) to the new
  child before any client message, so legacy clients need not notice; if the replay fails, legacy
  clients are disconnected with the reason.
* **Requests from the child** (legacy sampling, roots, elicitation, ping) go to the only client with
  requests in flight, the one the child can be working for; if there is none or more than one, the
  child gets an error reply (``-32601``, ``data.reason`` ``no-client-to-route-to``).
* **Notifications from the child**: progress by token and subscription notifications by id, to
  their owner only; ``notifications/message`` to the only client with requests in flight, else to
  every legacy client (for which logging is session-wide); anything else (list changes, resource
  updates) to every legacy client. Modern clients receive only what belongs to their requests.
* **Fairness.** Each client has its own queue of at most ``client_queue`` messages, and a message
  is only queued behind at most ``client_queue_bytes`` bytes (so one large reply still passes);
  the child's reader never waits for a client: a client whose queue overflows is disconnected
  (``client-too-slow``), and nobody else is slowed down. A client has at
  most ``max_in_flight`` requests at the child.
* **Child restarts** (by the supervisor): every request in flight gets ``-32000``
  (``child-exited``), open subscriptions end with it (clients re-listen), requests that arrive while
  the child restarts wait up to ``CHILD_READY_TIMEOUT`` for it.
* **Disconnects**: a client's requests in flight are cancelled at the child
  (``notifications/cancelled``), and late replies are dropped; the child's requests to it are
  answered with an error.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from typing import Any

import attrs
import trio

from channels import (
    INVALID_REQUEST,
    JSONObject,
    Kind,
    MessageChannel,
    MessageTooLarge,
    ProtocolError,
    SendTimeout,
    kind,
    receive_batch,
)

from .._child.process import ChildProcess, ChildSpec, describe_exit
from .._child.supervisor import CrashLoop, RestartPolicy, Supervisor
from .._errors import (
    CONNECTION_CLOSED,
    REPLY_TOO_LARGE,
    REQUEST_TIMEOUT,
    ChildStartError,
    bad_input_reply,
    error_response,
    too_many_requests,
)
from .._limits import Limits
from .._relay.inflight import DuplicateRequest, TooManyRequests
from .._relay.relay import BATCH
from .router import ClientKey, Router

logger = logging.getLogger("bridge.shared")

# Requests that arrive while the child restarts wait this long for it (a Python server starts in
# well under a second; backoff adds at most 30 s, but a client should hear back sooner than that).
CHILD_READY_TIMEOUT = 10.0
# A later client's initialize waits this long for the first one's handshake to finish.
HANDSHAKE_TIMEOUT = 30.0
# The id of the handshake the bridge replays to a restarted child (never a wire id: those are ints).
REPLAY_ID = "mcp-bridge-handshake"
METHOD_NOT_FOUND = -32601


@attrs.define(eq=False)
class _Client:
    key: ClientKey
    channel: MessageChannel
    legacy: bool = False
    outbox: deque[tuple[JSONObject, int]] = attrs.field(factory=deque)
    outbox_bytes: int = 0
    wake: trio.Event = attrs.field(factory=trio.Event)  # the writer: something to send
    changed: trio.Event = attrs.field(factory=trio.Event)  # drains: a reply queued, or sent
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    ending: str | None = None
    drained: bool = False
    sending: bool = False  # the writer holds a batch taken from the outbox, not yet written

    @property
    def unsent(self) -> bool:
        """Messages queued for this client, or taken by its writer and still being written."""
        return bool(self.outbox) or self.sending


@attrs.define(eq=False)
class _Handshake:
    """The legacy handshake the bridge owns: the first client's, cached for everyone."""

    wire_id: int | None = None  # the first initialize, while at the child
    params: Any = None
    result: Any = None
    initialized_sent: bool = False
    done: trio.Event = attrs.field(factory=trio.Event)


@attrs.define(eq=False)
class SharedChild:
    """One child for all clients.

    Start it with ``nursery.start(shared.run)``, then call :meth:`serve` for each connection.

    Args:
        spec: the child to run.
        limits: bounds and timeouts.
        stopping: the daemon's graceful-stop event (new requests are refused once it is set).
        policy: the restart policy.
    """

    spec: ChildSpec
    limits: Limits
    stopping: trio.Event
    policy: RestartPolicy = attrs.field(factory=RestartPolicy)
    supervisor: Supervisor = attrs.field(init=False)
    _router: Router = attrs.field(init=False)
    _clients: dict[ClientKey, _Client] = attrs.field(init=False, factory=dict)
    _next_key: int = attrs.field(init=False, default=1)
    _child: ChildProcess | None = attrs.field(init=False, default=None)
    _ready: trio.Event = attrs.field(init=False, factory=trio.Event)
    _handshake: _Handshake = attrs.field(init=False, factory=_Handshake)
    _replayed: trio.Event = attrs.field(init=False, factory=trio.Event)
    _replay_reply: JSONObject | None = attrs.field(init=False, default=None)
    _child_lock: trio.Lock = attrs.field(init=False, factory=trio.Lock)
    _done: trio.Event = attrs.field(init=False, factory=trio.Event)
    # (deadline, wire id) of requests at the child, in admission order (one timeout for all, so
    # also deadline order); wire ids are never reused, so a stale entry is simply not found.
    _deadlines: deque[tuple[float, int]] = attrs.field(init=False, factory=deque)
    _deadline_added: trio.Event = attrs.field(init=False, factory=trio.Event)
    # Refusals of the child's requests that nobody can answer: the child's reader collects them
    # and writes them after each batch, so that routing itself never waits on the child's stdin.
    _refusals: list[JSONObject] = attrs.field(init=False, factory=list)

    def __attrs_post_init__(self) -> None:
        self._router = Router(self.limits.max_in_flight)
        self.supervisor = Supervisor(self.spec, self.limits, self.policy, on_state=self._state_changed)

    @property
    def in_flight(self) -> int:
        return sum(self._router.in_flight(key) for key in self._clients)

    @property
    def clients(self) -> int:
        return len(self._clients)

    @property
    def child(self) -> ChildProcess | None:
        return self._child

    def _state_changed(self, state: Any, attempt: int) -> None:
        logger.info(
            "[%s] shared child %s%s", self.spec.name, state.value, f" (attempt {attempt})" if attempt else ""
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Supervise the child until :meth:`stop`; ready once the first child has started.

        Raises:
            ChildStartError: the first child could not be started.
            CrashLoop: the child kept exiting (the daemon then exits 75).
        """
        try:
            async with trio.open_nursery() as nursery:
                if self.limits.request_timeout is not None:
                    nursery.start_soon(self._expire_requests, self.limits.request_timeout)
                await nursery.start(self._supervise, nursery.cancel_scope)
                task_status.started()
        except BaseExceptionGroup as group:
            # Give the caller the supervisor's own verdict, not the nursery's wrapping of it.
            if len(group.exceptions) == 1 and isinstance(group.exceptions[0], (ChildStartError, CrashLoop)):
                raise group.exceptions[0] from None
            raise

    async def _supervise(self, helpers: trio.CancelScope, *, task_status: trio.TaskStatus[None]) -> None:
        await self.supervisor.run(self._serve_child, task_status=task_status)
        helpers.cancel()

    async def _expire_requests(self, timeout: float) -> None:
        """Expire requests still at the child after ``timeout``.

        Their client gets ``-32001`` and the child ``notifications/cancelled``; a late reply is
        then dropped.
        """
        while True:
            while not self._deadlines:
                self._deadline_added = trio.Event()
                await self._deadline_added.wait()
            deadline, wire = self._deadlines[0]
            await trio.sleep_until(deadline)
            self._deadlines.popleft()
            owner = self._router.take(wire)
            if owner is None:
                continue  # answered, cancelled, or its client left
            client_key, request_id = owner
            logger.info("[%s] request %r timed out after %gs", self.spec.name, request_id, timeout)
            await self._send_to_child(
                [
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": {"requestId": wire, "reason": f"timed out after {timeout:g}s"},
                    }
                ]
            )
            self._deliver(
                client_key,
                error_response(
                    request_id, REQUEST_TIMEOUT, "Request timed out", "request-timeout", timeout=timeout
                ),
                256,
            )

    def stop(self) -> None:
        """Every client is gone: stop the child in MCP order and do not restart it.

        :meth:`run` returns then.
        """
        self.supervisor.stop()
        self._done.set()

    # -- the child -----------------------------------------------------------------------------

    async def _serve_child(self, child: ChildProcess) -> None:
        self._child = child
        try:
            if self._handshake.result is not None and not await self._replay_handshake(child):
                self._end_legacy_clients("the handshake could not be replayed to the restarted child")
            self._ready.set()
            async with trio.open_nursery() as serving:

                async def until_stopped() -> None:
                    await self._done.wait()
                    serving.cancel_scope.cancel()

                serving.start_soon(until_stopped)
                await self._read_child(child)
                serving.cancel_scope.cancel()
        finally:
            self._child = None
            self._ready = trio.Event()
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
            self._handshake.wire_id = None

    async def _replay_handshake(self, child: ChildProcess) -> bool:
        """Send the cached initialize to a restarted child and wait for its result (bounded).

        False if it did not answer in time or answered with an error.
        """
        self._replayed = trio.Event()
        self._replay_reply = None
        replay = {"jsonrpc": "2.0", "id": REPLAY_ID, "method": "initialize", "params": self._handshake.params}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        with trio.move_on_after(HANDSHAKE_TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read_child, child)  # until the reply
                await self._send_to_child([replay])
                await self._replayed.wait()
                nursery.cancel_scope.cancel()
            if self._replay_reply is None or "error" in self._replay_reply:
                logger.error(
                    "[%s] the restarted child refused the replayed handshake: %s",
                    self.spec.name,
                    self._replay_reply,
                )
                return False
            await self._send_to_child([initialized])
            return True
        return False

    async def _read_child(self, child: ChildProcess) -> None:
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
                self.spec.name,
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
            await self._send_to_child(refusals)

    def _route(self, message: JSONObject, size: int) -> None:
        message_kind = kind(message)
        if message_kind is Kind.RESPONSE:
            request_id = message["id"]
            if request_id == REPLAY_ID:
                self._replay_reply = message
                self._replayed.set()
                return
            if request_id is not None and request_id == self._handshake.wire_id:
                self._handshake.result = message.get("result")
                self._handshake.wire_id = None
                self._handshake.done.set()
                if self._handshake.result is None:  # it failed: the next initialize tries again
                    self._handshake = _Handshake()
            routed = self._router.child_response(message)
            if routed is not None:
                self._deliver(*routed, size)
            return
        if message_kind is Kind.REQUEST:
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

    # -- delivery to clients ------------------------------------------------------------------

    def _deliver(self, client_key: ClientKey, message: JSONObject, size: int) -> None:
        """Queue a message for a client without waiting.

        A client whose queue overflows is disconnected, so that the child's reader never waits for
        anyone.
        """
        client = self._clients.get(client_key)
        if client is None or client.ending is not None:
            return
        # The byte limit bounds what was already waiting: a single message larger than it (up to
        # --max-child-message) still reaches a client that keeps up.
        waiting_bytes = client.outbox_bytes
        client.outbox.append((message, size))
        client.outbox_bytes += size
        client.wake.set()
        client.changed.set()
        if len(client.outbox) > self.limits.client_queue or waiting_bytes > self.limits.client_queue_bytes:
            self._drop(
                client,
                "client-too-slow",
                f"its queue passed {self.limits.client_queue} messages or "
                f"{self.limits.client_queue_bytes} bytes",
            )

    def _drop(self, client: _Client, reason: str, detail: str) -> None:
        if client.ending is None:
            client.ending = reason
            logger.warning("%s: disconnected: %s", client.channel.peer, detail)
            client.scope.cancel()

    def _end_legacy_clients(self, detail: str) -> None:
        for client in list(self._clients.values()):
            if client.legacy:
                self._drop(client, "handshake-replay-failed", detail)

    async def _write_client(self, client: _Client) -> None:
        while True:
            while not client.outbox:
                client.wake = trio.Event()
                await client.wake.wait()
            batch = [message for message, _ in client.outbox]
            client.outbox.clear()
            client.outbox_bytes = 0
            client.sending = True
            try:
                await client.channel.send_many(batch)
            except SendTimeout:
                self._drop(client, "client-too-slow", f"it read nothing for {self.limits.send_timeout}s")
                return
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._drop(client, "client-disconnected", "connection lost")
                return
            finally:
                client.sending = False
            client.changed.set()

    # -- clients ---------------------------------------------------------------------------------

    async def serve(self, channel: MessageChannel) -> str:
        """Serve one client until it leaves or is dropped; return why it ended.

        The caller owns ``channel`` and closes it afterwards.
        """
        client = _Client(self._next_key, channel)
        self._next_key += 1
        channel.send_timeout = self.limits.send_timeout
        self._clients[client.key] = client
        self._router.attach(client.key)
        try:
            with client.scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._write_client, client)
                    nursery.start_soon(self._drain_when_stopping, client, nursery.cancel_scope)
                    await self._read_client(client)
                    await self._drain(client, self.limits.half_close_timeout, "half-close-timeout")
                    nursery.cancel_scope.cancel()
        finally:
            del self._clients[client.key]
            await self._detach(client)
        return client.ending or "client-closed"

    async def _drain_when_stopping(self, client: _Client, scope: trio.CancelScope) -> None:
        await self.stopping.wait()
        await self._drain(client, self.limits.drain_timeout, "shutting-down")
        if client.ending is None:
            client.ending = "shutting-down"  # not "client-closed": the bridge ended it (WS 1001)
        scope.cancel()

    async def _drain(self, client: _Client, timeout: float, reason: str) -> None:
        """Wait (bounded) for the client's replies in flight and its queue.

        What is still in flight is then answered with ``-32000`` and ``reason``, and sent
        (bounded).
        """
        if client.drained:
            return
        with trio.move_on_after(timeout):
            while self._router.in_flight(client.key) or client.unsent:
                client.changed = trio.Event()
                await client.changed.wait()
        client.drained = True
        self.fail_client(client.key, reason)
        if client.unsent:
            with trio.move_on_after(self.limits.send_timeout):
                while client.unsent:
                    client.changed = trio.Event()
                    await client.changed.wait()

    def fail_client(self, client_key: ClientKey, reason: str, code: int = CONNECTION_CLOSED) -> None:
        """Answer a client's requests in flight with ``code``; later replies are dropped.

        ``code`` is ``-32000`` unless the client itself is at fault.
        """
        for request_id in self._router.take_client(client_key):
            self._deliver(client_key, error_response(request_id, code, "Connection closed", reason), 256)

    def fail_everyone(self, reason: str) -> None:
        """The immediate stop: every request in flight is answered now."""
        for client_key in list(self._clients):
            self.fail_client(client_key, reason)

    async def _detach(self, client: _Client) -> None:
        detached = self._router.detach(client.key)
        messages: list[JSONObject] = [
            {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": wire, "reason": "client disconnected"},
            }
            for wire in detached.cancel
        ]
        messages += [
            error_response(child_id, CONNECTION_CLOSED, "Connection closed", "client-disconnected")
            for child_id in detached.refuse
        ]
        if messages and self._child is not None:
            with trio.CancelScope(shield=True), trio.move_on_after(self.limits.send_timeout):
                await self._send_to_child(messages)

    async def _read_client(self, client: _Client) -> None:
        consecutive_errors = 0
        while True:
            try:
                items = await receive_batch(client.channel, BATCH)
            except trio.EndOfChannel:
                return
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._drop(client, "client-disconnected", "connection lost")
                return
            forward: list[JSONObject] = []
            for item in items:
                if isinstance(item, ProtocolError):
                    consecutive_errors += 1
                    self._answer_bad_input(client, item)
                    if (
                        isinstance(item, MessageTooLarge)
                        or consecutive_errors >= self.limits.max_consecutive_errors
                    ):
                        await self._send_to_child_checked(forward)
                        await self._flush_and_drop(client, item)
                        return
                    continue
                consecutive_errors = 0
                routed = await self._admit(client, item)
                if routed is not None:
                    forward.append(routed)
            await self._send_to_child_checked(forward)

    async def _flush_and_drop(self, client: _Client, error: ProtocolError) -> None:
        reason = "message-too-large" if isinstance(error, MessageTooLarge) else "too-many-invalid-messages"
        self.fail_client(client.key, reason, INVALID_REQUEST)  # as the per-connection relay does
        with trio.move_on_after(self.limits.send_timeout):
            while client.unsent:
                client.changed = trio.Event()
                await client.changed.wait()
        self._drop(client, reason, str(error))

    def _answer_bad_input(self, client: _Client, error: ProtocolError) -> None:
        self._deliver(client.key, bad_input_reply(error), 256)

    async def _admit(self, client: _Client, message: JSONObject) -> JSONObject | None:
        """The child's copy of a client message, or None if it is answered or dropped here."""
        message_kind = kind(message)
        if message_kind is Kind.NOTIFICATION:
            method = message["method"]
            if method == "notifications/cancelled":
                return self._router.client_cancel(client.key, message)
            if method == "notifications/initialized":
                if self._handshake.initialized_sent:
                    return None  # the child was initialized once; later clients' are swallowed
                self._handshake.initialized_sent = True
            return message
        if message_kind is Kind.RESPONSE:
            return self._router.client_response(client.key, message)
        request_id = message["id"]
        if self.stopping.is_set():
            self._deliver(
                client.key,
                error_response(request_id, CONNECTION_CLOSED, "Connection closed", "shutting-down"),
                256,
            )
            return None
        if message["method"] == "initialize":
            client.legacy = True
            if self._handshake.result is not None or self._handshake.wire_id is not None:
                await self._answer_from_handshake(client, request_id)
                return None
        if not self._ready.is_set():
            with trio.move_on_after(CHILD_READY_TIMEOUT):
                await self._ready.wait()
            if not self._ready.is_set():
                self._deliver(
                    client.key,
                    error_response(
                        request_id,
                        CONNECTION_CLOSED,
                        "Connection closed",
                        "child-restarting",
                        detail=f"the shared child was not back within {CHILD_READY_TIMEOUT:g}s",
                    ),
                    256,
                )
                return None
        try:
            routed = self._router.client_request(client.key, message)
        except DuplicateRequest:
            self._deliver(
                client.key,
                error_response(request_id, INVALID_REQUEST, "Invalid Request", "duplicate-id"),
                256,
            )
            return None
        except TooManyRequests:
            self._deliver(client.key, too_many_requests(request_id, self.limits.max_in_flight), 256)
            return None
        if message["method"] == "initialize":
            self._handshake.wire_id = routed["id"]
            self._handshake.params = message.get("params")
        if self.limits.request_timeout is not None:
            self._deadlines.append((trio.current_time() + self.limits.request_timeout, routed["id"]))
            self._deadline_added.set()
        return routed

    async def _answer_from_handshake(self, client: _Client, request_id: Any) -> None:
        with trio.move_on_after(HANDSHAKE_TIMEOUT):
            await self._handshake.done.wait()
        if self._handshake.result is None:
            self._deliver(
                client.key,
                error_response(
                    request_id,
                    CONNECTION_CLOSED,
                    "Connection closed",
                    "handshake-failed",
                    detail="the first client's initialize did not succeed",
                ),
                256,
            )
        else:
            self._deliver(
                client.key, {"jsonrpc": "2.0", "id": request_id, "result": self._handshake.result}, 256
            )

    # -- writing to the child -------------------------------------------------------------------

    async def _send_to_child_checked(self, messages: Sequence[JSONObject]) -> None:
        """Forward routed client messages.

        Requests that cannot reach the child (it is going down) are answered at once, so none waits
        for a child that will never see it.
        """
        if messages and not await self._send_to_child(messages):
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

    async def _send_to_child(self, messages: Sequence[JSONObject]) -> bool:
        """Write to the current child; False if there is none or its stdin is closed."""
        child = self._child
        if child is None:
            return False
        try:
            self._child_lock.acquire_nowait()
        except trio.WouldBlock:
            await self._child_lock.acquire()
        try:
            await child.channel.send_many(messages)
            return True
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        finally:
            self._child_lock.release()
