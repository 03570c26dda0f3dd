"""The daemon: listeners, one child per connection, graceful stop.

Task tree (one visible tree, trio style)::

    Daemon.run
    ├── accepting: serve_listeners over every listener        (cancelled when stopping)
    └── connections: one _handle task per accepted channel (and an HTTP listener's connections)
        └── open_child → Relay.run                             (its own nursery of pumps)

A graceful stop (:meth:`Daemon.stop`, which the CLI calls on SIGTERM/SIGINT) closes the listeners,
lets each connection finish its in-flight requests within ``drain_timeout`` (new requests are refused
with ``-32000``), answers whatever is left, and stops every child in MCP order. A connection that is
still busy ``STOP_GRACE`` after the drain deadline (a client that does not read its last replies) is
cancelled; its child is still stopped in order, because that part is shielded.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from functools import partial

import attrs
import trio

from channels import (
    Address,
    HandshakeError,
    Incoming,
    ListenError,
    ListenOptions,
    MessageChannel,
    MessageListener,
    parse_address,
    receive_batch,
    serve_listeners,
)

from .._child.pool import ChildPool
from .._child.process import ChildProcess, ChildSpec, open_child
from .._child.supervisor import RestartPolicy, SupervisorState
from .._errors import (
    CONNECTION_CLOSED,
    TOO_MANY_CONNECTIONS,
    ChildStartError,
    close_reason,
    error_response,
)
from .._limits import Limits
from .._relay.peeked import PeekedChannel
from .._relay.relay import BATCH, Relay
from .._relay.requests import RequestMetrics
from .._relay.tap import Tap
from .._shared.eras import Era, probe_era
from .._shared.mux import SharedChild

logger = logging.getLogger("bridge.daemon")

# After the drain deadline, connections get this long to flush their last replies before they are
# cancelled (the child stop that follows is bounded separately by the stop timeouts).
STOP_GRACE = 2.0
# On an immediate stop (the second signal), connections get this long to answer what is in flight.
STOP_NOW_GRACE = 0.5
# A refused connection (over the cap, or its child failed to start) gets this long to send its
# first request, so that the refusal can answer it by id, and to read the answer.
REFUSAL_TIMEOUT = 5.0


def _addresses(items: Iterable[Address | str]) -> tuple[Address, ...]:
    return tuple(parse_address(item) if isinstance(item, str) else item for item in items)


@attrs.frozen
class ServeConfig:
    """Everything one bridge serves. A frozen value: building it starts nothing.

    Attributes:
        listen: where to accept clients: parsed addresses, or texts such as
            ``"unix:/run/mcp.sock"`` (parsed here; ``AddressError`` if malformed).
        child: the server to launch for each connection.
        limits: bounds and timeouts.
        listen_options: socket file mode and group, loopback policy (``max_message_bytes`` is taken
            from ``limits``).
        prespawn: children kept started ahead of connections (the warm pool, :mod:`bridge._child.pool`).
        child_mode: ``"per-connection"``, ``"shared"`` (one supervised child for every client,
            :mod:`bridge._shared.mux`) or ``"auto"`` (probe the server's era with ``server/discover``:
            for a legacy server, per-connection; for a modern or dual-era one, a shared child for
            modern clients, and a child of its own for each client that opens with
            ``initialize``).
        restart_policy: how the shared child is restarted (backoff, crash-loop limit).
        start: ``"eager"``: the shared child is started (and, for ``auto``, the server probed)
            before the listeners accept; ``"lazy"``: on the first connection.

    ``child_mode`` and ``start`` are not validated: pass one of the values listed.

    Raises:
        channels.AddressError: an address text in ``listen`` is malformed.
    """

    listen: tuple[Address, ...] = attrs.field(converter=_addresses)
    child: ChildSpec
    limits: Limits = Limits()
    listen_options: ListenOptions = ListenOptions()
    listener_options: tuple[ListenOptions | None, ...] = ()
    """Per address in ``listen`` (same order), options that replace ``listen_options`` for it
    (a configuration file's per-listener security settings); ``None`` or missing: the shared ones."""
    prespawn: int = 0
    child_mode: str = attrs.field(
        default="per-connection",
        validator=attrs.validators.in_(("per-connection", "shared", "auto")),
    )
    restart_policy: RestartPolicy = RestartPolicy()
    start: str = attrs.field(default="eager", validator=attrs.validators.in_(("eager", "lazy")))


@attrs.frozen
class DaemonStatistics:
    """A snapshot of the daemon's counters.

    Attributes:
        connections: connections being served now.
        connections_total: connections accepted since start (refused ones included).
        connections_refused: connections refused (over the cap, or their child failed to start).
        handshakes_failed: connections that failed their TLS handshake, WebSocket upgrade or
            authentication (never counted in ``connections``).
        requests_in_flight: requests awaiting a reply, over all connections.
        children: child processes serving connections now.
        prespawned: children started and waiting for a connection (the warm pool).
        child_garbage_lines: stdout lines dropped from children because they were not JSON-RPC.
        child_restarts: restarts of the shared child since start (0 in per-connection mode).
        bytes_from_clients, bytes_to_clients: bytes read from and written to clients, framing
            included, over every connection since start.
        connections_by_transport: connections accepted since start, by transport (``"unix"``,
            ``"tcp"``, ``"tls"``, ``"ws"``...), refused ones and failed handshakes included.
    """

    connections: int
    connections_total: int
    connections_refused: int
    handshakes_failed: int
    requests_in_flight: int
    children: int
    prespawned: int
    child_garbage_lines: int
    child_restarts: int
    bytes_from_clients: int
    bytes_to_clients: int
    connections_by_transport: Mapping[str, int] = attrs.field(factory=dict)


@attrs.define(eq=False)
class Daemon:
    """Serves one MCP server on every configured address.

    Each connection gets a child of its own, or shares one child, as ``config.child_mode`` says.
    Making a ``Daemon`` starts nothing; :meth:`run` serves (or use :func:`~bridge.open_bridge`).
    The daemon owns everything it starts: it opens its listeners in :meth:`run` and closes them
    before :meth:`run` returns, and stops and reaps every child. Its methods are for trio tasks in
    the same run (not for other threads).

    Args:
        config: what to serve.
    """

    config: ServeConfig
    tap: Tap | None = None
    """Where to record every message to and from clients (``--tap``), or ``None``."""
    request_metrics: RequestMetrics | None = None
    """Where to count and time requests (with ``--admin``), or ``None`` (no cost then)."""
    addresses: list[str] = attrs.field(init=False, factory=list)
    """The bound addresses (real ports included), once :meth:`run` has started."""
    _stopping: trio.Event = attrs.field(init=False, factory=trio.Event)
    _stop_now: trio.Event = attrs.field(init=False, factory=trio.Event)
    _finished: trio.Event = attrs.field(init=False, factory=trio.Event)
    _connections_scope: trio.CancelScope | None = attrs.field(init=False, default=None)
    _pool: ChildPool | None = attrs.field(init=False, default=None)
    _shared: SharedChild | None = attrs.field(init=False, default=None)
    _services: trio.Nursery | None = attrs.field(init=False, default=None)
    _started: bool = attrs.field(init=False, default=False)
    _listeners: list[MessageListener] = attrs.field(init=False, factory=list)
    _start_lock: trio.Lock = attrs.field(init=False, factory=trio.Lock)
    mode: str = attrs.field(init=False, default="per-connection")
    """The child mode in use, once :meth:`run` has started.

    ``auto`` is resolved when the server is probed: before the listeners accept with
    ``start="eager"``, at the first connection with ``"lazy"``.
    """
    _relays: set[Relay] = attrs.field(init=False, factory=set)
    _children: set[ChildProcess] = attrs.field(init=False, factory=set)
    _connections: int = attrs.field(init=False, default=0)
    _connections_total: int = attrs.field(init=False, default=0)
    _connections_refused: int = attrs.field(init=False, default=0)
    _handshakes_failed: int = attrs.field(init=False, default=0)
    _by_transport: collections.Counter[str] = attrs.field(init=False, factory=collections.Counter)
    _clients: set[MessageChannel] = attrs.field(init=False, factory=set)
    _bytes_of_closed: list[int] = attrs.field(init=False, factory=lambda: [0, 0])
    _garbage_of_stopped_children: int = attrs.field(init=False, default=0)

    def statistics(self) -> DaemonStatistics:
        """A snapshot of the counters; cheap, callable at any time (also after :meth:`run`)."""
        return DaemonStatistics(
            connections=self._connections,
            connections_total=self._connections_total,
            connections_refused=self._connections_refused,
            handshakes_failed=self._handshakes_failed,
            requests_in_flight=sum(relay.in_flight for relay in self._relays)
            + (self._shared.in_flight if self._shared is not None else 0),
            children=len(self._children)
            + (1 if self._shared is not None and self._shared.child is not None else 0),
            prespawned=len(self._pool.ready) if self._pool is not None else 0,
            child_garbage_lines=self._garbage_of_stopped_children
            + sum(child.garbage_lines for child in self._children),
            child_restarts=self._shared.supervisor.restarts if self._shared is not None else 0,
            bytes_from_clients=self._bytes_of_closed[0]
            + sum(client.bytes_received for client in self._clients),
            bytes_to_clients=self._bytes_of_closed[1] + sum(client.bytes_sent for client in self._clients),
            connections_by_transport=dict(self._by_transport),
        )

    @property
    def stopping(self) -> bool:
        """Whether a stop has begun."""
        return self._stopping.is_set()

    async def wait_stopping(self) -> None:
        """Return once a stop has begun (:meth:`stop`, a signal, or the stdio client leaving)."""
        await self._stopping.wait()

    def describe(self) -> str:
        """One line on what the daemon is doing, for ``systemctl status`` (sd_notify ``STATUS=``)."""
        stats = self.statistics()
        clients = f"{stats.connections} client{'s' if stats.connections != 1 else ''}"
        if self._stopping.is_set():
            return f"stopping: {clients} left, {stats.requests_in_flight} requests in flight"
        if self._shared is not None:
            supervisor = self._shared.supervisor.statistics()
            child = f"child pid {supervisor.child_pid}" if supervisor.child_pid else "no child"
            state = supervisor.state.value
            return f"serving {clients}; shared child {state}, {child}, {supervisor.restarts} restarts"
        return f"serving {clients}, {stats.children} children ({self.mode})"

    def healthy(self) -> bool:
        """Whether the daemon is fit to be kept alive by a watchdog.

        True while it runs, unless a shared child is failing or waiting out a restart's backoff.
        """
        if self.stopped:
            return False
        if self._shared is None:
            return True
        return self._shared.supervisor.state is SupervisorState.READY

    def stop(self) -> None:
        """Begin a graceful stop; does not wait for it (see :meth:`wait_stopped`).

        Idempotent, callable from any task. The listeners stop accepting, requests in flight get
        ``limits.drain_timeout`` to finish (new ones are refused with ``-32000``), then every child
        is stopped in MCP order and :meth:`run` returns.
        """
        if not self._stopping.is_set():
            logger.info(
                "stopping: %d connections, %d requests in flight",
                self._connections,
                self.statistics().requests_in_flight,  # shared mode's included
            )
            self._stopping.set()

    def stop_now(self) -> None:
        """Stop at once (the second signal); does not wait for it.

        Every connection answers its requests in flight with ``-32000`` and closes within
        ``STOP_NOW_GRACE`` (0.5 s); children get SIGKILL instead of the MCP order's grace periods,
        and are still reaped. Implies :meth:`stop`; idempotent.
        """
        self.stop()
        if self._stop_now.is_set():
            return
        logger.warning("stopping at once")
        self._stop_now.set()
        for child in self._children:
            child.hurry()
        if self._pool is not None:
            self._pool.hurry()
        if self._shared is not None:
            self._shared.fail_everyone("shutting-down")
            if self._shared.child is not None:
                self._shared.child.hurry()
        if self._connections_scope is not None:
            self._connections_scope.deadline = min(
                self._connections_scope.deadline, trio.current_time() + STOP_NOW_GRACE
            )

    async def run(self, *, task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until :meth:`stop` has been called and every connection has ended.

        Reports the bound addresses through ``task_status`` once every listener is open (the
        readiness point: ``await nursery.start(daemon.run)``). Call it once. Before it returns,
        the listeners are closed and every child is stopped and reaped. If it is cancelled, the
        graceful drain is skipped (requests in flight go unanswered), but every child is still
        stopped in MCP order and reaped, since that step is shielded.

        Raises:
            channels.ListenError: a listener could not be opened (nothing is left open).
            ChildStartError: in eager shared or auto mode, the child could not be started (inside
                an ``ExceptionGroup``).
            CrashLoop: the shared child crash-looped (inside an ``ExceptionGroup``).
        """
        try:
            await self._run(task_status)
        finally:
            self._finished.set()

    @property
    def stopped(self) -> bool:
        """Whether :meth:`run` has finished (normally or not)."""
        return self._finished.is_set()

    async def wait_stopped(self) -> None:
        """Return once :meth:`run` has finished (every child stopped and reaped).

        Cancelling the wait does not affect the daemon.
        """
        await self._finished.wait()

    async def _run(self, task_status: trio.TaskStatus[list[str]]) -> None:
        self.mode = self.config.child_mode
        listeners = await self._open_listeners()
        try:
            async with trio.open_nursery() as services:
                # The shared child lives here, beside the connections; with --start lazy the
                # first connection starts it, hence the nursery kept on self (the visible
                # causality break trio's design asks such code to mark).
                self._services = services
                if self.config.start == "eager":
                    await self._ensure_started()
                await self._serve(listeners, task_status)
                if self._shared is not None:
                    self._shared.stop()
        finally:
            self._listeners = []
            for listener in listeners:
                await trio.aclose_forcefully(listener)
        logger.info("stopped")

    async def _ensure_started(self) -> None:
        """Resolve ``auto`` and start the shared child, once.

        Raises:
            ChildStartError: the child could not be started (lazily: the connection that found
                out is refused, the next one tries again).
        """
        async with self._start_lock:
            if self._started:
                return
            self.mode = await self._choose_mode()
            if self.mode == "shared":
                assert self._services is not None
                shared = SharedChild(
                    self.config.child, self.config.limits, self._stopping, self.config.restart_policy
                )
                await self._services.start(shared.run)
                self._shared = shared
            self._started = True

    async def _choose_mode(self) -> str:
        if self.config.child_mode != "auto":
            return self.config.child_mode
        async with open_child(self.config.child, self.config.limits) as child:
            probe = await probe_era(child)
        mode = "shared" if probe.era is Era.MODERN else "per-connection"
        logger.info("child mode %s: %s", mode, probe.reason)
        return mode

    async def _serve(self, listeners: list[MessageListener], task_status: trio.TaskStatus[list[str]]) -> None:
        async with trio.open_nursery() as connections:
            self._connections_scope = connections.cancel_scope
            if self.config.prespawn and (self.mode == "per-connection" or self.config.child_mode == "auto"):
                self._pool = ChildPool(self.config.child, self.config.limits, self.config.prespawn)
                await connections.start(self._pool.run)
            async with trio.open_nursery() as accepting:
                await accepting.start(
                    partial(serve_listeners, self._handle, listeners, handler_nursery=connections)
                )
                for listener in listeners:
                    logger.info("listening on %s", listener.address)
                task_status.started(self.addresses)
                await self._stopping.wait()
                accepting.cancel_scope.cancel()
            if self._pool is not None:
                self._pool.close()
            connections.cancel_scope.deadline = min(
                connections.cancel_scope.deadline,
                trio.current_time() + self.config.limits.drain_timeout + STOP_GRACE,
            )

    async def _open_listeners(self) -> list[MessageListener]:
        own = self.config.listener_options
        listeners: list[MessageListener] = []
        try:
            for index, address in enumerate(self.config.listen):
                chosen = own[index] if index < len(own) and own[index] is not None else None
                options = attrs.evolve(
                    chosen or self.config.listen_options,
                    max_message_bytes=self.config.limits.max_client_message,
                )
                listeners.extend(await address.listen(options))
        except BaseException:
            for listener in listeners:
                await trio.aclose_forcefully(listener)
            raise
        self.addresses = [listener.address for listener in listeners]
        self._listeners = listeners
        return listeners

    def reload_certificates(self) -> int:
        """Read every TLS listener's certificate, key and client CA files again (SIGHUP).

        A listener whose files cannot be loaded keeps the ones in use; the error is logged.

        Returns:
            How many listeners have TLS (reloaded or not).
        """
        with_tls = 0
        for listener in self._listeners:
            try:
                if listener.reload_certificates():
                    with_tls += 1
                    logger.info("%s: TLS certificate and key read again", listener.address)
            except ListenError as exc:
                with_tls += 1
                logger.error("%s; the certificate in use stays", exc)
        return with_tls

    async def _handle(self, incoming: Incoming) -> None:
        """Serve one connection: its handshake, then the child.

        The handshake is bounded and counted against the cap while it runs. ``serve_listeners``
        closes ``incoming`` after this returns.
        """
        self._connections_total += 1
        self._by_transport[incoming.peer.transport] += 1
        limits = self.config.limits
        counted = self._connections < limits.max_connections and not self._stopping.is_set()
        if counted:
            self._connections += 1

        def release() -> None:  # before the client sees its end, so statistics agree with it
            nonlocal counted
            if counted:
                counted = False
                self._connections -= 1

        try:
            async with incoming.establish() as client:
                self._clients.add(client)
                try:
                    if not counted:
                        await self._refuse_over_cap(client)
                        return
                    try:
                        served = self.tap.channel(client) if self.tap is not None else client
                        if self.request_metrics is not None:
                            served = self.request_metrics.channel(served)
                        ending = await self._serve_client(served)
                    finally:
                        release()
                    await client.aclose_with(close_reason(ending), ending)
                finally:
                    self._clients.discard(client)
                    self._bytes_of_closed[0] += client.bytes_received
                    self._bytes_of_closed[1] += client.bytes_sent
        except HandshakeError as exc:
            self._handshakes_failed += 1
            logger.warning("%s: refused: %s", incoming.peer, exc)
        finally:
            release()
            if incoming.peer.transport == "stdio":
                self.stop()  # the one stdio connection was the daemon's whole purpose

    async def _refuse_over_cap(self, client: MessageChannel) -> None:
        self._connections_refused += 1
        limit = self.config.limits.max_connections
        logger.warning(
            "%s: refused, %d connections already (--max-connections)", client.peer, self._connections
        )
        await self._refuse(
            client, TOO_MANY_CONNECTIONS, "Too many connections", "too-many-connections", limit=limit
        )
        await client.aclose_with(close_reason("too-many-connections"), "too many connections")

    async def _serve_client(self, client: MessageChannel) -> str:
        """Serve one established connection; return why it ended (a ``data.reason`` tag)."""
        try:
            await self._ensure_started()
            if self._shared is not None and self.config.child_mode == "auto":
                peeked = await self._peek_first_messages(client)
                if peeked is None:
                    return "client-closed"  # it left before saying anything
                client, opens_with_initialize = peeked
                if opens_with_initialize:
                    return await self._relay(client)
            if self._shared is not None:
                level = logging.DEBUG if client.one_request else logging.INFO
                logger.log(level, "%s: connected to the shared child", client.peer)
                ending = await self._shared.serve(client)
                logger.log(level, "%s: %s", client.peer, ending)
                return ending
            return await self._relay(client)
        except ChildStartError as exc:
            self._connections_refused += 1
            logger.error("%s: %s", client.peer, exc)
            await self._refuse(
                client, CONNECTION_CLOSED, "Connection closed", "child-start-failed", detail=str(exc)
            )
            return "child-start-failed"
        except Exception:
            # A bug in the bridge must cost one connection, not the daemon; the child was stopped
            # by open_child on the way out.
            logger.exception("%s: internal error; connection closed", client.peer)
            return "internal-error"

    async def _peek_first_messages(self, client: MessageChannel) -> tuple[MessageChannel, bool] | None:
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
        return PeekedChannel(client, items), legacy

    @asynccontextmanager
    async def _child_for_connection(self) -> AsyncIterator[tuple[ChildProcess, str]]:
        """A child for one connection: a prespawned one if the pool has it ready, else a new one.

        Either way it is stopped in MCP order when the block ends.
        """
        lease = self._pool.take() if self._pool is not None else None
        if lease is None:
            async with open_child(self.config.child, self.config.limits) as child:
                yield child, ""
            return
        try:
            yield lease.child, " (prespawned)"
        finally:
            await lease.child.stop()  # shielded and bounded; the pool's slot then moves on
            lease.release()

    async def _relay(self, client: MessageChannel) -> str:
        started: ChildProcess | None = None
        try:
            async with self._child_for_connection() as (child, origin):
                started = child
                self._children.add(child)
                if self._stop_now.is_set():
                    child.hurry()
                level = logging.DEBUG if client.one_request else logging.INFO
                logger.log(level, "%s: connected; child pid %d%s", client.peer, child.pid, origin)
                relay = Relay(client, child, self.config.limits, self._stopping, self._stop_now)
                self._relays.add(relay)
                try:
                    ending = await relay.run()
                finally:
                    self._relays.discard(relay)
                logger.log(level, "%s: %s", client.peer, ending.description)
                # The client sees its end before the child stops.
                await client.aclose_with(close_reason(ending.reason), ending.description)
        finally:
            if started is not None:  # stopped and reaped by now
                self._children.discard(started)
                self._garbage_of_stopped_children += started.garbage_lines
        return ending.reason

    async def _refuse(
        self, client: MessageChannel, code: int, message: str, reason: str, **data: object
    ) -> None:
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
