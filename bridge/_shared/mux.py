"""Shared mode: one supervised child serves every client of every listener.

Sound for modern (stateless, 2026-07-28) servers, and made sound for legacy ones by the bridge owning
the ``initialize`` handshake. Routing is :class:`~bridge._shared.router.Router`'s; the modules beside
this one move messages and apply the policies, and :class:`SharedChild` here wires them together,
giving each the pieces it uses: ``clients`` (each client's queue, writer and reader), ``admission``
(what a client message becomes at the child; request timeouts), ``handshake`` (the cached
``initialize``) and ``link`` (writing to the child, reading it and routing its messages back).
The policies:

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
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import attrs
import trio

from channels import JSONObject, MessageChannel

from .._child.process import ChildProcess, ChildSpec
from .._child.restarts import CrashLoop, RestartPolicy
from .._child.supervisor import Supervisor
from .._errors import CONNECTION_CLOSED, ChildStartError, error_response
from .._limits import Limits
from .._relay.idle import IdleWatch
from .._relay.scopes import ToolScopes
from .admission import Admission
from .clients import MUST_WAIT, Client, ClientReader, Clients, direct_channel
from .handshake import Handshake
from .link import ChildLink
from .router import ClientKey, Router

logger = logging.getLogger("bridge.shared")


@attrs.define(eq=False)
class SharedChild:
    """One child for all clients.

    Start it with ``nursery.start(shared.run)``, then call :meth:`serve` for each connection.

    Args:
        spec: the child to run.
        limits: bounds and timeouts.
        stopping: the daemon's graceful-stop event (new requests are refused once it is set).
        policy: the restart policy.
        tool_scopes: the scopes each tool needs, checked per client against its channel's
            ``peer.scopes`` (:mod:`bridge._relay.scopes`).
    """

    spec: ChildSpec
    limits: Limits
    stopping: trio.Event
    policy: RestartPolicy = attrs.field(factory=RestartPolicy)
    tool_scopes: ToolScopes = attrs.field(factory=ToolScopes)
    supervisor: Supervisor = attrs.field(init=False)
    _router: Router = attrs.field(init=False)
    _clients: Clients = attrs.field(init=False)
    _admission: Admission = attrs.field(init=False)
    _link: ChildLink = attrs.field(init=False)
    _reader: ClientReader = attrs.field(init=False)
    _next_key: int = attrs.field(init=False, default=1)
    _done: trio.Event = attrs.field(init=False, factory=trio.Event)

    def __attrs_post_init__(self) -> None:
        name, limits = self.spec.name, self.limits
        router = self._router = Router(limits.max_in_flight)
        clients = self._clients = Clients(limits, router)
        handshake = Handshake(name, clients.deliver)
        admission = self._admission = Admission(
            name, limits, self.stopping, router, handshake, clients.deliver, self.tool_scopes
        )
        link = self._link = ChildLink(
            name,
            limits,
            router,
            clients.by_key,
            clients.deliver,
            clients.end_legacy,
            handshake,
            admission.child_ready,
            admission.child_gone,
            self._done,
            self.tool_scopes,
        )
        self._reader = ClientReader(
            limits,
            admission.admit,
            admission.admit_waiting,
            link.send_checked,
            clients.deliver,
            clients.drop,
            clients.fail,
        )
        self.supervisor = Supervisor(self.spec, limits, self.policy, on_state=self._state_changed)

    @property
    def in_flight(self) -> int:
        return sum(self._router.in_flight(key) for key in self._clients.by_key)

    @property
    def clients(self) -> int:
        return len(self._clients.by_key)

    @property
    def child(self) -> ChildProcess | None:
        return self._link.child

    @property
    def stray_replies(self) -> int:
        """Replies of the shared child (every one since start) that answered no request in flight."""
        return self._link.stray_replies

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
                    nursery.start_soon(
                        self._admission.expire_requests, self.limits.request_timeout, self._link.send
                    )
                nursery.start_soon(self._drain_everyone_when_stopping, nursery)
                await nursery.start(self._supervise, nursery.cancel_scope)
                task_status.started()
        except BaseExceptionGroup as group:
            # Give the caller the supervisor's own verdict, not the nursery's wrapping of it.
            if len(group.exceptions) == 1 and isinstance(group.exceptions[0], (ChildStartError, CrashLoop)):
                raise group.exceptions[0] from None
            raise

    async def _supervise(self, helpers: trio.CancelScope, *, task_status: trio.TaskStatus[None]) -> None:
        await self.supervisor.run(self._link.serve, task_status=task_status)
        helpers.cancel()

    def stop(self) -> None:
        """Every client is gone: stop the child in MCP order and do not restart it.

        :meth:`run` returns then.
        """
        self.supervisor.stop()
        self._done.set()

    # -- clients ---------------------------------------------------------------------------------

    async def serve(self, channel: MessageChannel) -> str:
        """Serve one client until it leaves or is dropped; return why it ended.

        The caller owns ``channel`` and closes it afterwards.
        """
        client = Client(self._next_key, channel, direct_channel(channel))
        self._next_key += 1
        channel.send_timeout = self.limits.send_timeout
        self._clients.by_key[client.key] = client
        self._router.attach(client.key)
        try:
            with client.scope:
                if client.direct is not None and not channel.idle_timeout and not self.stopping.is_set():
                    # Nothing to write or watch beside reading it (a 2026-07-28 request): no nursery.
                    await self._reader.read(client)
                    await self._drain(client, self.limits.half_close_timeout, "half-close-timeout")
                else:
                    await self._serve_with_helpers(client)
        finally:
            del self._clients.by_key[client.key]
            await self._detach(client)
        return client.ending or "client-closed"

    async def serve_exchange(self, channel: MessageChannel, respond: Callable[[], Awaitable[bool]]) -> str:
        """Serve one request that is a channel of its own, in the caller's task; return why it ended.

        A 2026-07-28 HTTP request: its request is read and admitted as :meth:`serve` would, then
        ``respond`` writes its response (outside the client's scope: stopping the client ends
        the response instead, with what it was given), and a client that left is detached as one
        that disconnected (its request is cancelled at the child). ``respond`` is awaited exactly
        once, come what may: if serving fails before it, ``channel`` is ended first (the response
        then ends with what was queued on it). The caller owns ``channel``, which must queue
        without waiting (:func:`direct_channel`), and closes it afterwards.
        """
        direct = direct_channel(channel)
        assert direct is not None, "an exchange queues without waiting"
        client = Client(self._next_key, channel, direct, responding=True)
        self._next_key += 1
        channel.send_timeout = self.limits.send_timeout
        self._clients.by_key[client.key] = client
        self._router.attach(client.key)
        responded = False
        try:
            try:
                request = await channel.receive()  # at once: the request it was made with
            except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # it was closed first
            else:
                routed = (
                    self._admission.admit(client, request)
                    if self._admission.admits_at_once and self._link.takes_one_at_once
                    else MUST_WAIT
                )
                if routed is not MUST_WAIT:
                    # Admitted and written or queued for the child without a checkpoint: nothing for
                    # stopping the client to cancel, so no scope is entered (trio's costs a
                    # generator context manager). The request is valid (the exchange was made
                    # with it): ClientReader.forward's handling of bad input has nothing to do.
                    if routed is not None:
                        await self._link.send_checked((routed,))
                else:
                    with client.scope:
                        await self._reader.forward(client, [request])
            responded = True
            if not await respond():
                self._clients.drop(client, "client-disconnected", "connection lost")
        finally:
            try:
                del self._clients.by_key[client.key]
                await self._detach(client)
            finally:
                if not responded:  # serving failed: the response ends with what it was given
                    direct.end()
                    await respond()
        return client.ending or "client-closed"

    async def _serve_with_helpers(self, client: Client) -> None:
        """Read ``client`` beside its writer, its idle watch and its drain, as it needs them."""
        async with trio.open_nursery() as nursery:
            if client.direct is None:
                nursery.start_soon(self._clients.write, client)
            if self.stopping.is_set():  # it came after the drain began: drained alike
                nursery.start_soon(self._drain_when_stopping, client)
            if client.channel.idle_timeout:
                client.idle = IdleWatch(client.channel.idle_timeout)
                nursery.start_soon(client.idle.run, partial(self._wait_idle, client), client.end)
            await self._reader.read(client)
            await self._drain(client, self.limits.half_close_timeout, "half-close-timeout")
            if client.unsent or client.idle is not None:
                nursery.cancel_scope.cancel()
            else:  # the usual end: no cancellation to raise
                client.close_writer()

    async def _wait_idle(self, client: Client) -> None:
        """Return once ``client`` has nothing in flight at the child and nothing unsent."""
        while self._router.in_flight(client.key) or client.unsent:
            await client.wait_changed()

    async def _drain_everyone_when_stopping(self, nursery: trio.Nursery) -> None:
        """On a graceful stop, drain every client being served.

        One task for all until then, not one per client: a 2026-07-28 HTTP request is a client
        of its own.
        """
        await self.stopping.wait()
        for client in list(self._clients.by_key.values()):
            nursery.start_soon(self._drain_when_stopping, client)

    async def _drain_when_stopping(self, client: Client) -> None:
        await self._drain(client, self.limits.drain_timeout, "shutting-down")
        if client.ending is None:
            client.ending = "shutting-down"  # not "client-closed": the bridge ended it (WS 1001)
        client.stop()

    async def _drain(self, client: Client, timeout: float, reason: str) -> None:
        """Wait (bounded) for the client's replies in flight and its queue.

        What is still in flight is then answered with ``-32000`` and ``reason``, and sent
        (bounded).
        """
        if client.drained:
            return
        with trio.move_on_after(timeout):
            while self._router.in_flight(client.key) or client.unsent:
                await client.wait_changed()
        client.drained = True
        self.fail_client(client.key, reason)
        if client.unsent:
            with trio.move_on_after(self.limits.send_timeout):
                while client.unsent:
                    await client.wait_changed()

    def fail_client(self, client_key: ClientKey, reason: str, code: int = CONNECTION_CLOSED) -> None:
        """Answer a client's requests in flight with ``code``; later replies are dropped.

        ``code`` is ``-32000`` unless the client itself is at fault.
        """
        self._clients.fail(client_key, reason, code)

    def hurry(self) -> None:
        """The immediate stop: every request in flight is answered now, the child killed at once.

        The child, whether still served or already being stopped, skips the MCP order's grace
        periods (:meth:`Supervisor.hurry`).
        """
        for client_key in list(self._clients.by_key):
            self.fail_client(client_key, "shutting-down")
        self.supervisor.hurry()

    async def end_everyone(self, reason: str, detail: str) -> None:
        """Disconnect every client: the child was given up.

        Their requests in flight are answered with ``-32000`` and ``reason``, and what is queued
        for them gets ``send_timeout`` to be sent, first.
        """
        for client_key in list(self._clients.by_key):
            self.fail_client(client_key, reason)
        with trio.move_on_after(self.limits.send_timeout):
            for client in list(self._clients.by_key.values()):
                while client.unsent and client.ending is None:
                    await client.wait_changed()
        for client in list(self._clients.by_key.values()):
            self._clients.drop(client, reason, detail)

    async def _detach(self, client: Client) -> None:
        detached = self._router.detach(client.key)
        if not detached.cancel and not detached.refuse:
            return
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
        if messages and self._link.child is not None:
            with trio.CancelScope(shield=True), trio.move_on_after(self.limits.send_timeout):
                await self._link.send(messages)
