"""Admission to the shared child: what a valid client message becomes there, and for how long.

A request is refused here when the bridge is stopping, when its id is already in flight for that
client or when the client has too many, and a ``tools/call`` the client's scopes do not allow
(:mod:`bridge._relay.scopes`); a legacy client's ``initialize`` after the first is answered from
the cached handshake; a request that arrives while the child restarts waits up to
``CHILD_READY_TIMEOUT`` for it. Taking a message never waits (:meth:`Admission.admit`); the two
waits are :meth:`Admission.admit_waiting`'s, after the caller has sent what it admitted before,
so that one client's read is admitted without a checkpoint. A request admitted gets a wire id
(the router's) and, with a request timeout, a deadline: :meth:`Admission.expire_requests`
answers it with ``-32001`` when the deadline passes, and cancels it at the child separately, as
the child reads (docs/design.md §5.1): a child that reads nothing holds up no client's answer.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

import attrs
import trio

from channels import INVALID_REQUEST, JSONObject

from .._errors import CONNECTION_CLOSED, REQUEST_TIMEOUT, error_response, too_many_requests
from .._limits import Limits
from .._relay.cancellations import TimeoutCancellations
from .._relay.inflight import DuplicateRequest, TooManyRequests
from .._relay.scopes import ToolScopes
from .clients import MUST_WAIT, Client, MustWait
from .handshake import Handshake
from .router import ClientKey, Router

logger = logging.getLogger("bridge.shared")

# Requests that arrive while the child restarts wait this long for it (a Python server starts in
# well under a second; backoff adds at most 30 s, but a client should hear back sooner than that).
CHILD_READY_TIMEOUT = 10.0


@attrs.define(eq=False)
class Admission:
    """Admits valid client messages to the shared child, and expires requests kept there too long.

    The child's side says when the child is ready (:meth:`child_ready`) and when it is gone
    (:meth:`child_gone`); requests wait for the next one in between.

    Args:
        name: the child's name, for the log.
        limits: bounds and timeouts (``max_in_flight``, ``request_timeout``).
        stopping: the daemon's graceful-stop event (new requests are refused once it is set).
        router: where requests get their wire ids.
        handshake: the legacy handshake the bridge owns.
        deliver: queues a message for a client.
        tool_scopes: the scopes each tool needs, checked against the client's ``peer.scopes``.
    """

    name: str
    limits: Limits
    stopping: trio.Event
    _router: Router
    _handshake: Handshake
    _deliver: Callable[[ClientKey, JSONObject, int], None]
    _tool_scopes: ToolScopes = attrs.field(factory=ToolScopes)
    _ready: trio.Event = attrs.field(init=False, factory=trio.Event)
    # (deadline, wire id) of requests at the child, in admission order (one timeout for all, so
    # also deadline order); wire ids are never reused, so a stale entry is simply not found.
    _deadlines: deque[tuple[float, int]] = attrs.field(init=False, factory=deque)
    _deadline_added: trio.Event = attrs.field(init=False, factory=trio.Event)
    _cancellations: TimeoutCancellations = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._cancellations = TimeoutCancellations(self.limits.max_in_flight)

    @property
    def admits_at_once(self) -> bool:
        """Whether :meth:`admit` takes a 2026-07-28 request (never an ``initialize``) without waiting.

        It waits only for a child that is not ready yet.
        """
        return self._ready.is_set()

    def child_ready(self) -> None:
        """A child is serving: requests go to it."""
        self._ready.set()

    def child_gone(self) -> None:
        """The child is gone: requests wait for the next one (and its requests need no cancelling)."""
        self._ready = trio.Event()
        self._cancellations.clear()

    def admit(self, client: Client, message: JSONObject) -> JSONObject | MustWait | None:
        """The child's copy of a client message, or None if it is answered or dropped here.

        :data:`MUST_WAIT` if it cannot be taken now: the child is not ready, or it is a later
        ``initialize``, answered from the first client's handshake once that is done. The caller
        then sends what it admitted before it (the handshake it waits for may be among them: one
        client's two ``initialize`` requests in one read) and calls :meth:`admit_waiting`.
        Taking a message never waits, so a read's messages are admitted without a checkpoint.
        """
        if "id" not in message:  # a notification (kind(), inlined: one per request)
            method = message["method"]
            if method == "notifications/cancelled":
                return self._router.client_cancel(client.key, message)
            if method == "notifications/initialized":
                if self._handshake.initialized_sent:
                    return None  # the child was initialized once; later clients' are swallowed
                self._handshake.initialized_sent = True
            return message
        if "method" not in message:  # a response
            return self._router.client_response(client.key, message)
        request_id = message["id"]
        if self.stopping.is_set():
            self._deliver(
                client.key,
                error_response(request_id, CONNECTION_CLOSED, "Connection closed", "shutting-down"),
                256,
            )
            return None
        if self._tool_scopes.rules:
            refusal = self._tool_scopes.refuse_call(message, client.channel.peer)
            if refusal is not None:
                self._deliver(client.key, refusal, 256)
                return None
        if message["method"] == "initialize":
            client.legacy = True
            if self._handshake.taken:
                return MUST_WAIT
        if not self._ready.is_set():
            return MUST_WAIT
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

    async def admit_waiting(self, client: Client, message: JSONObject) -> JSONObject | None:
        """:meth:`admit` for a request it said must wait: wait for what it needs, then admit it.

        A later ``initialize`` is answered from the first client's handshake (waiting, bounded,
        for it); any other request waits up to :data:`CHILD_READY_TIMEOUT` for the child.
        """
        while True:
            if message["method"] == "initialize" and self._handshake.taken:
                await self._handshake.answer(client.key, message["id"])
                return None
            if not self._ready.is_set():
                with trio.move_on_after(CHILD_READY_TIMEOUT):
                    await self._ready.wait()
                if not self._ready.is_set():
                    self._deliver(
                        client.key,
                        error_response(
                            message["id"],
                            CONNECTION_CLOSED,
                            "Connection closed",
                            "child-restarting",
                            detail=f"the shared child was not back within {CHILD_READY_TIMEOUT:g}s",
                        ),
                        256,
                    )
                    return None
            admitted = self.admit(client, message)  # what changed while it waited counts too
            if admitted is not MUST_WAIT:
                return admitted

    async def expire_requests(
        self, timeout: float, send_to_child: Callable[[Sequence[JSONObject]], Awaitable[bool]]
    ) -> None:
        """Expire requests still at the child after ``timeout``; run it only with a timeout.

        Their client gets ``-32001`` at once (queued, nothing here waits for a client); the child
        gets ``notifications/cancelled`` through ``send_to_child`` from a task of its own, as it
        reads: a child that reads nothing holds up neither this answer nor the next timeout, and
        a request taken from the router is answered before anything can cancel this task. The
        child's late reply, if any, is dropped.
        """
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._send_cancellations, send_to_child)
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
                logger.info("[%s] request %r timed out after %gs", self.name, request_id, timeout)
                self._deliver(
                    client_key,
                    error_response(
                        request_id, REQUEST_TIMEOUT, "Request timed out", "request-timeout", timeout=timeout
                    ),
                    256,
                )
                self._cancellations.add(wire, timeout)

    async def _send_cancellations(
        self, send_to_child: Callable[[Sequence[JSONObject]], Awaitable[bool]]
    ) -> None:
        """Write the cancellations of requests that timed out to the child, as it reads them.

        With no child to write to (it is restarting), they are dropped: its requests went with it.
        """
        while True:
            await send_to_child(await self._cancellations.take())
