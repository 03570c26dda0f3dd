"""The WebSocket opening handshake, the server's side: reading an upgrade request and answering it.

The handshake is the ``websockets`` library's (HTTP parsing, ``Sec-WebSocket-Accept``,
subprotocol choice); this module moves its bytes. The subprotocol ``mcp`` is offered by our
client and chosen by our server when the client offers it; a client that offers none is served all
the same. Before a request is accepted, :class:`~channels._core.guard.RequestGuard` checks Host,
Origin and the bearer token (with OAuth, :mod:`channels._ws.oauth` checks the token), and a wrong
path gets 404. The client's side is :mod:`channels._ws.dial`, loaded only by a client.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from http import HTTPStatus
from typing import TYPE_CHECKING

import attrs
import trio
from websockets.datastructures import Headers
from websockets.http11 import Request, Response
from websockets.server import ServerProtocol
from websockets.typing import Subprotocol

from .._core.channel import PeerInfo
from .._core.fdio import RECEIVE_SIZE
from .._core.guard import Rejection, RequestGuard
from .._core.listener import CredentialsRefused, HandshakeError
from .channel import WebSocketChannel

if TYPE_CHECKING:  # a listener with OAuth settings has loaded them; others never do
    from .._core.oauth import Principal
    from .oauth import WsOAuth, WsRefusal

# The websockets library logs every handshake at INFO; the daemon already logs each connection,
# so its own logger is kept at WARNING (set "channels.websocket.wire" to DEBUG for a frame trace).
wire_logger = logging.getLogger("channels.websocket.wire")
wire_logger.setLevel(logging.WARNING)


class _RedactCredentials(logging.Filter):
    """At DEBUG, websockets logs every handshake header (``"< %s: %s"``): never the token."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if (
            isinstance(args, tuple)
            and len(args) == 2
            and isinstance(args[0], str)
            and args[0].lower() in ("authorization", "cookie", "proxy-authorization")
        ):
            record.args = (args[0], "[redacted]")
        return True


wire_logger.addFilter(_RedactCredentials())

SUBPROTOCOL = Subprotocol("mcp")
# What ends an HTTP/1.1 request's header section (RFC 9112 §2.1; websockets wants CRLF).
END_OF_HEADERS = b"\r\n\r\n"


@attrs.frozen
class Upgrade:
    """An upgrade request read off a connection, not answered yet.

    Attributes:
        protocol: the server's ``websockets`` protocol, which read it.
        request: the request.
        received: the bytes that followed it in its last read (frames of an impatient client).
    """

    protocol: ServerProtocol
    request: Request
    received: bytes

    @property
    def target(self) -> str:
        """The request target as sent."""
        return self.request.path


async def read_upgrade(stream: trio.abc.Stream, max_message_bytes: int) -> Upgrade:
    """Read an upgrade request on ``stream`` (a non-HTTP one is answered 400 before this raises).

    ``max_message_bytes`` is the channel's message limit (the protocol's ``max_size``); whoever
    answers it may set another (``protocol.max_message_size``) before the first frame.

    Raises:
        HandshakeError: the peer left, or sent no valid HTTP request.
    """
    protocol = ServerProtocol(
        max_size=max_message_bytes,
        select_subprotocol=_select_subprotocol,
        logger=wire_logger,
    )
    request, received = await _read_request(stream, protocol)
    return Upgrade(protocol, request, received)


async def refuse_upgrade(stream: trio.abc.Stream, upgrade: Upgrade, rejection: Rejection) -> None:
    """Answer ``upgrade`` with ``rejection`` (its status, JSON body and headers).

    Raises:
        HandshakeError: the connection was lost while answering.
    """
    await _send_response(stream, upgrade.protocol, _rejection(upgrade.protocol, rejection))


