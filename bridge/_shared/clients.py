"""The clients' side of shared mode: one client's queue and writer, its reader and its bad input.

Each client has its own queue; nothing that routes a message for a client ever waits for it:
:meth:`Clients.deliver` queues without waiting, and a client whose queue overflows is disconnected
(``client-too-slow``), so that nobody else is slowed down. A client whose channel queues without
waiting (:class:`DirectChannel`: a 2026-07-28 HTTP request's response) has no queue or writer of its
own: its messages go onto the channel at once, and what waits there is bounded alike.
:class:`ClientReader` reads one client, answers what is bad and forwards what was admitted.
"""

from __future__ import annotations

import enum
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, Protocol

import attrs
import trio

from channels import (
    INVALID_REQUEST,
    JSONObject,
    MessageChannel,
    MessageTooLarge,
    ProtocolError,
    SendTimeout,
    receive_batch,
)

from .._errors import CONNECTION_CLOSED, bad_input_reply, error_response
from .._limits import Limits
from .._relay.ending import Ending
from .._relay.idle import IdleWatch
from .._relay.writers import BATCH
from .router import ClientKey, Router

logger = logging.getLogger("bridge.shared")


class DirectChannel(Protocol):
    """A channel that queues a message without waiting, and says what waits to be written."""

    @property
    def waiting(self) -> tuple[int, int]:
        """The messages and bytes queued and not written yet."""
        ...

    def send_nowait(self, message: JSONObject) -> None:
        """Queue ``message`` (``trio.ClosedResourceError`` once closed)."""
        ...

    def end(self) -> None:
        """Close it now: what was queued is still written, then its response ends."""
        ...


def direct_channel(channel: MessageChannel) -> DirectChannel | None:
    """``channel`` itself if it queues without waiting, else None (it gets a writer task)."""
    return channel if hasattr(channel, "send_nowait") else None  # type: ignore[return-value]


@attrs.define(eq=False)
class Client:
    """One client of the shared child: its channel, its queue and why it ended.

    ``scope`` is cancelled to disconnect it; its ``serve`` call owns the channel. ``direct`` is
    the channel when it queues without waiting: then ``outbox`` stays empty and no writer runs.
    """

    key: ClientKey
    channel: MessageChannel
    direct: DirectChannel | None = None
    legacy: bool = False
    outbox: deque[tuple[JSONObject, int]] = attrs.field(factory=deque)
    outbox_bytes: int = 0
    # Made by whoever waits, and only then: a direct client (one per 2026-07-28 request) has no
    # writer to wake, and often nobody waiting for a change.
    wake: trio.Event | None = None  # the writer: something to send
    changed: trio.Event | None = None  # drains: a reply queued, or sent
    # Made when first asked for (scope): a 2026-07-28 request admitted at once never enters one.
    _scope: trio.CancelScope | None = attrs.field(init=False, default=None)
    ending: str | None = None
    drained: bool = False
    sending: bool = False  # the writer holds a batch taken from the outbox, not yet written
    closing: bool = False  # the writer returns once the outbox is empty
    idle: IdleWatch | None = None  # with the listener's idle timeout: when traffic last passed
    # Served in its request's own task (SharedChild.serve_exchange): stopping it ends its
    # response, which that task is writing outside ``scope``.
    responding: bool = False

    @property
    def scope(self) -> trio.CancelScope:
        """What serves this client runs in it; cancelled by :meth:`stop` (entered or not yet)."""
        if self._scope is None:
            self._scope = trio.CancelScope()
        return self._scope

    @property
    def unsent(self) -> bool:
        """Messages queued for this client, or taken by its writer and still being written."""
        return bool(self.outbox) or self.sending

    def end(self, ending: Ending) -> None:
        """Stop serving this client (its idle timeout ran out: nothing is in flight or unsent)."""
        if self.ending is None:
            self.ending = ending.reason
        self.stop()

    def stop(self) -> None:
        """Cancel what serves this client; a response being written ends with what it was given."""
        self.scope.cancel()
        if self.responding and self.direct is not None:
            self.direct.end()

    def close_writer(self) -> None:
        """Let the writer return once everything queued is written.

        The usual end of a client, without cancelling its writer.
        """
        self.closing = True
        self.notify_writer()

    def notify_writer(self) -> None:
        """Wake the writer if it waits."""
        if self.wake is not None:
            self.wake.set()

    def notify_changed(self) -> None:
        """Wake whoever waits in :meth:`wait_changed`."""
        if self.changed is not None:
            self.changed.set()

    async def wait_changed(self) -> None:
        """Wait until a reply is queued for this client or sent to it.

        Several tasks may wait at once (a drain and the idle watch): they share the event, and
        only an event already set (by a change its waiters have seen) is replaced, and the first
        waiter makes it. Callers check their condition first, with no checkpoint before this call,
        so no change is missed.
        """
        if self.changed is None or self.changed.is_set():
            self.changed = trio.Event()
        await self.changed.wait()


