"""The children a daemon serves its connections with: the shared child and the warm pool.

:class:`ChildServices` resolves ``auto`` (the era probe) and starts the shared child, eagerly,
at the first connection, or on demand. With ``start = "on-demand"`` the first connection starts the
child (and, for ``auto``, probes the server once: its era does not change while the daemon runs),
and once no connection has been served for ``idle_stop`` (:class:`~.usage.Usage`) the child is
stopped in MCP order through the path a graceful stop takes (the supervisor told to stop, then
``open_child`` closing stdin, SIGTERM, SIGKILL) and the warm pool emptied; the next connection
starts them again. Starting and the idle stop hold one lock, so a connection that comes during a
stop waits for it (bounded by the stop timeouts) and then starts a fresh child. On demand, a
shared child that crash-loops is given up without ending the daemon: its clients are
disconnected, ``/readyz`` says it failed, and the next connection starts it again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING

import attrs
import trio

from .._child.process import ChildProcess, open_child
from .._child.restarts import CrashLoop, SupervisorState
from .config import ServeConfig
from .statistics import Counters
from .usage import Usage

if TYPE_CHECKING:
    from .._child.pool import ChildPool  # loads with a warm pool only (--prespawn)
    from .._shared.mux import SharedChild  # loads with the shared child only (services.py)

logger = logging.getLogger("bridge.daemon")


@attrs.define(eq=False)
class ChildServices:
    """The shared child and the warm pool of one daemon, and when they start and stop.

    The daemon owns this and the nursery it runs them in (``nursery``, set before the first
    start); everything started there is stopped by :meth:`close` or by the idle stop, and the
    nursery waits for it.

    Args:
        config: what the daemon serves.
        stopping: the daemon's graceful-stop event.
        counters: the daemon's counters (idle stops; what a stopped shared child counted).
    """

    config: ServeConfig
    stopping: trio.Event
    counters: Counters
    nursery: trio.Nursery | None = None
    mode: str = "per-connection"
    """The child mode in use; ``auto`` is resolved by the first start."""
    shared: SharedChild | None = None
    pool: ChildPool | None = None
    """The warm pool; started by the daemon (eager, lazy) or by the first start (on demand)."""
    started: bool = False
    stopped_on_demand: bool = False
    """Whether the idle stop has stopped the child at least once."""
    stopping_on_demand: bool = False
    """Whether the idle stop is stopping the child now (in MCP order, which takes a moment)."""
    usage: Usage = attrs.field(factory=Usage)
    _lock: trio.Lock = attrs.field(init=False, factory=trio.Lock)
    _mode_chosen: bool = attrs.field(init=False, default=False)
    _probed: ChildProcess | None = attrs.field(init=False, default=None)  # during the era probe
    _ended: list[trio.Event] = attrs.field(init=False, factory=list)  # set as started services end
    _idle_watch: trio.CancelScope = attrs.field(init=False, factory=trio.CancelScope)

    @property
    def idle(self) -> bool:
        """Whether the child is idle on demand: not started yet, or stopped after ``idle_stop``."""
        return self.config.start == "on-demand" and not self.started

    def hurry(self) -> None:
        """The immediate stop: the shared child, the pool's and the probe's skip their grace periods."""
        if self._probed is not None:
            self._probed.hurry()
        if self.pool is not None:
            self.pool.hurry()
        if self.shared is not None:
            self.shared.hurry()

    def close(self) -> None:
        """The daemon is stopping: no more idle stops; stop the shared child, close the pool."""
        self._idle_watch.cancel()
        if self.shared is not None:
            self.shared.stop()
        if self.pool is not None:
            self.pool.close()

    async def ensure_started(self) -> SharedChild | None:
        """Resolve ``auto`` and start the shared child (and, on demand, the pool); return it.

        Once: until the idle stop of ``start = "on-demand"`` (or a crash loop it survives) stops
        them; the next call then starts them again. Returns None when there is no shared child.

        Raises:
            ChildStartError: the child could not be started (lazily: the connection that found
                out is refused, the next one tries again).
        """
        if self.started and self.config.start != "on-demand" and not self._lock.locked():
            # Started for good (only on demand does a child stop and start again): every request of
            # the 2026-07-28 era passes here, and queueing each on the lock cost it scheduler passes.
            await trio.lowlevel.checkpoint_if_cancelled()
            return self.shared
        async with self._lock:
            on_demand = self.config.start == "on-demand"
            if self.started and not (on_demand and self._given_up()):
                return self.shared
            if self.started:  # the shared child was given up after a crash loop: start afresh
                await self._stop_on_demand()
            if not self._mode_chosen:
                self.mode = await self._choose_mode()
                self._mode_chosen = True
            if self.mode == "shared":
                # bridge._shared loads only where a child is shared (or probed, in _choose_mode).
                from .._shared.mux import SharedChild

                shared = SharedChild(
                    self.config.child,
                    self.config.limits,
                    self.stopping,
                    self.config.restart_policy,
                    self.config.tool_scopes,
                )
                await self._start_service(partial(self._run_shared, shared))
                self.shared = shared
            if on_demand and self.config.prespawn and self.pool_wanted():
                from .._child.pool import ChildPool  # imported only for a warm pool

                pool = ChildPool(self.config.child, self.config.limits, self.config.prespawn)
                await self._start_service(pool.run)
                self.pool = pool
            if on_demand:
                logger.info("[%s] started on demand", self.config.child.name)
            self.started = True
            return self.shared

    def shared_now(self) -> SharedChild | None:
        """The shared child if it serves now with nothing starting or stopping it, else None.

        What :meth:`ensure_started` would return at once, without a checkpoint (a stop or start
        under way holds the lock; the caller then waits in ``ensure_started`` instead).
        """
        if not self.started or self._lock.locked() or (self.config.start == "on-demand" and self._given_up()):
            return None
        return self.shared

    def _given_up(self) -> bool:
        """Whether the shared child was given up after a crash loop (or its run has ended)."""
        failed = self.shared is not None and self.shared.supervisor.state is SupervisorState.FAILED
        return failed or any(ended.is_set() for ended in self._ended)

    def pool_wanted(self) -> bool:
        """Whether connections may get children of their own (and so a warm pool serves them)."""
        return self.mode == "per-connection" or self.config.child_mode == "auto"

    async def _start_service(self, run: Callable[..., Awaitable[None]]) -> None:
        """Start ``run`` in the services nursery; its end sets an event of :attr:`_ended`."""
        ended = trio.Event()

        async def service(*, task_status: trio.TaskStatus[None]) -> None:
            try:
                await run(task_status=task_status)
            finally:
                ended.set()

        assert self.nursery is not None
        await self.nursery.start(service)
        self._ended.append(ended)

    async def _run_shared(self, shared: SharedChild, *, task_status: trio.TaskStatus[None]) -> None:
        """Run the shared child; on demand, a crash loop ends it and not the daemon."""
        try:
            await shared.run(task_status=task_status)
        except CrashLoop as exc:
            if self.config.start != "on-demand":
                raise
            # The supervisor logged it; /readyz says "failed" until the next connection starts it.
            await shared.end_everyone("child-exited", f"the shared child was given up: {exc}")

    async def stop_when_idle(self) -> None:
        """``start = "on-demand"``: stop the child after ``idle_stop`` with no connection; loop.

        Cancelled (:attr:`_idle_watch`) when the daemon stops; a stop it had begun goes on in
        the services nursery.
        """
        with self._idle_watch:
            while True:
                await self.usage.idle_for(self.config.idle_stop)
                async with self._lock:
                    if self.usage.users or not self.started:
                        continue  # a connection came meanwhile, or nothing runs
                    logger.info(
                        "[%s] no client for %gs: stopping the child until the next request",
                        self.config.child.name,
                        self.config.idle_stop,
                    )
                    self.stopping_on_demand = True  # /readyz: idle, not a stopped child
                    try:
                        await self._stop_on_demand()
                    finally:
                        self.stopping_on_demand = False
                    self.stopped_on_demand = True
                    self.counters.idle_stops += 1

    async def _stop_on_demand(self) -> None:
        """Stop the shared child in MCP order and empty the pool; wait until both have ended.

        Called with the start lock held, once no connection uses them.
        """
        if self.shared is not None:
            self.shared.stop()
        if self.pool is not None:
            self.pool.close()
        for ended in self._ended:
            await ended.wait()
        self.counters.fold(self.shared)
        self.shared, self.pool, self._ended = None, None, []
        self.started = False

    async def _choose_mode(self) -> str:
        if self.config.child_mode != "auto":
            return self.config.child_mode
        from .._shared.eras import MODERN_VERSION, Era, probe_era

        try:
            async with open_child(self.config.child, self.config.limits) as child:
                self._probed = child
                probe = await probe_era(child, timeout=self.config.probe_timeout)
        finally:
            self._probed = None
        mode = "shared" if probe.era is Era.MODERN else "per-connection"
        if probe.timed_out:
            # Not evidence of a legacy server, only of a slow one; yet the mode holds for the life
            # of the daemon, so say so loudly, with both ways out.
            logger.warning(
                "child mode %s: %s (%s pid %d, its start-up included): serving one child per "
                "connection; if this server speaks %s, raise --probe-timeout (probe_timeout in a "
                "configuration file) or set --child shared",
                mode,
                probe.reason,
                self.config.child.name,
                child.pid,
                MODERN_VERSION,
            )
        else:
            logger.info("child mode %s: %s", mode, probe.reason)
        return mode
