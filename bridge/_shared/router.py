"""Shared mode's routing core, sans-IO: many clients' messages onto one child, and back.

Every request a client sends is given a fresh integer *wire id* before it reaches the child, so two
clients may both use id ``1`` (or ``"1"``, or ``"a:1"``) at once. One table, keyed by wire id, then
answers every question the child's output raises:

* a reply carries the wire id: it goes to the client that sent the request, with the original id
  restored exactly (same value, same JSON type);
* a request's ``params._meta.progressToken`` is rewritten to its wire id (unique among requests in
  flight, as the spec asks of tokens), so ``notifications/progress`` names the request it belongs
  to and goes back with the client's own token;
* a ``subscriptions/listen`` request's id *is* the subscription id (2026-07-28), so notifications
  tagged ``_meta["io.modelcontextprotocol/subscriptionId"]`` go to the subscriber with its id
  restored; the acknowledgement and the final result follow the same rule;
* a client's ``notifications/cancelled`` is remapped to the wire id, and only for a request of its
  own in flight: a client cannot cancel, or even name, another client's request.

Requests from the child to a client (legacy sampling, roots, elicitation, ping) get a fresh
client-facing id too, remembered with the client they were sent to, so only that client's response
goes back, with the child's id restored.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Any, TypeAlias

import attrs

from channels import JSONObject, RequestId, is_request_id

from .._relay.inflight import DuplicateRequest, TooManyRequests

ClientKey: TypeAlias = int
"""How the router names a client: any number the caller gives each connection."""

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"

_NO_TOKEN = object()

# Wire ids of requests the bridge stopped waiting for (cancelled, timed out, their client gone),
# remembered so that the child's late reply to one is told from a stray one (a duplicate, an
# unknown id). Four times inflight.REMEMBERED_CANCELLATIONS: one child serves many clients.
FORGOTTEN_WIRE_IDS = 1024


def subscription_meta(message: JSONObject) -> dict[str, Any] | None:
    """The ``_meta`` of a notification tagged with a subscription id, open or over; else None."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta if isinstance(meta, dict) and SUBSCRIPTION_ID in meta else None


# Not attrs.frozen: a frozen __init__ sets each field through object.__setattr__, a measurable part
# of a request's cost here (one _Pending per request); nothing changes one once made.
@attrs.define(eq=False)
class _Pending:
    client: ClientKey
    request_id: RequestId
    token: Any  # the client's progressToken, or _NO_TOKEN
    lists_tools: bool  # a tools/list: per-tool scopes filter its reply for its client


@attrs.frozen
class Detached:
    """What is left of a client that went away.

    Attributes:
        cancel: wire ids of its requests still in flight: cancel them at the child.
        refuse: ids of the child's requests it had been sent: answer them with an error.
    """

    cancel: tuple[int, ...]
    refuse: tuple[RequestId, ...]


# A client that left nothing behind (the usual end of a 2026-07-28 request: its reply came).
NOTHING_LEFT = Detached((), ())