@attrs.define(eq=False)
class Clients:
    """Every client of the shared child, by key: what is queued for each, and its writer.

    Args:
        limits: bounds and timeouts (``client_queue``, ``client_queue_bytes``, ``send_timeout``).
        router: whose requests are in flight (to answer them when a client is failed).

    Attributes:
        by_key: the clients being served; their ``serve`` calls add and remove them.
    """

    limits: Limits
    _router: Router
    by_key: dict[ClientKey, Client] = attrs.field(init=False, factory=dict)

    def deliver(self, client_key: ClientKey, message: JSONObject, size: int) -> None:
        """Queue a message for a client without waiting.

        A client whose queue overflows is disconnected, so that the child's reader never waits for
        anyone.
        """
        client = self.by_key.get(client_key)
        if client is None or client.ending is not None:
            return
        direct = client.direct
        if direct is not None:  # its channel's queue is the client's (inlined: one per reply)
            waiting, waiting_bytes = direct.waiting
            try:
                direct.send_nowait(message)
            except trio.ClosedResourceError:
                self.drop(client, "client-disconnected", "connection lost")
                return
            if client.idle is not None:
                client.idle.touch()
            if client.changed is not None:  # notify_changed(), inlined
                client.changed.set()
            if waiting >= self.limits.client_queue or waiting_bytes > self.limits.client_queue_bytes:
                self._drop_overflowed(client)
            return
        # The byte limit bounds what was already waiting: a single message larger than it (up to
        # --max-child-message) still reaches a client that keeps up.
        waiting_bytes = client.outbox_bytes
        client.outbox.append((message, size))
        client.outbox_bytes += size
        client.notify_writer()
        client.notify_changed()
        if len(client.outbox) > self.limits.client_queue or waiting_bytes > self.limits.client_queue_bytes:
            self._drop_overflowed(client)

    def _drop_overflowed(self, client: Client) -> None:
        """Disconnect a client whose queue passed its limits (either way of queueing)."""
        self.drop(
            client,
            "client-too-slow",
            f"its queue passed {self.limits.client_queue} messages or {self.limits.client_queue_bytes} bytes",
        )

    def drop(self, client: Client, reason: str, detail: str) -> None:
        """Disconnect a client, for ``reason`` (the first one given stays)."""
        if client.ending is None:
            client.ending = reason
            # A client going away is normal operation; one the bridge drops (too slow) is not.
            level = logging.INFO if reason == "client-disconnected" else logging.WARNING
            logger.log(level, "%s: disconnected: %s", client.channel.peer, detail)
            client.stop()

    def end_legacy(self, detail: str) -> None:
        """Disconnect every legacy client: the handshake they share could not be replayed."""
        for client in list(self.by_key.values()):
            if client.legacy:
                self.drop(client, "handshake-replay-failed", detail)

    def fail(self, client_key: ClientKey, reason: str, code: int = CONNECTION_CLOSED) -> None:
        """Answer a client's requests in flight with ``code``; later replies are dropped."""
        for request_id in self._router.take_client(client_key):
            self.deliver(client_key, error_response(request_id, code, "Connection closed", reason), 256)

    async def write(self, client: Client) -> None:
        """Write what is queued for ``client`` until it is gone or too slow.

        Or until the outbox is empty after :meth:`Client.close_writer`.
        """
        while True:
            while not client.outbox:
                if client.closing:
                    return
                client.wake = trio.Event()
                await client.wake.wait()
            batch = [message for message, _ in client.outbox]
            client.outbox.clear()
            client.outbox_bytes = 0
            client.sending = True
            try:
                await client.channel.send_many(batch)
                if client.idle is not None:
                    client.idle.touch()
            except SendTimeout:
                self.drop(client, "client-too-slow", f"it read nothing for {self.limits.send_timeout}s")
                return
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self.drop(client, "client-disconnected", "connection lost")
                return
            finally:
                client.sending = False
            client.notify_changed()
            del batch  # not kept while waiting: a 16 MiB reply is freed once written


