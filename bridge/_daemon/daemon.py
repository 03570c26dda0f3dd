"""The daemon: listeners, one child per connection, graceful stop.

Task tree (one visible tree, trio style)::

    Daemon.run
    ├── services: the shared child (SharedChild.run), eagerly or at the first connection;
    │   with start = "on-demand" also the warm pool, and the idle stop (_stop_when_idle)
    ├── accepting: serve_listeners over every listener        (cancelled when stopping)
    └── connections: one Connections.handle task per accepted channel (and an HTTP listener's)
        └── open_child → Relay.run                             (its own nursery of pumps)
    (the connections' children's stderr: one StderrReader.run task beside them)

A graceful stop (:meth:`Daemon.stop`, which the CLI calls on SIGTERM/SIGINT) closes the listeners,
lets each connection finish its in-flight requests within ``drain_timeout`` (new requests are refused
with ``-32000``), answers whatever is left, and stops every child in MCP order. A connection that is
still busy ``STOP_GRACE`` after the drain deadline (a client that does not read its last replies) is
cancelled; its child is still stopped in order, because that part is shielded.

This module holds the daemon's life (run, the stop sequence); starting and stopping the shared
child and the warm pool (eagerly, lazily, on demand) is :mod:`.services`'; serving one
connection is :mod:`.connection`'s, the counters are :mod:`.statistics`', what to serve is
:mod:`.config`'s.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING

import attrs
import trio

from channels import ListenError, MessageListener, cancelled_when, serve_listeners

from .._child.restarts import SupervisorState
from .._child.stderr import StderrReader
from .._relay.requests import RequestMetrics
from .config import ServeConfig
from .connection import Connections
from .services import ChildServices
from .statistics import Counters, DaemonStatistics

if TYPE_CHECKING:
    from .._child.pool import ChildPool  # loads with a warm pool only (--prespawn)
    from .._relay.tap import Tap  # loads with --tap only
    from .._shared.mux import SharedChild  # loads with the shared child only (services.py)

logger = logging.getLogger("bridge.daemon")

# After the drain deadline, connections get this long to flush their last replies before they are
# cancelled (the child stop that follows is bounded separately by the stop timeouts).
STOP_GRACE = 2.0
# On an immediate stop (the second signal), connections get this long to answer what is in flight.
STOP_NOW_GRACE = 0.5


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
    _listeners: list[MessageListener] = attrs.field(init=False, factory=list)
    _counters: Counters = attrs.field(init=False, factory=Counters)
    _children: ChildServices = attrs.field(init=False)

    @_children.default
    def _make_children(self) -> ChildServices:
        return ChildServices(self.config, self._stopping, self._counters, mode=self.config.child_mode)

    @property
    def mode(self) -> str:
        """The child mode in use, once :meth:`run` has started.

        ``auto`` is resolved when the server is probed: before the listeners accept with
        ``start="eager"``, at the first connection with ``"lazy"`` or ``"on-demand"``.
        """
        return self._children.mode

    @property
    def _shared(self) -> SharedChild | None:
        return self._children.shared

    @property
    def _pool(self) -> ChildPool | None:
        return self._children.pool

    def statistics(self) -> DaemonStatistics:
        """A snapshot of the counters; cheap, callable at any time (also after :meth:`run`)."""
        return self._counters.snapshot(self._shared, self._pool, self._listeners)

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
        if self._children.stopping_on_demand:
            return f"serving {clients}; idle (stopping the child on demand), starts on the next request"
        if self._children.idle:
            if self._children.stopped_on_demand:
                return f"serving {clients}; idle (stopped on demand), starts on the next request"
            return f"serving {clients}; idle (not started yet), starts on the first request"
        if self._shared is not None:
            supervisor = self._shared.supervisor.statistics()
            child = f"child pid {supervisor.child_pid}" if supervisor.child_pid else "no child"
            state = supervisor.state.value
            return f"serving {clients}; shared child {state}, {child}, {supervisor.restarts} restarts"
        return f"serving {clients}, {stats.children} children ({self.mode})"

    def healthy(self) -> bool:
        """Whether the daemon is fit to be kept alive by a watchdog.

        True while it runs, unless a shared child is failing or waiting out a restart's backoff.
        A daemon whose child is idle (``start = "on-demand"``, not started or stopped after
        ``idle_stop``) is healthy: the next connection starts it.
        """
        if self.stopped:
            return False
        if self._shared is None or self._children.idle or self._children.stopping_on_demand:
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
                self._counters.connections,
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
        for child in self._counters.children:
            child.hurry()
        self._children.hurry()
        if self._connections_scope is not None:
            self._connections_scope.deadline = min(
                self._connections_scope.deadline, trio.current_time() + STOP_NOW_GRACE
            )

    async def run(self, *, task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until :meth:`stop` has been called and every connection has ended.

        Reports the bound addresses through ``task_status`` once every listener is open (the
        readiness point: ``await nursery.start(daemon.run)``); a stop before that (during the era
        probe, say) cuts the start short, and it reports and returns without serving. Call it
        once. Before it returns, the listeners are closed and every child is stopped and reaped.
        If it is cancelled, the graceful drain is skipped (requests in flight go unanswered), but
        every child is still stopped in MCP order and reaped, since that step is shielded.

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
        listeners = await self._open_listeners()
        try:
            async with trio.open_nursery() as services:
                # The shared child lives here, beside the connections; with --start lazy or
                # on-demand the first connection starts it, hence the nursery handed to
                # ChildServices (the visible causality break trio's design asks such code to mark).
                self._children.nursery = services
                if self.config.start == "eager":
                    await self._start_eagerly()
                elif self.config.start == "on-demand":
                    services.start_soon(self._children.stop_when_idle)
                if self._stopping.is_set() and not self._children.started:
                    task_status.started(self.addresses)  # stopped while starting: serve nobody
                else:
                    await self._serve(listeners, task_status)
                self._children.close()
        finally:
            self._listeners = []
            for listener in listeners:
                await trio.aclose_forcefully(listener)
        logger.info("stopped")

    async def _start_eagerly(self) -> None:
        """Probe the server and start the shared child before accepting; a stop cuts this short.

        The era probe waits up to ``probe_timeout`` (raised to a minute for a server that starts
        slowly), so a stop meanwhile cancels it: whatever was started is stopped in MCP order. A
        failure to start is raised as it was, not in one more group.
        """
        async with cancelled_when(self._stopping.wait):
            await self._children.ensure_started()

    async def _serve(self, listeners: list[MessageListener], task_status: trio.TaskStatus[list[str]]) -> None:
        # One task reads the stderr of every connection's own child while they are served. Its
        # epoll set is closed only after the connections nursery has ended: when the daemon is
        # cancelled, that task ends at once, while each connection still stops its child (shielded)
        # and removes the child's stderr from the set.
        with StderrReader() as stderr_reader:
            async with trio.open_nursery() as reading:
                reading.start_soon(stderr_reader.run)
                await self._serve_connections(listeners, stderr_reader, task_status)
                reading.cancel_scope.cancel()

    async def _serve_connections(
        self,
        listeners: list[MessageListener],
        stderr_reader: StderrReader,
        task_status: trio.TaskStatus[list[str]],
    ) -> None:
        async with trio.open_nursery() as connections:
            self._connections_scope = connections.cancel_scope
            children = self._children
            if self.config.prespawn and self.config.start != "on-demand" and children.pool_wanted():
                from .._child.pool import ChildPool  # imported only for a warm pool

                children.pool = ChildPool(self.config.child, self.config.limits, self.config.prespawn)
                await connections.start(children.pool.run)
            handler = Connections(
                self.config,
                self._counters,
                self._stopping,
                self._stop_now,
                ensure_started=children.ensure_started,
                pool=lambda: children.pool,
                usage=children.usage,
                tap=self.tap,
                request_metrics=self.request_metrics,
                stop=self.stop,
                stderr_reader=stderr_reader,
                shared_now=children.shared_now,
            )
            async with trio.open_nursery() as accepting:
                await accepting.start(
                    partial(
                        serve_listeners,
                        handler.handle,
                        listeners,
                        handler_nursery=connections,
                        exchange_handler=handler.serve_exchange,
                    )
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
                if options.oauth is not None and not options.oauth.scopes_supported:
                    # The metadata names every scope a client may need: the listener's own and
                    # those of the per-tool rules (RFC 9728 §2, scopes_supported).
                    supported = dict.fromkeys(
                        [*options.oauth.scopes, *self.config.tool_scopes.scopes_supported]
                    )
                    options = attrs.evolve(
                        options, oauth=attrs.evolve(options.oauth, scopes_supported=supported)
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
