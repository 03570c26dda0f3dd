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
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable, Mapping

import attrs
import trio

from channels import ListenError, TcpAddress

from .._daemon.config import ServeConfig
from .._daemon.daemon import Daemon
from .._errors import ChildStartError, ConfigError
from .._relay.requests import RequestMetrics
from .._relay.tap import Tap
from .admin import serve_admin
from .systemd import Notifier

logger = logging.getLogger("bridge")

EXIT_OK = 0


@attrs.define(eq=False)
class Fleet:
    """The running daemons, by server name.

    Attributes:
        tap: passed to every daemon (``--tap``).
        metered: whether daemons count and time requests (``--admin``).
        current: the daemons serving now; the admin endpoint reads this very list.
    """

    tap: Tap | None
    metered: bool
    current: list[Daemon] = attrs.field(factory=list)
    _by_name: dict[str, Daemon] = attrs.field(factory=dict)
    _everyone: list[Daemon] = attrs.field(factory=list)  # draining ones included
    _starting: list[Daemon] = attrs.field(factory=list)  # listening perhaps, not yet started
    _nursery: trio.Nursery | None = None
    stopping: bool = False
    """A stop has begun: reloads start nothing more."""

    async def start(self, name: str, config: ServeConfig) -> None:
        """Start one server; returns once its listeners are bound.

        Raises:
            ListenError, ChildStartError: it could not start (nothing is left running for it).
        """
        assert self._nursery is not None
        daemon = Daemon(config, tap=self.tap, request_metrics=RequestMetrics() if self.metered else None)
        self._starting.append(daemon)
        try:
            await self._nursery.start(daemon.run)
        finally:
            self._starting.remove(daemon)
        self._by_name[name] = daemon
        self._everyone.append(daemon)
        self.current[:] = list(self._by_name.values())

    def reload_certificates(self) -> int:
        """Make every daemon's TLS listeners read their files again (SIGHUP).

        Daemons still starting count: their listeners may be bound already (a slow child's
        probe runs after), and a renewal signalled then must not wait for the next SIGHUP.

        Returns:
            How many TLS listeners there are.
        """
        return sum(daemon.reload_certificates() for daemon in [*self._everyone, *self._starting])

    def describe(self) -> str:
        """One status line for every server."""
        if len(self.current) == 1:
            return self.current[0].describe()
        return "; ".join(f"{daemon.config.child.name}: {daemon.describe()}" for daemon in self.current)

    def healthy(self) -> bool:
        """Whether there is a server, and every current one is healthy."""
        return bool(self.current) and all(daemon.healthy() for daemon in self.current)

    def stop(self) -> None:
        """Begin a graceful stop of every daemon."""
        self.stopping = True
        for daemon in self._everyone:
            daemon.stop()

    def stop_now(self) -> None:
        """Stop every daemon at once."""
        for daemon in self._everyone:
            daemon.stop_now()

    async def wait_stopped(self) -> None:
        """Return once every daemon ever started has stopped."""
        for daemon in list(self._everyone):
            await daemon.wait_stopped()

    async def reload(self, configs: Mapping[str, ServeConfig]) -> None:
        """Apply a new set of servers (see the module docstring).

        A server that fails to start is logged and left out; the others go on.
        """
        replaced: list[Daemon] = []
        for name, daemon in list(self._by_name.items()):
            if configs.get(name) == daemon.config:
                continue
            del self._by_name[name]
            logger.info(
                "[%s] %s: draining and stopping",
                name,
                "changed" if name in configs else "removed from the configuration",
            )
            daemon.stop()
            replaced.append(daemon)
        self.current[:] = list(self._by_name.values())
        for daemon in replaced:  # their listeners must be free before new ones bind (a rename...)
            await daemon.wait_stopped()
        for name, config in configs.items():
            if name in self._by_name:
                continue
            if self.stopping:
                return  # a stop came while the old ones drained: start nothing more
            try:
                await self.start(name, config)
                logger.info("[%s] started", name)
            except* (ListenError, ChildStartError, ConfigError) as group:
                for error in group.exceptions:
                    logger.error("[%s] could not start: %s", name, error)


async def run_fleet(
    configs: Mapping[str, ServeConfig],
    *,
    tap: Tap | None = None,
    admin: TcpAddress | None = None,
    reread: Callable[[], Mapping[str, ServeConfig]] | None = None,
) -> int:
    """Run every server until a stop signal; return the exit code.

    Args:
        configs: the servers, by name.
        tap: see ``--tap``.
        admin: where to serve the admin endpoint, or ``None``.
        reread: how to read the configuration again on SIGHUP (``None``: nothing to reload; a
            single command-line server then also stops when its stdio client leaves).
    """
    notifier = Notifier.from_environment()
    fleet = Fleet(tap, admin is not None)
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
            async with trio.open_nursery() as running:
                fleet._nursery = running
                for name, config in configs.items():
                    if stop_requested.is_set():
                        break  # stopped while starting: start nothing more
                    await fleet.start(name, config)
                if admin is not None:
                    await running.start(serve_admin, fleet.current, admin)
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
            nursery.cancel_scope.cancel()
    return EXIT_OK


async def _set_after(daemon: Daemon, event: trio.Event) -> None:
    await daemon.wait_stopping()
    event.set()