class MustWait(enum.Enum):
    """What admission answers for a request it cannot take without waiting (Admission.admit).

    An enum of one member, so that ``is MUST_WAIT`` narrows the answer's type.
    """

    MUST_WAIT = enum.auto()


MUST_WAIT: Final = MustWait.MUST_WAIT


@attrs.define(eq=False)
class ClientReader:
    """Reads one client at a time: bad input is answered, admitted messages go to the child.

    Args:
        limits: bounds and timeouts (``max_consecutive_errors``, ``send_timeout``).
        admit: the child's copy of a valid client message, None if it was answered or dropped,
            or ``MUST_WAIT`` (:meth:`Admission.admit`).
        admit_waiting: the same for a message ``admit`` said must wait, once what was admitted
            before it is sent.
        send_to_child_checked: forwards admitted messages; requests that cannot reach the child
            are answered.
        deliver: queues a message for a client.
        drop: disconnects a client.
        fail: answers a client's requests in flight.
    """

    limits: Limits
    _admit: Callable[[Client, JSONObject], JSONObject | MustWait | None]
    _admit_waiting: Callable[[Client, JSONObject], Awaitable[JSONObject | None]]
    _send_to_child_checked: Callable[[Sequence[JSONObject]], Awaitable[None]]
    _deliver: Callable[[ClientKey, JSONObject, int], None]
    _drop: Callable[[Client, str, str], None]
    _fail: Callable[[ClientKey, str, int], None]

    async def read(self, client: Client) -> None:
        """Read ``client`` until its end of input, a failure, or too much bad input."""
        consecutive_errors = 0
        while True:
            try:
                items = await receive_batch(client.channel, BATCH)
            except trio.EndOfChannel:
                return
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._drop(client, "client-disconnected", "connection lost")
                return
            if client.idle is not None:
                client.idle.touch()
            consecutive_errors = await self.forward(client, items, consecutive_errors)
            if consecutive_errors < 0:
                return
            del items  # not kept while waiting: a 16 MiB request is freed once forwarded

    async def forward(
        self, client: Client, items: Sequence[JSONObject | ProtocolError], consecutive_errors: int = 0
    ) -> int:
        """Answer what is bad among ``items``, admit the rest and send it to the child.

        Returns the bad messages in a row so far, or -1 once ``client`` was dropped for them.
        """
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
                    return -1
                continue
            consecutive_errors = 0
            routed = self._admit(client, item)
            if routed is MUST_WAIT:
                if forward:  # what it waits for may be among them
                    await self._send_to_child_checked(forward)
                    forward = []
                routed = await self._admit_waiting(client, item)
            if routed is not None:
                forward.append(routed)
        await self._send_to_child_checked(forward)
        return consecutive_errors

    async def _flush_and_drop(self, client: Client, error: ProtocolError) -> None:
        reason = "message-too-large" if isinstance(error, MessageTooLarge) else "too-many-invalid-messages"
        self._fail(client.key, reason, INVALID_REQUEST)  # as the per-connection relay does
        with trio.move_on_after(self.limits.send_timeout):
            while client.unsent:
                await client.wait_changed()
        self._drop(client, reason, str(error))

    def _answer_bad_input(self, client: Client, error: ProtocolError) -> None:
        self._deliver(client.key, bad_input_reply(error), 256)
