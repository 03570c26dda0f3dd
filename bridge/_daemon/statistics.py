"""The daemon's counters: :class:`DaemonStatistics`, a snapshot, and :class:`Counters`, the live tally.

The per-connection serving (:mod:`.connection`) counts into a ``Counters``; the daemon takes a
snapshot of it, adding what the shared child and the warm pool report.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from channels import MessageChannel, MessageListener

from .._child.process import ChildProcess
from .._relay.relay import Relay

if TYPE_CHECKING:
    from .._child.pool import ChildPool  # loads with a warm pool only (--prespawn)
    from .._shared.mux import SharedChild  # loads with the shared child only (services.py)


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
        sessions_evicted: HTTP legacy sessions ended to make room for a new one at the session
            cap (``--max-sessions``), since start.
        stray_replies: replies from children dropped because they answered no request in flight
            (a second reply to one request, or an id nobody sent), since start.
        oauth_tokens: OAuth access tokens checked since start, by ``(listener, outcome)``: every
            outcome of each listener with OAuth, zeros included (docs/security.md, "OAuth").
        idle_stops: with ``start = "on-demand"``, how often the child (and warm pool) was
            stopped after ``idle_stop`` with no client, since start.
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
    sessions_evicted: int = 0
    stray_replies: int = 0
    oauth_tokens: Mapping[tuple[str, str], int] = attrs.field(factory=dict)
    idle_stops: int = 0


@attrs.define(eq=False)
class Counters:
    """The daemon's live counters, and the clients, relays and children they are summed over.

    Whoever serves a connection adds it to the sets while it lasts, and moves what it counted
    into the totals of closed ones when it ends.

    Attributes:
        connections: connections being served now (counted against ``max_connections``).
        connections_total: connections accepted since start (refused ones included).
        connections_refused: connections refused (over the cap, or their child failed to start).
        handshakes_failed: connections that failed their handshake.
        by_transport: connections accepted since start, by transport.
        clients: the client channels open now.
        bytes_of_closed: bytes read from and written to clients already closed.
        relays: the per-connection relays running now.
        children: the per-connection children running now.
        garbage_of_stopped_children: junk lines dropped from children already stopped.
        evicted_of_closed: evicted sessions (clients whose ``evicted`` is true) already closed.
        strays_of_ended: stray replies dropped by relays (and shared children) already ended.
        restarts_of_stopped: restarts of shared children stopped on demand.
        idle_stops: on-demand stops after ``idle_stop`` with no client.
    """

    connections: int = 0
    connections_total: int = 0
    connections_refused: int = 0
    handshakes_failed: int = 0
    by_transport: collections.Counter[str] = attrs.field(factory=collections.Counter)
    clients: set[MessageChannel] = attrs.field(factory=set)
    bytes_of_closed: list[int] = attrs.field(factory=lambda: [0, 0])
    relays: set[Relay] = attrs.field(factory=set)
    children: set[ChildProcess] = attrs.field(factory=set)
    garbage_of_stopped_children: int = 0
    evicted_of_closed: int = 0
    strays_of_ended: int = 0
    restarts_of_stopped: int = 0
    idle_stops: int = 0

    def fold(self, shared: SharedChild | None) -> None:
        """A shared child stopped on demand: keep what it counted in the totals."""
        if shared is not None:
            self.restarts_of_stopped += shared.supervisor.restarts
            self.strays_of_ended += shared.stray_replies

    def snapshot(
        self, shared: SharedChild | None, pool: ChildPool | None, listeners: Sequence[MessageListener] = ()
    ) -> DaemonStatistics:
        """The counters now, with the shared child's and the warm pool's (either may be None).

        Also the OAuth outcome counts of ``listeners`` (the daemon's, while it listens).
        """
        return DaemonStatistics(
            connections=self.connections,
            connections_total=self.connections_total,
            connections_refused=self.connections_refused,
            handshakes_failed=self.handshakes_failed,
            requests_in_flight=sum(relay.in_flight for relay in self.relays)
            + (shared.in_flight if shared is not None else 0),
            children=len(self.children) + (1 if shared is not None and shared.child is not None else 0),
            prespawned=len(pool.ready) if pool is not None else 0,
            child_garbage_lines=self.garbage_of_stopped_children
            + sum(child.garbage_lines for child in self.children),
            child_restarts=self.restarts_of_stopped
            + (shared.supervisor.restarts if shared is not None else 0),
            bytes_from_clients=self.bytes_of_closed[0]
            + sum(client.bytes_received for client in self.clients),
            bytes_to_clients=self.bytes_of_closed[1] + sum(client.bytes_sent for client in self.clients),
            connections_by_transport=dict(self.by_transport),
            sessions_evicted=self.evicted_of_closed + sum(map(evicted, self.clients)),
            stray_replies=self.strays_of_ended
            + sum(relay.stray_replies for relay in self.relays)
            + (shared.stray_replies if shared is not None else 0),
            oauth_tokens=oauth_tokens(listeners),
            idle_stops=self.idle_stops,
        )


def oauth_tokens(listeners: Sequence[MessageListener]) -> dict[tuple[str, str], int]:
    """The OAuth outcome counts of ``listeners``, by ``(listener address, outcome)``.

    The sockets of one HTTP address share one verifier: its counts are listed once, under the
    first one's address.
    """
    counts: dict[tuple[str, str], int] = {}
    seen: set[int] = set()
    for listener in listeners:
        outcomes = listener.oauth_outcomes
        if outcomes is None or id(outcomes) in seen:
            continue
        seen.add(id(outcomes))
        for outcome, count in outcomes.items():
            counts[listener.address, outcome] = count
    return counts


def evicted(client: MessageChannel) -> bool:
    """Whether ``client`` is an HTTP session evicted at the session cap (its ``evicted`` flag)."""
    return getattr(client, "evicted", False) is True
