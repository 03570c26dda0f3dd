"""Moving messages between one client and a child: the per-connection relay and channel wrappers.

``relay`` is one client channel to one child with stdio semantics, wiring ``to_child`` (client →
child), ``to_client`` (child → client), ``writers`` (one per end), ``ledger`` (requests awaiting a
reply, and their timeouts), ``ending`` (why a connection ended, and the record of its first ending),
``unread`` (answering what the client had sent when it ended), ``idle`` (the idle timeout) and
``strays`` (replies to no request in flight, shared mode's too); ``scopes`` is the per-tool scopes
policy both modes apply, and ``cancellations`` the queue of timed-out requests' cancellations to the
child both modes write; ``inflight`` tracks which requests await a reply; ``wrapped`` is the base of
the channel wrappers ``peeked`` (messages read ahead), ``tap`` (a JSON Lines record) and
``requests`` (request metrics).

Import rule: ``channels``, ``bridge._errors``, ``bridge._limits`` and ``bridge._child``.
"""

from .ending import Ending
from .relay import Relay
from .scopes import ToolRule, ToolScopes

__all__ = ["Ending", "Relay", "ToolRule", "ToolScopes"]
