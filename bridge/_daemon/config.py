"""What a bridge serves: :class:`ServeConfig`, a frozen record (building it starts nothing)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from channels import Address, ListenOptions, parse_address

from .._child.process import ChildSpec
from .._child.restarts import RestartPolicy
from .._limits import Limits
from .._relay.scopes import ToolScopes

# With start = "on-demand", the child is stopped after this long with no client connected. Ten
# minutes, the figure issue 17 gives: a person pausing between prompts (reading a reply, editing)
# is seldom away longer, so an interactive session does not pay a restart (seconds for an npx
# server) at each pause, while a host with twenty configured servers runs only those used this
# quarter hour. systemd's socket-activated services that exit on idle pick the same order.
IDLE_STOP = 600.0

# With child_mode = "auto": how long the era probe (bridge/_shared/eras.py) waits for the answer to
# server/discover. The probe is sent as soon as the child is started, so this bounds the child's
# start-up as well as its answer: an interpreter with an SDK to import takes about a second
# (tests/sdk_server.py: ~0.6 s here, 4.5 s and more on a loaded machine), an `npx`/`uvx` launch that
# has to resolve a package a few seconds. A legacy server answers an unknown method at once with an
# error, as JSON-RPC requires; only one that silently drops it waits out the whole timeout, and then
# only once per daemon. Five seconds is past every normal start-up yet short enough not to be
# mistaken for a hang by the operator watching `--child auto` start (the official SDK has no fixed
# probe timeout: its request timeout applies). A server slower than that is served as legacy, with a
# warning naming --probe-timeout, which raises it.
PROBE_TIMEOUT = 5.0


def _addresses(items: Iterable[Address | str]) -> tuple[Address, ...]:
    return tuple(parse_address(item) if isinstance(item, str) else item for item in items)


def _tool_scopes(value: ToolScopes | Mapping[str, Iterable[str]]) -> ToolScopes:
    return value if isinstance(value, ToolScopes) else ToolScopes(value)


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
            before the listeners accept; ``"lazy"``: on the first connection; ``"on-demand"``: on
            the first connection too, and stopped again (the warm pool emptied) after
            ``idle_stop`` seconds with no connection, to start again on the next one.
        idle_stop: with ``start="on-demand"``, how long the daemon goes with no connection before
            it stops its child (seconds; :data:`IDLE_STOP` by default); ignored otherwise.
        probe_timeout: with ``child_mode="auto"``, how long the era probe waits for the child's
            answer to ``server/discover``, its start-up included (seconds; :data:`PROBE_TIMEOUT`
            by default); no answer by then serves the child as legacy, one per connection, for
            the life of the daemon. Ignored in the other modes.
        tool_scopes: the OAuth scopes each tool needs (:class:`ToolScopes`, or a mapping such as
            ``{"delete_*": ["mcp:admin"]}``), checked in every child mode against the scopes of
            each caller's access token (``peer.scopes``); a caller without one holds none.
            ``tool_scopes.scopes_supported`` is what protected-resource metadata may publish.

    Raises:
        channels.AddressError: an address text in ``listen`` is malformed.
        ValueError: ``child_mode`` or ``start`` is not one of the values listed, or ``idle_stop``
            or ``probe_timeout`` is not positive.
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
    start: str = attrs.field(default="eager", validator=attrs.validators.in_(("eager", "lazy", "on-demand")))
    idle_stop: float = attrs.field(default=IDLE_STOP, validator=attrs.validators.gt(0))
    probe_timeout: float = attrs.field(default=PROBE_TIMEOUT, validator=attrs.validators.gt(0))
    tool_scopes: ToolScopes = attrs.field(factory=ToolScopes, converter=_tool_scopes)