class Router:
    """Maps ids between clients and the one child they share.

    Args:
        max_in_flight: requests one client may have in flight.
    """

    def __init__(self, max_in_flight: int) -> None:
        self.max_in_flight = max_in_flight
        self._next_wire = 1
        self._pending: dict[int, _Pending] = {}
        self._by_client: dict[ClientKey, dict[RequestId, int]] = {}
        self._next_outbound = 1
        self._outbound: dict[int, tuple[ClientKey, RequestId]] = {}  # client-facing → child's id
        self._forgotten: OrderedDict[int, None] = OrderedDict()

    def _forget(self, wires: Iterable[int]) -> None:
        for wire in wires:
            self._forgotten[wire] = None
        while len(self._forgotten) > FORGOTTEN_WIRE_IDS:
            self._forgotten.popitem(last=False)

    def is_late(self, wire: object) -> bool:
        """Whether a reply the router could not route answers a request the bridge forgot.

        True (once) for a request cancelled, timed out or whose client left: an expected race.
        False for a stray reply: a second reply to one request, or an id the child never got.
        """
        if type(wire) is int and wire in self._forgotten:
            del self._forgotten[wire]
            return True
        return False

    # -- clients ---------------------------------------------------------------------------------

    def attach(self, client: ClientKey) -> None:
        self._by_client[client] = {}

    def in_flight(self, client: ClientKey) -> int:
        return len(self._by_client.get(client, ()))

    @property
    def pending(self) -> int:
        """Requests in flight at the child, of every client."""
        return len(self._pending)

    def clients_in_flight(self) -> list[ClientKey]:
        """Clients with at least one request in flight, in attach order."""
        return [client for client, ids in self._by_client.items() if ids]

    def detach(self, client: ClientKey) -> Detached:
        """Forget a client; late replies to its requests will be dropped."""
        ids = self._by_client.pop(client, None)
        if not ids and not self._outbound:
            return NOTHING_LEFT  # one check, not two scans, per 2026-07-28 request
        cancel = tuple(ids.values()) if ids else ()
        for wire in cancel:
            del self._pending[wire]
        self._forget(cancel)
        mine = [outbound for outbound, (owner, _) in self._outbound.items() if owner == client]
        refuse = tuple(self._outbound.pop(outbound)[1] for outbound in mine)
        return Detached(cancel, refuse)

    def fail_all(self) -> list[tuple[ClientKey, RequestId]]:
        """The child is gone: every request in flight, to be answered with an error."""
        failed = [(pending.client, pending.request_id) for pending in self._pending.values()]
        self._pending.clear()
        for ids in self._by_client.values():
            ids.clear()
        self._outbound.clear()
        return failed

    # -- client to child -------------------------------------------------------------------------

    def client_request(self, client: ClientKey, message: JSONObject) -> JSONObject:
        """The child's copy of a client's request (its id and progress token rewritten).

        Raises:
            DuplicateRequest: the client already has a request with this id in flight.
            TooManyRequests: the client already has ``max_in_flight`` requests in flight.
        """
        ids = self._by_client[client]
        request_id = message["id"]
        if request_id in ids:
            raise DuplicateRequest(request_id)
        if len(ids) >= self.max_in_flight:
            raise TooManyRequests(request_id)
        wire = self._next_wire
        self._next_wire += 1
        routed = dict(message)
        routed["id"] = wire
        token = _NO_TOKEN
        params = message.get("params")
        if isinstance(params, dict):
            meta = params.get("_meta")
            if isinstance(meta, dict) and "progressToken" in meta:
                token = meta["progressToken"]
                routed["params"] = {**params, "_meta": {**meta, "progressToken": wire}}
        self._pending[wire] = _Pending(client, request_id, token, message["method"] == "tools/list")
        ids[request_id] = wire
        return routed

    def client_cancel(self, client: ClientKey, message: JSONObject) -> JSONObject | None:
        """The child's copy of a client's ``notifications/cancelled``.

        ``None`` if it names no request of this client in flight. The request is forgotten: a late
        reply is dropped.
        """
        params = message.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if not is_request_id(request_id):
            return None
        wire = self._by_client[client].pop(request_id, None)
        if wire is None:
            return None
        del self._pending[wire]
        self._forget((wire,))
        return {**message, "params": {**params, "requestId": wire}}  # type: ignore[dict-item]

    def client_response(self, client: ClientKey, message: JSONObject) -> JSONObject | None:
        """The child's copy of a client's response to a request the child sent it, or ``None``."""
        outbound = message["id"]
        entry = self._outbound.get(outbound) if type(outbound) is int else None
        if entry is None or entry[0] != client:
            return None
        del self._outbound[outbound]
        return {**message, "id": entry[1]}

    # -- child to client -------------------------------------------------------------------------

    def lists_tools(self, wire: object) -> bool:
        """Whether the request in flight with this wire id is a ``tools/list``."""
        pending = self._pending.get(wire) if type(wire) is int else None
        return pending is not None and pending.lists_tools

    def child_response(self, message: JSONObject) -> tuple[ClientKey, JSONObject] | None:
        """Who a reply of the child's belongs to, with the client's id.

        ``None``: nobody's (late, cancelled, or its client left).
        """
        wire = message["id"]
        pending = self._pending.pop(wire, None) if type(wire) is int else None
        if pending is None:
            return None
        del self._by_client[pending.client][pending.request_id]
        restored = {**message, "id": pending.request_id}
        result = message.get("result")
        meta = result.get("_meta") if isinstance(result, dict) else None
        if isinstance(meta, dict) and meta.get(SUBSCRIPTION_ID) == wire:
            # The end of a subscriptions/listen stream names its subscription too.
            restored["result"] = {**result, "_meta": {**meta, SUBSCRIPTION_ID: pending.request_id}}  # type: ignore[dict-item]
        return pending.client, restored

    def take(self, wire: int) -> tuple[ClientKey, RequestId] | None:
        """Forget a request in flight (it could not be delivered to the child); who sent it."""
        pending = self._pending.pop(wire, None)
        if pending is None:
            return None
        del self._by_client[pending.client][pending.request_id]
        self._forget((wire,))
        return pending.client, pending.request_id

    def client_ids(self, client: ClientKey) -> list[RequestId]:
        """The client's requests in flight (original ids)."""
        return list(self._by_client.get(client, ()))

    def take_client(self, client: ClientKey) -> list[RequestId]:
        """Forget every request the client has in flight; return their original ids.

        They are being answered by the bridge. The client stays attached.
        """
        ids = self._by_client.get(client, {})
        for wire in ids.values():
            del self._pending[wire]
        self._forget(ids.values())
        taken = list(ids)
        ids.clear()
        return taken

    def child_progress(self, message: JSONObject) -> tuple[ClientKey, JSONObject] | None:
        """``notifications/progress`` for the request whose token it carries, token restored."""
        params = message.get("params")
        wire = params.get("progressToken") if isinstance(params, dict) else None
        pending = self._pending.get(wire) if type(wire) is int else None
        if pending is None or pending.token is _NO_TOKEN:
            return None
        return pending.client, {**message, "params": {**params, "progressToken": pending.token}}  # type: ignore[dict-item]

    def child_subscription(self, message: JSONObject) -> tuple[ClientKey, JSONObject] | None:
        """A notification tagged with a subscription id: to the subscriber, id restored.

        ``None`` if it is not tagged, or the subscription is over.
        """
        meta = subscription_meta(message)
        if meta is None:
            return None
        wire = meta[SUBSCRIPTION_ID]
        pending = self._pending.get(wire) if type(wire) is int else None
        if pending is None:
            return None
        restored = {**meta, SUBSCRIPTION_ID: pending.request_id}
        return pending.client, {**message, "params": {**message["params"], "_meta": restored}}

    def child_cancel(self, message: JSONObject) -> tuple[ClientKey, JSONObject] | None:
        """The child cancels a request it sent a client: to that client, with its id."""
        params = message.get("params")
        child_id = params.get("requestId") if isinstance(params, dict) else None
        for outbound, (client, sent_id) in self._outbound.items():
            if sent_id == child_id and type(sent_id) is type(child_id):
                del self._outbound[outbound]
                return client, {**message, "params": {**params, "requestId": outbound}}  # type: ignore[dict-item]
        return None

    def child_request(self, client: ClientKey, message: JSONObject) -> JSONObject:
        """The client's copy of a request the child sends it (a fresh id, remembered)."""
        outbound = self._next_outbound
        self._next_outbound += 1
        self._outbound[outbound] = (client, message["id"])
        return {**message, "id": outbound}
