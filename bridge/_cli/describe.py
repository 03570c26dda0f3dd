"""What ``check-config`` prints: one line per shared listener and per server of a configuration."""

from __future__ import annotations

from collections.abc import Mapping

from .._child.sandbox import Sandbox
from .._daemon.config import PROBE_TIMEOUT, ServeConfig
from .._ops.plan import FleetPlan


def _describe_sandbox(sandbox: Sandbox | None) -> str:
    """``"; sandboxed by /usr/bin/bwrap: no network, writable /srv/data, hidden /etc/x.toml"``."""
    if sandbox is None:
        return ""
    from .._child.bwrap import find_bwrap  # loads only where a child is sandboxed

    parts = ["network" if sandbox.network else "no network"]
    for what, paths in (
        ("writable", sandbox.read_write),
        ("readable", sandbox.read_only),
        ("hidden", sandbox.hide),
    ):
        if paths:
            parts.append(f"{what} {' '.join(paths)}")
    return f"; sandboxed by {find_bwrap(sandbox) or sandbox.bwrap}: {', '.join(parts)}"


def describe(servers: FleetPlan | Mapping[str, ServeConfig]) -> list[str]:
    """One line per shared listener and per server, for ``check-config``."""
    fleet = FleetPlan.of(servers)
    listeners = [
        f"listener {name}: {listener.url}, servers under {listener.prefix}/"
        + (" (WebSocket)" if listener.websocket else "" if listener.index else " (no index)")
        for name, listener in fleet.listeners.items()
    ]
    return listeners + [
        f"{name}: {' '.join(config.child.argv)} on "
        + ", ".join(
            [str(address) for address in config.listen]
            + [
                f"{fleet.listeners[listener].url}{path} (listener {listener})"
                for listener, path in fleet.endpoints(name)
            ]
        )
        + f" ({config.child_mode})"
        + (f"; on demand, stopped after {config.idle_stop:g}s idle" if config.start == "on-demand" else "")
        + (
            f"; era probe waits {config.probe_timeout:g}s"
            if config.child_mode == "auto" and config.probe_timeout != PROBE_TIMEOUT
            else ""
        )
        + _describe_sandbox(config.child.sandbox)
        + (f"; cannot start: {fleet.unavailable[name]}" if name in fleet.unavailable else "")
        + "".join(
            f"; tools {rule.pattern} need {' '.join(sorted(rule.scopes))}"
            for rule in config.tool_scopes.rules
        )
        for name, config in fleet.servers.items()
    ]
