"""What a fleet runs: its servers, the shared listeners, and which server is mounted where.

A :class:`FleetPlan` is a frozen value, as :class:`~bridge.ServeConfig` is: reading a
configuration file builds one, and a reload compares the new one with the running one. A server
mounted on a shared listener (``shared = "NAME"`` in the file) has a :class:`Mount` for it; its
:class:`~bridge.ServeConfig` holds only its other listeners until the fleet, which owns the
:class:`~channels.HttpHost` of each :class:`SharedListener`, adds the mount's address to it
(:meth:`FleetPlan.resolve`). Nothing here opens anything.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from channels import Address, ListenOptions

from .._daemon.config import ServeConfig

# Where a shared listener mounts servers unless told otherwise: PREFIX/NAME/mcp (as the hosts').
DEFAULT_PREFIX = "/servers"


@attrs.frozen
class SharedListener:
    """One HTTP(S) or WebSocket socket several servers are mounted on (``[listeners.NAME]``).

    Attributes:
        url: ``http://HOST:PORT``, ``https://HOST:PORT``, ``http+fd:NAME``, ``ws://HOST:PORT`` or
            ``wss://HOST:PORT`` (no path).
        options: the socket's own: TLS files, TCP keepalive, handshake timeout, Host and Origin
            checks, ``http.trust_proxy``; its tokens and OAuth guard the index only.
        prefix: servers are mounted at ``{prefix}/{name}/mcp`` (``.../ws`` on a WebSocket
            listener) unless given a path.
        index: whether ``GET {prefix}`` lists the servers (to callers the listener authenticates);
            an HTTP listener's only.
    """

    url: str
    options: ListenOptions
    prefix: str = DEFAULT_PREFIX
    index: bool = True

    @property
    def websocket(self) -> bool:
        """Whether it is a WebSocket listener (a ``WebSocketHost``; else an ``HttpHost``)."""
        return self.url.startswith(("ws://", "wss://"))

    def default_path(self, server: str) -> str:
        """Where ``server`` is mounted unless given a path: ``{prefix}/{server}/mcp`` or ``/ws``."""
        return f"{self.prefix}/{server}/{'ws' if self.websocket else 'mcp'}"


@attrs.frozen
class Mount:
    """A server mounted on the shared listener named ``listener``, at ``path`` (None: the default).

    ``options`` are the server's own for that mount: tokens, OAuth, sessions, CORS, metadata (and
    the listener's Host and Origin checks, copied in, since each mount's guard applies them).
    """

    listener: str
    path: str | None
    options: ListenOptions

    def endpoint(self, listener: SharedListener, server: str) -> str:
        """The endpoint's path on ``listener``."""
        return self.path if self.path is not None else listener.default_path(server)


@attrs.frozen
class FleetPlan:
    """The servers (by name), the shared listeners (by name), and the mounts (by server name).

    Attributes:
        servers: each server's configuration, without its mounts.
        listeners: the shared listeners the file declares.
        mounts: for each server on a shared listener, its mounts there.
        unavailable: servers the file declares that cannot start (their command is not there,
            say), with the reason; the fleet reports them failed and serves the others.
    """

    servers: Mapping[str, ServeConfig]
    listeners: Mapping[str, SharedListener] = attrs.field(factory=dict)
    mounts: Mapping[str, tuple[Mount, ...]] = attrs.field(factory=dict)
    unavailable: Mapping[str, str] = attrs.field(factory=dict)

    @classmethod
    def of(cls, value: FleetPlan | Mapping[str, ServeConfig]) -> FleetPlan:
        """``value`` itself, or a plan of plain servers (no shared listener)."""
        return value if isinstance(value, FleetPlan) else cls(dict(value))

    def endpoints(self, server: str) -> list[tuple[str, str]]:
        """The shared listener's name and the endpoint path of each of ``server``'s mounts."""
        return [
            (mount.listener, mount.endpoint(self.listeners[mount.listener], server))
            for mount in self.mounts.get(server, ())
        ]

    def resolve(self, server: str, addresses: Mapping[str, tuple[Address, ...]]) -> ServeConfig:
        """``server``'s configuration with its mount addresses (``addresses[server]``) added.

        Its own listeners keep their options; each mount address gets the mount's options.
        """
        config = self.servers[server]
        extra = addresses.get(server, ())
        if not extra:
            return config
        own = list(config.listener_options) + [None] * (len(config.listen) - len(config.listener_options))
        return attrs.evolve(
            config,
            listen=(*config.listen, *extra),
            listener_options=(*own, *(mount.options for mount in self.mounts[server])),
        )
