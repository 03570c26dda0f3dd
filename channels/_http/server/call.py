"""One HTTP request being answered, and how a route refuses it (shared by the HTTP routes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import trio

from ..._core.channel import ExchangeHandler, MessageChannel, PeerInfo
from ..._core.listener import IncomingHandler
from ..._core.oauth import Principal
from ..._core.virtual import VirtualIncoming
from ..._mcp.admission import HttpRefusal
from .conn import HttpConnection
from .request import Request

Headers = Sequence[tuple[bytes, bytes]]


class Refused(Exception):
    """Raised by a route, before it answered anything, to answer with ``refusal`` instead."""

    def __init__(self, refusal: HttpRefusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


def refuse(status: int, code: int, message: str, reason: str, request_id: Any = None) -> Refused:
    """A :class:`Refused` with a JSON-RPC error body (``data.reason``)."""
    return Refused(HttpRefusal(status, code, message, reason, request_id=request_id))


def method_not_allowed(allow: bytes, detail: str = "") -> Refused:
    """A 405 naming the methods the path takes."""
    message = f"Method Not Allowed: {detail}" if detail else "Method Not Allowed"
    return Refused(HttpRefusal(405, -32000, message, "method-not-allowed", headers=((b"allow", allow),)))


@attrs.define(eq=False)
class HttpCall:
    """One request being answered, with what a route needs to answer it; nothing changes it once made.

    Not an ``attrs.frozen`` class: a frozen ``__init__`` sets each field through
    ``object.__setattr__``, a measurable part of a small request's cost.

    Attributes:
        connection: the client's connection; the request's response is its current one.
        request: the request.
        address: what the connection knows of the client (its address).
        credential: the label of the token it presented (a static token's, or an OAuth
            principal's), if the listener asks for one.
        handler: the bridge's handler for new channels.
        nursery: where the bridge's handlers run.
        cors: headers every response to it carries (CORS, if the Origin is allowed).
        principal: who its OAuth access token names, if it presented one.
        exchanges: the bridge's handler of a request that is a channel of its own, in this
            request's task, if it gave one.
    """

    connection: HttpConnection
    request: Request
    address: PeerInfo
    credential: str | None
    handler: IncomingHandler
    nursery: trio.Nursery
    cors: tuple[tuple[bytes, bytes], ...] = ()
    principal: Principal | None = None
    exchanges: ExchangeHandler | None = None

    def owns(self, peer: PeerInfo) -> bool:
        """Whether the session or stream opened by ``peer`` is this request's client's own.

        The same static token, or an OAuth token naming the same issuer, subject, client and
        scopes (a session is bound to its identity: the spec's "Session Hijacking" practice).
        """
        return peer.credential == self.credential and peer.principal == self.principal

    @property
    def peer(self) -> PeerInfo:
        """Who sent it: address, ``Origin``, ``User-Agent``, the token's label.

        Worked out when asked (a new session, request or stream, a log line), not for every
        request of a session.
        """
        origin = self.request.header(b"origin")
        agent = self.request.header(b"user-agent")
        return attrs.evolve(
            self.address,
            credential=self.credential,
            principal=self.principal,
            origin=origin.decode("latin-1") if origin else None,
            user_agent=agent.decode("latin-1") if agent else None,
        )

    def start(self, channel: MessageChannel) -> None:
        """Hand ``channel`` to the bridge, as a new connection of its own."""
        self.nursery.start_soon(self.handler, VirtualIncoming(channel))

    async def respond(self, status: int, headers: Headers = (), body: bytes = b"") -> None:
        """A whole response, with the CORS headers."""
        await self.connection.respond(status, [*headers, *self.cors], body)

    def allow(self, methods: bytes) -> bytes:
        """An ``Allow`` value: ``methods``, plus OPTIONS where CORS preflights are answered."""
        return methods + b", OPTIONS" if self.cors else methods
