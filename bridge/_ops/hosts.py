"""The fleet's shared listeners: one host, HTTP or WebSocket, per ``[listeners.NAME]``.

:class:`Hosts` opens each host before the servers mounted on it start, serves it in the fleet's
nursery, keeps it across reloads while its own settings stay the same, re-opens it when they change
(the servers mounted on it restart, since their mount addresses name the new host) and closes it
after the servers, at the end. Each HTTP host's index (``GET {prefix}``) lists its servers, filled
in by the fleet through :meth:`Hosts.open`'s ``index`` (a WebSocket host has none).

A server that cannot start keeps its path taken by a placeholder mount that is never served:
its requests get 503 (the host's answer for a mount that is not serving), not the 404 of an
unknown path, and the index and ``/readyz`` say it failed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import attrs
import trio

import channels
from channels import Address, JSONObject, ListenError, MessageListener

from .._daemon.daemon import Daemon
from .plan import FleetPlan, SharedListener

if TYPE_CHECKING:
    from channels import HttpHost, WebSocketHost

    # Either kind of shared socket: the same contract (mount_address, serve, aclose), HTTP or WebSocket.
    Host = HttpHost | WebSocketHost

logger = logging.getLogger("bridge")


@attrs.define(eq=False)
class _Open:
    """One open host, the settings it was opened with, and the scope its ``serve`` runs in."""

    settings: SharedListener
    host: Host
    scope: trio.CancelScope


@attrs.define(eq=False)
class Hosts:
    """The open hosts by listener name; owned by the fleet, which calls :meth:`aclose` last.

    Attributes:
        index: what each host's index lists: called with the listener's name.
    """

    index: Callable[[str], list[JSONObject]]
    _open: dict[str, _Open] = attrs.field(factory=dict)
    _placeholders: dict[str, list[MessageListener]] = attrs.field(factory=dict)

    def stale(self, plan: FleetPlan) -> set[str]:
        """The open listeners ``plan`` removes or changes (to be closed once their servers stopped)."""
        return {name for name, item in self._open.items() if plan.listeners.get(name) != item.settings}

    async def close(self, names: set[str]) -> None:
        """Close the hosts ``names`` (their servers have stopped)."""
        for name in sorted(names):
            item = self._open.pop(name, None)
            if item is not None:
                item.scope.cancel()
                await item.host.aclose()
                logger.info("shared listener %s closed", name)

    async def open(self, plan: FleetPlan, nursery: trio.Nursery) -> None:
        """Open and serve every listener of ``plan`` not open yet.

        Raises:
            ListenError: a listener could not be bound (those opened before stay open).
        """
        for name, settings in plan.listeners.items():
            if name in self._open:
                continue
            host: Host
            if settings.websocket:
                # channels' hosts (and websockets, h11, httptools) load with the first one opened.
                host = await channels.WebSocketHost.open(
                    settings.url, settings.options, prefix=settings.prefix
                )
            else:
                host = await channels.HttpHost.open(
                    settings.url, settings.options, prefix=settings.prefix, index=settings.index
                )
                host.index = lambda name=name: self.index(name)
            scope = trio.CancelScope()
            self._open[name] = _Open(settings, host, scope)

            async def serve(
                *, task_status: trio.TaskStatus[None], host: Host = host, scope: trio.CancelScope = scope
            ) -> None:
                with scope:
                    await host.serve(task_status=task_status)

            await nursery.start(serve)
            logger.info("shared listener %s on %s, servers under %s/", name, host.address, host.prefix)

    def addresses(self, plan: FleetPlan, server: str) -> tuple[Address, ...]:
        """``server``'s mount addresses on the open hosts (equal across reloads for the same host)."""
        return tuple(
            self._open[listener].host.mount_address(server, path) for listener, path in plan.endpoints(server)
        )

    def urls(self, plan: FleetPlan, server: str) -> list[str]:
        """The endpoint URLs of ``server``'s mounts."""
        return [str(address) for address in self.addresses(plan, server)]

    async def hold(self, plan: FleetPlan, server: str) -> None:
        """Keep a failed server's paths mounted but not served (503), until :meth:`release`."""
        await self.release(server)
        held: list[MessageListener] = []
        for address, mount in zip(self.addresses(plan, server), plan.mounts[server], strict=True):
            try:
                held.extend(await address.listen(mount.options))
            except ListenError as exc:
                logger.warning("[%s] its path stays unmounted: %s", server, exc)
        self._placeholders[server] = held

    async def release(self, server: str) -> None:
        """Unmount a failed server's placeholder (before it starts again, or is removed)."""
        for listener in self._placeholders.pop(server, []):
            await trio.aclose_forcefully(listener)

    async def aclose(self) -> None:
        """Unmount every placeholder and close every host (after the servers have stopped)."""
        for server in list(self._placeholders):
            await self.release(server)
        await self.close(set(self._open))

    def reload_certificates(self) -> int:
        """Read every HTTPS host's certificate and key again; how many have TLS."""
        with_tls = 0
        for name, item in self._open.items():
            try:
                if item.host.reload_certificates():
                    with_tls += 1
                    logger.info("shared listener %s: TLS certificate and key read again", name)
            except ListenError as exc:
                with_tls += 1
                logger.error("%s; the certificate in use stays", exc)
        return with_tls

    def mapping(self) -> Mapping[str, Host]:
        """The open hosts, by listener name."""
        return {name: item.host for name, item in self._open.items()}


def index_entries(
    plan: FleetPlan, listener: str, daemons: Mapping[str, Daemon], failed: Mapping[str, str]
) -> list[JSONObject]:
    """A shared listener's index: each server mounted on it (name, path, state, mode, era)."""
    entries: list[JSONObject] = []
    for name in plan.mounts:
        for mounted_on, path in plan.endpoints(name):
            if mounted_on != listener:
                continue
            daemon = daemons.get(name)
            entry: JSONObject = {"name": name, "path": path}
            if daemon is None:
                entry |= {"state": "failed" if name in failed else "starting", "mode": None, "era": None}
            else:
                entry |= {"state": _state(daemon), "mode": daemon.mode, "era": _era(daemon)}
            entries.append(entry)
    return entries


def _state(daemon: Daemon) -> str:
    if daemon.stopping:
        return "stopping"
    return "serving" if daemon.healthy() else "unhealthy"


def _era(daemon: Daemon) -> str | None:
    """What ``--child auto``'s probe found, or ``None`` when the mode was set (no probe) or not yet."""
    if daemon.config.child_mode != "auto" or daemon.mode == "auto":
        return None
    return "modern" if daemon.mode == "shared" else "legacy"