async def accept_upgrade(
    stream: trio.abc.Stream,
    peer: PeerInfo,
    path: str | None,
    guard: RequestGuard,
    max_message_bytes: int,
    oauth: WsOAuth | None = None,
    upgrade: Upgrade | None = None,
) -> WebSocketChannel:
    """Read the upgrade request on ``stream``, check it, answer it; return the open channel.

    A request for another path than ``path`` gets 404, one ``guard`` refuses (Host, Origin, token)
    its status; either way the peer is answered before this raises. The channel owns ``stream``
    once returned; until then the caller does, and closes it on failure.

    Args:
        stream: the connection, past its TLS handshake for ``wss``.
        peer: what is known of the peer; the channel's adds ``Origin``, ``User-Agent`` and the
            token's label (and the OAuth principal).
        path: the endpoint's path; ``None`` when the request was routed by it already.
        guard: the Host, Origin and bearer token checks.
        max_message_bytes: the channel's message limit (the protocol's ``max_size``).
        oauth: the OAuth check, after ``guard`` (which then checks Host and Origin only).
        upgrade: the request, if it was read already (by a shared host, to route it).

    Raises:
        CredentialsRefused: refused for its token (401, or 403 for a missing scope).
        HandshakeError: the peer left, sent no valid upgrade request, or was refused otherwise.
    """
    if upgrade is None:
        upgrade = await read_upgrade(stream, max_message_bytes)
    else:
        upgrade.protocol.max_message_size = max_message_bytes
    protocol, request, received = upgrade.protocol, upgrade.request, upgrade.received
    origins = request.headers.get_all("Origin")
    agents = request.headers.get_all("User-Agent")
    peer = attrs.evolve(
        peer, origin=origins[0] if origins else None, user_agent=agents[0] if agents else None
    )
    # A refusal, or the credential: a static token's label, an OAuth principal, or none.
    refusal: Rejection | WsRefusal | None = None
    credential: Principal | str | None = None
    if path is not None and request.path.partition("?")[0] != path:
        refusal = Rejection(404, "not-found", f"Not Found: the MCP endpoint is {path}")
    else:
        hosts = request.headers.get_all("Host")
        outcome = guard.check(hosts[0] if len(hosts) == 1 else None, _raw_headers(request.headers))
        if isinstance(outcome, Rejection):
            refusal = outcome
        elif oauth is not None:
            refusal, credential = oauth.sort(await oauth.check(_raw_headers(request.headers)))
        else:
            credential = outcome
    if refusal is not None:
        await _send_response(stream, protocol, _rejection(protocol, refusal))
        detail = refusal.message if isinstance(refusal, Rejection) else refusal.log_text()
        refused = CredentialsRefused if _for_credentials(refusal) else HandshakeError
        raise refused(f"upgrade refused with {refusal.status}: {detail}")
    response = protocol.accept(request)
    await _send_response(stream, protocol, response)
    if response.status_code != 101:
        raise HandshakeError(
            f"not a valid WebSocket upgrade ({protocol.handshake_exc}); answered {response.status_code}"
        )
    if isinstance(credential, str):
        peer = attrs.evolve(peer, credential=credential)
    elif credential is not None:
        peer = attrs.evolve(peer, credential=credential.label, principal=credential)
    return WebSocketChannel(stream, protocol, peer, max_message_bytes, received)


def _select_subprotocol(protocol: ServerProtocol, offered: Sequence[Subprotocol]) -> Subprotocol | None:
    """``mcp`` if the client offers it; otherwise no subprotocol (not a refusal)."""
    return SUBPROTOCOL if SUBPROTOCOL in offered else None


def _raw_headers(headers: Headers) -> list[tuple[bytes, bytes]]:
    return [
        (name.lower().encode("latin-1", "replace"), value.encode("latin-1", "replace"))
        for name, value in headers.raw_items()
    ]


async def _read_request(stream: trio.abc.Stream, protocol: ServerProtocol) -> tuple[Request, bytes]:
    """Read until the upgrade request is complete; return it and the bytes that followed it.

    The library gets the request's bytes only: frames sent before the answer (the client should
    wait for it, RFC 6455 §4.1) are the channel's to read, from a frame boundary.

    Raises:
        HandshakeError: the peer left, or sent something that is not an HTTP request (it was
            answered with 400, or 431/414 for oversized headers).
    """
    tail = b""  # the last bytes read, for an end of headers split between two reads
    while True:
        try:
            data = await stream.receive_some(RECEIVE_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise HandshakeError(f"connection lost before the upgrade request: {exc}") from None
        if not data:
            raise HandshakeError("connection closed before a complete upgrade request")
        end = (tail + data).find(END_OF_HEADERS)
        cut = len(data) if end < 0 else end + len(END_OF_HEADERS) - len(tail)
        protocol.receive_data(data[:cut])
        tail = (tail + data)[-(len(END_OF_HEADERS) - 1) :]
        for event in protocol.events_received():
            if isinstance(event, Request):
                return event, bytes(data[cut:])
        if protocol.handshake_exc is not None:
            pending = [chunk for chunk in protocol.data_to_send() if chunk]
            if not pending:
                # Not an HTTP request at all: websockets has only ended its side (send_eof), so it
                # must not send a response (a second send_eof fails its assertion); this does.
                pending = [protocol.reject(400, "Bad Request: not an HTTP request\n").serialize()]
            await _send_response(stream, protocol, None, pending)
            raise HandshakeError(f"not an upgrade request: {protocol.handshake_exc}")


def _for_credentials(outcome: Rejection | WsRefusal) -> bool:
    """Whether the upgrade was refused for its token (401, or OAuth's 403 insufficient scope).

    A 403 of the guard is the Host or the Origin, and OAuth's 503 an unreachable issuer: not the
    client's credentials.
    """
    if isinstance(outcome, Rejection):
        return outcome.status == HTTPStatus.UNAUTHORIZED
    return outcome.status in (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN)


def _rejection(protocol: ServerProtocol, rejection: Rejection | WsRefusal) -> Response:
    if isinstance(rejection, Rejection):
        body = rejection.body().decode()
        headers = [(name.decode(), value.decode()) for name, value in rejection.headers()]
    else:
        body, headers = rejection.body(), rejection.headers()
    response = protocol.reject(rejection.status, body)
    del response.headers["Content-Type"]
    for name, value in headers:
        response.headers[name] = value
    return response


async def _send_response(
    stream: trio.abc.Stream,
    protocol: ServerProtocol,
    response: Response | None,
    pending: Sequence[bytes] = (),
) -> None:
    """Send the handshake response (and anything the protocol queued before it)."""
    if response is not None:
        protocol.send_response(response)
    data = b"".join([*pending, *protocol.data_to_send()])
    try:
        await stream.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        raise HandshakeError(f"connection lost while answering the upgrade: {exc}") from None
