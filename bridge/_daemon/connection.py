"""Serving one accepted connection: its handshake, the cap, and the child it is given.

:meth:`Connections.handle` is what the listeners call for every connection (``serve_listeners``
closes it afterwards). A connection over ``max_connections``, one whose task runs after a stop
began, or one whose child fails to start, is refused: its first requests are answered by id,
then it is closed. Otherwise it is served by the shared child, or by a child of its own through
a :class:`~bridge._relay.relay.Relay` (in ``auto`` mode, a client that opens with
``initialize`` is legacy and gets a child of its own).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import attrs
import trio

from channels import CredentialsRefused, HandshakeError, Incoming, MessageChannel, receive_batch

from .._child.process import ChildProcess, open_child
from .._child.stderr import StderrReader
from .._errors import (
    CONNECTION_CLOSED,
    TOO_MANY_CONNECTIONS,
    ChildStartError,
    close_reason,
    error_response,
)
from .._relay.relay import Relay
from .._relay.requests import RequestMetrics
from .._relay.writers import BATCH
from .config import ServeConfig
from .statistics import Counters, evicted
from .usage import Usage

if TYPE_CHECKING:
    from .._child.pool import ChildPool, Lease  # loads with a warm pool only (--prespawn)
    from .._relay.tap import Tap  # loads with --tap only
    from .._shared.mux import SharedChild  # loads with the shared child only (services.py)

logger = logging.getLogger("bridge.daemon")

# A refused connection (over the cap, a stop begun, or its child failed to start) gets this long
# to send its first request, so that the refusal can answer it by id, and to read the answer. In a
# stop, the connections nursery's deadline (the drain plus a grace) bounds it too.
REFUSAL_TIMEOUT = 5.0


@attrs.define(eq=False)
class Connections:
    """Serves each connection the listeners accept, counting it in ``counters``.

    Args:
        config: what the daemon serves.
        counters: the daemon's live counters.
        stopping: set when a graceful stop begins (no connection is counted in after it).
        stop_now: set on an immediate stop (a child started after it is hurried).
        ensure_started: resolves the child mode and starts the shared child, once; returns the
            shared child, or None when each connection gets its own.
        pool: the warm pool of prespawned children now, if any (on demand it comes and goes).
        usage: counts each connection while it is served (the on-demand idle stop waits for
            none).
        tap: where to record every message to and from clients, if anywhere.
        request_metrics: where to count and time requests, if anywhere.
        stop: begins the daemon's graceful stop (the one stdio connection ending does).
        stderr_reader: reads the stderr of the children started for connections, if given (else
            each child's stderr is read by a task of its own).
        shared_now: the shared child if it serves now, with nothing starting or stopping it
            (:meth:`serve_exchange` serves a request in its own task then), else None.
    """

    config: ServeConfig
    counters: Counters
    stopping: trio.Event
    stop_now: trio.Event
    ensure_started: Callable[[], Awaitable[SharedChild | None]]
    pool: Callable[[], ChildPool | None]
    usage: Usage
    tap: Tap | None
    request_metrics: RequestMetrics | None
    stop: Callable[[], None]
    stderr_reader: StderrReader | None = None
    shared_now: Callable[[], SharedChild | None] = lambda: None
    """The shared child if it is serving now with nothing starting or stopping it, else None."""

    async def handle(self, incoming: Incoming) -> None:
        """Serve one connection: its handshake, then the child.

        The handshake is bounded and counted against the cap while it runs. ``serve_listeners``
        closes ``incoming`` after this returns.
        """
        counters = self.counters
        counters.connections_total += 1
        counters.by_transport[incoming.peer.transport] += 1
        limits = self.config.limits
        counted = counters.connections < limits.max_connections and not self.stopping.is_set()
        if counted:
            counters.connections += 1

        def release() -> None:  # before the client sees its end, so statistics agree with it
            nonlocal counted
            if counted:
                counted = False
                counters.connections -= 1

        try:
            async with incoming.establish() as client:
                counters.clients.add(client)
                try:
                    if not counted:
                        await self._refuse_uncounted(client)
                        return
                    try:
                        served = self.tap.channel(client) if self.tap is not None else client
                        if self.request_metrics is not None:
                            served = self.request_metrics.channel(served)
                        with self.usage.using():
                            ending = await self._serve_counted(served)
                    finally:
                        release()
                    await client.aclose_with(close_reason(ending), ending)
                finally:
                    counters.clients.discard(client)
                    counters.evicted_of_closed += evicted(client)
                    counters.bytes_of_closed[0] += client.bytes_received
                    counters.bytes_of_closed[1] += client.bytes_sent
        except HandshakeError as exc:
            counters.handshakes_failed += 1
            # A client refused for its token is normal operation (INFO, as the HTTP listener's
            # refused requests); a handshake that failed otherwise is worth a warning.
            level = logging.INFO if isinstance(exc, CredentialsRefused) else logging.WARNING
            logger.log(level, "%s: refused: %s", incoming.peer, exc)
        finally:
            release()
            if incoming.peer.transport == "stdio":
                self.stop()  # the one stdio connection was the daemon's whole purpose

    async def serve_exchange(self, channel: MessageChannel, respond: Callable[[], Awaitable[bool]]) -> None:
        """Serve one request that is a channel of its own (a 2026-07-28 POST), in the caller's task.

        The listeners' ``ExchangeHandler``: counted and logged as a connection of its own while it
        is served, as :meth:`handle` counts one. With the shared child running, it serves the
        request without a task of its own (:meth:`SharedChild.serve_exchange`); anything else (the
        cap reached, a stop begun, a tap or request metrics wrapping the channel, a child not
        started or of its own) takes :meth:`handle`'s path in a task beside the response.
        ``respond`` is awaited once; ``channel`` is closed before this returns.
        """
        counters = self.counters
        shared = self.shared_now()
        if (
            shared is None
            or self.tap is not None
            or self.request_metrics is not None
            or counters.connections >= self.config.limits.max_connections
            or self.stopping.is_set()
        ):
            # Only an HTTP listener serves such exchanges: others never load this.
            from channels._core.virtual import VirtualIncoming

            async with trio.open_nursery() as beside:
                beside.start_soon(self.handle, VirtualIncoming(channel))
                await respond()
            return
        peer = channel.peer
        counters.connections_total += 1
        counters.by_transport[peer.transport] += 1
        counters.connections += 1
        counters.clients.add(channel)
        self.usage.add()
        debug = logger.isEnabledFor(logging.DEBUG)  # once, for both lines: one per request
        try:
            if debug:
                logger.debug("%s: connected to the shared child", peer)
            # It awaits ``respond`` once, come what may (ending the channel first if it failed).
            ending = await shared.serve_exchange(channel, respond)
            if debug:
                logger.debug("%s: %s", peer, ending)
        except Exception:
            logger.exception("%s: internal error; connection closed", peer)
        finally:
            self.usage.remove()
            counters.connections -= 1
            counters.clients.discard(channel)
            counters.evicted_of_closed += evicted(channel)
            counters.bytes_of_closed[0] += channel.bytes_received
            counters.bytes_of_closed[1] += channel.bytes_sent
            await channel.aclose()

    async def _refuse_uncounted(self, client: MessageChannel) -> None:
        """Refuse a connection not counted in: a stop has begun, or the cap is reached."""
        self.counters.connections_refused += 1
        if self.stopping.is_set():
            # Accepted just before the stop began (its task ran after): normal, not a warning.
            logger.info("%s: refused, the bridge is stopping", client.peer)
            await refuse(client, CONNECTION_CLOSED, "Connection closed", "shutting-down")
            await client.aclose_with(close_reason("shutting-down"), "the bridge is stopping")
            return
        limit = self.config.limits.max_connections
        logger.warning(
            "%s: refused, %d connections already (--max-connections)", client.peer, self.counters.connections
        )
        await refuse(
            client, TOO_MANY_CONNECTIONS, "Too many connections", "too-many-connections", limit=limit
        )
        await client.aclose_with(close_reason("too-many-connections"), "too many connections")

    async def _serve_counted(self, client: MessageChannel) -> str:
        """Serve one established connection; return why it ended (a ``data.reason`` tag)."""
        try:
            shared = await self.ensure_started()
            if shared is not None and self.config.child_mode == "auto":
                peeked = await peek_first_messages(client)
                if peeked is None:
                    return "client-closed"  # it left before saying anything
                client, opens_with_initialize = peeked
                if opens_with_initialize:
                    return await self._relay(client)
            if shared is not None:
                level = logging.DEBUG if client.one_request else logging.INFO
                logger.log(level, "%s: connected to the shared child", client.peer)
                ending = await shared.serve(client)
                logger.log(level, "%s: %s", client.peer, ending)
                return ending
            return await self._relay(client)
        except ChildStartError as exc:
            self.counters.connections_refused += 1
            logger.error("%s: %s", client.peer, exc)
            await refuse(
                client, CONNECTION_CLOSED, "Connection closed", "child-start-failed", detail=str(exc)
            )
            return "child-start-failed"
        except Exception:
            # A bug in the bridge must cost one connection, not the daemon; the child was stopped
            # by open_child on the way out.
            logger.exception("%s: internal error; connection closed", client.peer)
            return "internal-error"

    async def _relay(self, client: MessageChannel) -> str:
        """Relay ``client`` to a child: a prespawned one if the pool has it ready, else a new one.

        Either way the child is stopped in MCP order when the relay ends. A new child's block is
        ``open_child``'s own, not one wrapped around it: one generator less held per connection.
        """
        counters = self.counters
        started: ChildProcess | None = None
        pool = self.pool()
        lease = pool.take() if pool is not None else None
        origin = "" if lease is None else " (prespawned)"
        try:
            async with (
                open_child(self.config.child, self.config.limits, self.stderr_reader)
                if lease is None
                else _leased(lease)
            ) as child:
                started = child
                counters.children.add(child)
                if self.stop_now.is_set():
                    child.hurry()
                level = logging.DEBUG if client.one_request else logging.INFO
                logger.log(level, "%s: connected; child pid %d%s", client.peer, child.pid, origin)
                relay = Relay(
                    client, child, self.config.limits, self.stopping, self.stop_now, self.config.tool_scopes
                )
                counters.relays.add(relay)
                try:
                    ending = await relay.run()
                finally:
                    counters.relays.discard(relay)
                    counters.strays_of_ended += relay.stray_replies
                logger.log(level, "%s: %s", client.peer, ending.description)
                # The client sees its end before the child stops.
                await client.aclose_with(close_reason(ending.reason), ending.description)
        finally:
            if started is not None:  # stopped and reaped by now
                counters.children.discard(started)
                counters.garbage_of_stopped_children += started.garbage_lines
        return ending.reason


@asynccontextmanager
async def _leased(lease: Lease) -> AsyncIterator[ChildProcess]:
    """A prespawned child for one connection's block; stopped, and its pool slot released, after it."""
    try:
        yield lease.child
    finally:
        await lease.child.stop()  # shielded and bounded; the pool's slot then moves on
        lease.release()


async def peek_first_messages(client: MessageChannel) -> tuple[MessageChannel, bool] | None:
    """Auto mode with a modern server: tell a legacy client from a modern one.

    The connection's first messages are read: a legacy client opens with ``initialize``. A
    dual-era server may fix its era
    per process on the first request it sees (the official SDK's does), so a shared child can
    only serve one era: legacy clients get a child of their own, modern ones share.

    Returns the channel (which hands those messages out again) and whether it is legacy, or
    ``None`` if the client left first.
    """
    try:
        items = await receive_batch(client, BATCH)
    except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError):
        return None
    first = items[0]
    legacy = isinstance(first, dict) and first.get("method") == "initialize"
    if legacy:
        logger.info("%s: opens with initialize: a legacy client, given its own child", client.peer)
    from .._relay.peeked import PeekedChannel  # auto mode with a shared child only

    return PeekedChannel(client, items), legacy


async def refuse(client: MessageChannel, code: int, message: str, reason: str, **data: object) -> None:
    """Answer the client's first requests with an error, then let the connection close.

    Errors that name no request (id null) would leave an MCP client waiting on its own id, so
    the refusal waits briefly for the first batch and answers each request in it by id.
    """
    with trio.move_on_after(REFUSAL_TIMEOUT):
        try:
            items = await receive_batch(client, 64)
            replies = [
                error_response(item["id"], code, message, reason, **data)
                for item in items
                if isinstance(item, dict) and "method" in item and "id" in item
            ]
            await client.send_many(replies or [error_response(None, code, message, reason, **data)])
        except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError):
            pass
