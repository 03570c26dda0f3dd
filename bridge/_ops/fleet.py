"""The daemons one process runs, one per server: started together, reloaded, stopped together.

Task tree::

    run_fleet
    ├── signals: SIGTERM/SIGINT stop (a second one stops at once), SIGHUP reloads
    └── running
        ├── Daemon.run, one per server (a removed or changed server's keeps running until drained)
        ├── the admin endpoint (--admin), over every current daemon
        └── Notifier.run (STATUS=, WATCHDOG=1)

A SIGHUP first reads every TLS listener's certificate, key and client CA again (renewed
certificates; a file that cannot be loaded is logged and the one in use stays). A reload (SIGHUP,
with ``--config``) then reads the file again. If it is bad, the error is logged and
everything keeps running as it was. Otherwise: servers no longer in the file drain and stop;
servers whose settings changed drain and stop, then start again with the new ones (their clients
reconnect); new servers start; servers whose settings are the same, and their clients, are not
touched.

Servers mounted on a shared listener (:mod:`.hosts`) get the mount's address in their
configuration, so the same rules hold for them: the socket stays open across a reload, an
unchanged server keeps its sessions, a removed one is unmounted (its sessions end, its paths
answer 404), a changed one is unmounted and mounted again. Only a change to the shared listener's
own settings re-opens its socket, and restarts every server on it. Such a server that cannot start,
or whose shared child crash-loops, is reported failed (``/readyz``, ``STATUS=``, the index) and its
paths answer 503; the listener and the other servers go on, and the next reload tries it again.
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING

import attrs
import trio

from channels import JSONObject, ListenError

from .._child.restarts import CrashLoop
from .._daemon.config import ServeConfig
from .._daemon.daemon import Daemon
from .._errors import ChildStartError, ConfigError
from .._relay.requests import RequestMetrics
from .hosts import Hosts, index_entries
from .plan import FleetPlan
from .systemd import Notifier

if TYPE_CHECKING:
    from channels import TcpAddress  # the admin endpoint's address (channels loads tcp on first use)

    from .._relay.tap import Tap  # loads with --tap only

logger = logging.getLogger("bridge")

EXIT_OK = 0


# What a server mounted on a shared listener may fail with, without taking the others down.
SERVER_FAILURES = (ListenError, ChildStartError, ConfigError, CrashLoop)


@attrs.define(eq=False)
class Fleet:
    """The running daemons, by server name, and the shared listeners they are mounted on.

    Attributes:
        tap: passed to every daemon (``--tap``).
        metered: whether daemons count and time requests (``--admin``).
        current: the daemons serving now; the admin endpoint reads this very list.
        failed: servers on a shared listener that could not start (or stopped failing), with
            the reason; the admin endpoint reads this very mapping.
        plan: the servers, shared listeners and mounts being served.
    """

    tap: Tap | None
    metered: bool
    current: list[Daemon] = attrs.field(factory=list)
    failed: dict[str, str] = attrs.field(factory=dict)
    plan: FleetPlan = attrs.field(factory=lambda: FleetPlan({}))
    hosts: Hosts = attrs.field(init=False)
    _by_name: dict[str, Daemon] = attrs.field(factory=dict)
    _everyone: list[Daemon] = attrs.field(factory=list)  # draining ones included
    _starting: list[Daemon] = attrs.field(factory=list)  # listening perhaps, not yet started
    _nursery: trio.Nursery | None = None
    stopping: bool = False
    """A stop has begun: reloads start nothing more."""

    def __attrs_post_init__(self) -> None:
        self.hosts = Hosts(self.index)

    async def start(self, name: str, config: ServeConfig | None = None) -> None:
        """Start one server (``plan``'s, unless ``config`` is given); return once its listeners are bound.

        A server on a shared listener that cannot start is reported failed instead (its paths
        answer 503), and so is one that fails later.

        Raises:
            ListenError, ChildStartError: a server of its own listeners only could not start
                (nothing is left running for it).
        """
        assert self._nursery is not None
        mounted = name in self.plan.mounts
        if mounted:
            await self.hosts.release(name)
            if name in self.plan.unavailable:
                await self._fail(name, self.plan.unavailable[name])
                return
            config = self.plan.resolve(name, {name: self.hosts.addresses(self.plan, name)})
        config = config if config is not None else self.plan.servers[name]
        daemon = Daemon(config, tap=self.tap, request_metrics=RequestMetrics() if self.metered else None)
        self._starting.append(daemon)
        failure = None
        try:
            if mounted:
                await self._nursery.start(self._run_mounted, name, daemon)
            else:
                await self._nursery.start(daemon.run)
        except* SERVER_FAILURES as group:
            if not mounted:
                raise
            failure = "; ".join(str(error) for error in group.exceptions)
        finally:
            self._starting.remove(daemon)
        if failure is not None:
            await self._fail(name, failure)
            return
        self.failed.pop(name, None)
        self._by_name[name] = daemon
        self._everyone.append(daemon)
        self.current[:] = list(self._by_name.values())

    async def _run_mounted(
        self, name: str, daemon: Daemon, *, task_status: trio.TaskStatus[list[str]]
    ) -> None:
        """Run a mounted server's daemon; a failure after it started is reported, not raised."""
        reported = _Reported(task_status)
        try:
            await daemon.run(task_status=reported)
        except* SERVER_FAILURES as group:
            if not reported.done:
                raise
            if self._by_name.get(name) is daemon:
                del self._by_name[name]
                self.current[:] = list(self._by_name.values())
                await self._fail(name, "; ".join(str(error) for error in group.exceptions))

    async def _fail(self, name: str, reason: str) -> None:
        logger.error("[%s] could not start: %s; the other servers go on", name, reason)
        self.failed[name] = reason
        if not self.stopping:
            await self.hosts.hold(self.plan, name)

    def index(self, listener: str) -> list[JSONObject]:
        """What a shared listener's index lists: each server mounted on it, with its state."""
        return index_entries(self.plan, listener, self._by_name, self.failed)

    def reload_certificates(self) -> int:
        """Make every daemon's TLS listeners, and every HTTPS shared listener, read their files again.

        Daemons still starting count: their listeners may be bound already (a slow child's
        probe runs after), and a renewal signalled then must not wait for the next SIGHUP.

        Returns:
            How many TLS listeners there are.
        """
        own = sum(daemon.reload_certificates() for daemon in [*self._everyone, *self._starting])
        return own + self.hosts.reload_certificates()

    def describe(self) -> str:
        """One status line for every server."""
        if len(self.current) == 1 and not self.failed:
            return self.current[0].describe()
        return "; ".join(
            [f"{daemon.config.child.name}: {daemon.describe()}" for daemon in self.current]
            + [f"{name}: failed" for name in self.failed]
        )

    def healthy(self) -> bool:
        """Whether there is a server, and every current one is healthy.

        A failed server on a shared listener does not count: the watchdog restarting the
        process would take the others down.
        """
        return bool(self.current) and all(daemon.healthy() for daemon in self.current)

    def stop(self) -> None:
        """Begin a graceful stop of every daemon."""
        self.stopping = True
        for daemon in self._everyone + self._starting:
            daemon.stop()

    def stop_now(self) -> None:
        """Stop every daemon at once."""
        for daemon in self._everyone + self._starting:
            daemon.stop_now()

    async def wait_stopped(self) -> None:
        """Return once every daemon ever started has stopped."""
        for daemon in list(self._everyone):
            await daemon.wait_stopped()

    async def start_all(self, stop_requested: trio.Event) -> None:
        """Open the shared listeners, then start every server of ``plan``.

        Raises:
            ListenError: a shared listener could not be bound; see :meth:`start`.
        """
        assert self._nursery is not None
        await self.hosts.open(self.plan, self._nursery)
        for name in self.plan.servers:
            if stop_requested.is_set():
                break  # stopped while starting: start nothing more
            await self.start(name)

    async def reload(self, new: FleetPlan | Mapping[str, ServeConfig]) -> None:
        """Apply a new set of servers and shared listeners (see the module docstring).

        A server that fails to start is logged and left out; the others go on.
        """
        plan = FleetPlan.of(new)
        stale = self.hosts.stale(plan)
        replaced: list[Daemon] = []
        for name, daemon in list(self._by_name.items()):
            on_stale = any(listener in stale for listener, _ in self.plan.endpoints(name))
            if not on_stale and name in plan.servers and name not in plan.unavailable:
                resolvable = all(listener in self.hosts.mapping() for listener, _ in plan.endpoints(name))
                if (
                    resolvable
                    and plan.resolve(name, {name: self.hosts.addresses(plan, name)}) == daemon.config
                ):
                    continue
            del self._by_name[name]
            logger.info(
                "[%s] %s: draining and stopping",
                name,
                "changed" if name in plan.servers else "removed from the configuration",
            )
            daemon.stop()
            replaced.append(daemon)
        self.current[:] = list(self._by_name.values())
        for name in list(self.failed):  # tried again below, if still in the file
            del self.failed[name]
            await self.hosts.release(name)
        for daemon in replaced:  # their listeners must be free before new ones bind (a rename...)
            await daemon.wait_stopped()
        await self.hosts.close(stale)
        self.plan = plan
        if self.stopping:
            return
        assert self._nursery is not None
        try:
            await self.hosts.open(plan, self._nursery)
        except ListenError as exc:
            logger.error("a shared listener could not be opened: %s", exc)
        for name, config in plan.servers.items():
            if name in self._by_name:
                continue
            if self.stopping:
                return  # a stop came while the old ones drained: start nothing more
            if any(listener not in self.hosts.mapping() for listener, _ in plan.endpoints(name)):
                self.failed[name] = "its shared listener is not open"
                logger.error("[%s] could not start: its shared listener is not open", name)
                continue
            try:
                await self.start(name, config)
                if name in self._by_name:
                    logger.info("[%s] started", name)
            except* (ListenError, ChildStartError, ConfigError) as group:
                for error in group.exceptions:
                    logger.error("[%s] could not start: %s", name, error)


@attrs.define(eq=False)
class _Reported:
    """A task status that remembers whether the task reported started."""

    inner: trio.TaskStatus[list[str]]
    done: bool = False

    def started(self, value: list[str] | None = None) -> None:
        self.done = True
        self.inner.started(value if value is not None else [])


async def run_fleet(
    configs: FleetPlan | Mapping[str, ServeConfig],
    *,
    tap: Tap | None = None,
    admin: TcpAddress | None = None,
    reread: Callable[[], FleetPlan | Mapping[str, ServeConfig]] | None = None,
) -> int:
    """Run every server until a stop signal; return the exit code.

    Args:
        configs: the servers, by name (or a plan with shared listeners).
        tap: see ``--tap``.
        admin: where to serve the admin endpoint, or ``None``.
        reread: how to read the configuration again on SIGHUP (``None``: nothing to reload; a
            single command-line server then also stops when its stdio client leaves).
    """
    notifier = Notifier.from_environment()
    fleet = Fleet(tap, admin is not None, plan=FleetPlan.of(configs))
    stop_requested = trio.Event()
    reloading = trio.Lock()

    started = trio.Event()  # a SIGHUP during startup waits for it: no server is started twice

    async def reload() -> None:
        assert reread is not None
        await started.wait()
        async with reloading:
            if fleet.stopping:
                return
            notifier.send(
                "RELOADING=1", f"MONOTONIC_USEC={time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000}"
            )
            try:
                new = reread()
            except Exception as exc:
                for line in str(exc).splitlines() or [repr(exc)]:
                    logger.error("reload failed, the running configuration stays: %s", line)
            else:
                await fleet.reload(new)
            if not fleet.stopping:
                notifier.ready(fleet.describe())

    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async with trio.open_nursery() as nursery:

            async def watch_signals() -> None:
                stops = 0
                async for signum in signals:
                    name = signal.Signals(signum).name
                    if signum == signal.SIGHUP:
                        with_tls = fleet.reload_certificates()
                        if reread is None:
                            if not with_tls:
                                logger.warning("SIGHUP received: no --config, no TLS, nothing to reload")
                        elif not stop_requested.is_set():
                            logger.info("SIGHUP received: reloading the configuration")
                            nursery.start_soon(reload)
                        continue
                    stops += 1
                    if stops == 1:
                        logger.info("%s received: stopping gracefully", name)
                        stop_requested.set()
                        fleet.stop()
                    else:
                        logger.warning("%s received again", name)
                        fleet.stop_now()

            nursery.start_soon(watch_signals)
            try:
                async with trio.open_nursery() as running:
                    fleet._nursery = running
                    await fleet.start_all(stop_requested)
                    if admin is not None:
                        # The admin endpoint's HTTP (h11) loads only with --admin.
                        from .admin import serve_admin

                        await running.start(partial(serve_admin, fleet.current, admin, failed=fleet.failed))
                    started.set()
                    notifier.ready(fleet.describe())
                    running.start_soon(notifier.run, fleet.describe, fleet.healthy)
                    if reread is None:  # a stdio client leaving stops a single command-line server
                        for daemon in fleet.current:
                            running.start_soon(_set_after, daemon, stop_requested)
                    await stop_requested.wait()
                    fleet.stop()
                    notifier.stopping(fleet.describe())
                    await fleet.wait_stopped()
                    running.cancel_scope.cancel()
            finally:
                with trio.CancelScope(shield=True):
                    await fleet.hosts.aclose()  # after the servers, which were mounted on them
            nursery.cancel_scope.cancel()
    return EXIT_OK


async def _set_after(daemon: Daemon, event: trio.Event) -> None:
    await daemon.wait_stopping()
    event.set()
