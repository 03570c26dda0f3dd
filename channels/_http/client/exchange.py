"""The HTTP exchanges behind :class:`~channels._http.client.channel.HttpClientChannel`.

One :class:`Exchange` per request the stdio client sends: a POST whose response (a JSON body, or an
event stream of related notifications and requests ending with the reply) is read until the reply
arrives. :class:`Exchanges` runs them, and the other HTTP conversations of a Streamable HTTP client:
POSTs of notifications and replies (answered 202), the legacy era's resumption of broken streams
(GET with ``Last-Event-ID``), session renewal after a 404 and the session's end (DELETE); the
session's standalone GET stream is :mod:`channels._http.client.standalone`.

Whatever happens, an exchange ends with exactly one answer for its request (the server's reply, or
an error reply from :mod:`channels._mcp.client`), unless the client cancelled the request.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import attrs
import h11
import trio

from ..._core.errors import MessageTooLarge, ProtocolError
from ..._core.jsonrpc import JSONObject, RequestId, decode, encode
from ..._core.options import ConnectOptions
from ..._mcp.client import (
    ACCEPT_BOTH,
    SESSION_HEADER,
    header,
    is_reply_to,
    media_type,
    no_reply,
    status_reply,
    valid_session_id,
)
from ..._mcp.params import ToolHeaders
from ..._sockets.endpoint import Endpoint
from .conn import ConnectionPool, HttpConnection, HttpFailure
from .session import LegacySession
from .standalone import StandaloneStream
from .stream import StreamPosition, read_stream, reconnect_delay

logger = logging.getLogger("channels.http.client")

Item = JSONObject | ProtocolError
"""What the channel's ``receive`` hands out: a message, or the error of one bad message."""
Deliver = Callable[[Item], Awaitable[None]]

USER_AGENT = "mcp-bridge"

MAX_SESSION_RENEWALS = 2
"""How often one message may renew the legacy session after a 404 before it is answered with an
error: one renewal is the normal case (the server restarted); a second covers a restart during the
first; more means the server loses sessions as fast as it makes them."""

MAX_RESUME_FAILURES = 3
"""Consecutive resumption attempts (GET with ``Last-Event-ID``) that may bring nothing new before a
request is answered with an error; one that brings events resets the count, so a server that
closes its stream every few seconds during a long tool call (2025-11-25 polling) is followed."""

ACK_TIMEOUT = 30.0
"""Seconds a notification or reply POST may take to be accepted (202). Accepting needs no work, so
a server that takes longer is stuck; the message is then given up (logged), so that the stdio
client's next messages are not held behind it."""
REPLY_TAIL_TIMEOUT = 2.0
"""Seconds the rest of a response may take once the reply arrived (the server SHOULD end the stream
then); after that the connection is closed instead of being kept for reuse."""
ERROR_BODY_BYTES = 64 * 1024
"""The most of an error response's body read (for its JSON-RPC error); a longer one is ignored."""


@attrs.define(eq=False)
class Exchange:
    """One request of the stdio client and the state of its answer.

    Attributes:
        request_id: the request's id.
        method: the request's method.
        modern: a 2026-07-28 request (cancelled by closing its response stream).
        listen: a ``subscriptions/listen`` request (its stream lasts until cancelled).
        swallow: keep the answer in :attr:`reply` instead of delivering it (a replayed
            ``initialize``).
        on_answer: called with the answer just before it is delivered.
        answered: the answer was delivered (or kept).
        abandoned: the client cancelled the request: no answer is owed, and reading stops.
        session_id: the ``Mcp-Session-Id`` of the response, if any.
        reply: the answer, when :attr:`swallow` is set.
    """

    request_id: RequestId
    method: str = ""
    modern: bool = False
    listen: bool = False
    swallow: bool = False
    on_answer: Callable[[Item], None] | None = None
    answered: bool = False
    abandoned: bool = False
    session_id: str | None = None
    reply: Item | None = None
    _reading: trio.CancelScope | None = None

    @property
    def settled(self) -> bool:
        """Nothing more is owed: answered or abandoned."""
        return self.answered or self.abandoned

    def abandon(self) -> None:
        """The client cancelled the request: stop reading its response, owe it nothing."""
        self.abandoned = True
        if self._reading is not None:
            self._reading.cancel()

    @contextmanager
    def reading(self) -> Iterator[trio.CancelScope]:
        """A cancel scope around one HTTP exchange of this request, cancelled by :meth:`abandon`."""
        scope = trio.CancelScope()
        if self.abandoned:
            scope.cancel()
        self._reading = scope
        try:
            with scope:
                yield scope
        finally:
            self._reading = None


class _StreamBroken(Exception):
    """An event stream cannot be read further (an oversized event, bad UTF-8); already answered."""


@attrs.define(eq=False)
class Exchanges:
    """Runs the HTTP side of one channel: requests, notifications, streams, renewals.

    Args:
        endpoint: the MCP endpoint.
        options: the bearer token and ``max_message_bytes`` (bodies and events).
        pool: the connections.
        session: the legacy session state.
        deliver: hands an item to the channel's receive queue (in order of arrival).
    """

    endpoint: Endpoint
    options: ConnectOptions
    pool: ConnectionPool
    session: LegacySession
    deliver: Deliver
    tool_headers: ToolHeaders = attrs.field(factory=ToolHeaders)

    def headers(self, accept: str, *more: tuple[str, str]) -> list[tuple[str, str]]:
        """The headers every request carries, then ``more``."""
        headers = [("Host", self.endpoint.authority), ("User-Agent", USER_AGENT), ("Accept", accept)]
        if self.options.token is not None:
            headers.append(("Authorization", f"Bearer {self.options.token}"))
        headers.extend(more)
        return headers

    # -- requests ---------------------------------------------------------------------------------

    async def answer(self, exchange: Exchange, item: Item) -> None:
        """Settle ``exchange`` with ``item`` (unless it is settled already)."""
        if exchange.settled:
            return
        exchange.answered = True
        if exchange.method == "tools/list" and isinstance(item, dict):
            self.tool_headers.learn(item.get("result"))
        if exchange.on_answer is not None:
            exchange.on_answer(item)
        if exchange.swallow:
            exchange.reply = item
        else:
            await self.deliver(item)

    async def post_request(
        self,
        message: JSONObject,
        body: bytes,
        headers: list[tuple[str, str]],
        exchange: Exchange,
        on_sent: Callable[[], object],
    ) -> bool:
        """POST one request and read its response until the reply.

        Returns whether the server answered 404 to the session id the request carried: the caller
        renews the session and retries (nothing was delivered).

        The exchange is answered on every other path, or abandoned. A legacy event stream that
        ends before the reply is resumed (GET with ``Last-Event-ID``) if the server gave its events
        ids. Cancel-safe only in the sense that a cancelled call leaves the exchange unsettled.
        """
        request_headers = self.headers(ACCEPT_BOTH, ("Content-Type", "application/json"), *headers)
        with_session = any(name == SESSION_HEADER for name, _ in headers)
        position = StreamPosition()
        failure, reason = "the response ended without the reply", "no-reply"
        try:
            with exchange.reading():
                async with self.pool.request("POST", request_headers, body, on_sent=on_sent) as (
                    conn,
                    response,
                ):
                    if response.status_code == 404 and with_session:
                        await conn.read_body(ERROR_BODY_BYTES)
                        return True
                    exchange.session_id = valid_session_id(header(response.headers, b"mcp-session-id"))
                    await self._read_response(conn, response, exchange, position)
        except HttpFailure as exc:
            failure, reason = str(exc), "connection-failed"
        except _StreamBroken:
            return False
        if not exchange.settled and with_session and position.last_event_id is not None:
            await self._resume(exchange, position, headers)
        if not exchange.settled:
            await self.answer(exchange, no_reply(exchange.request_id, failure, reason=reason))
        return False

    async def _read_response(
        self, conn: HttpConnection, response: h11.Response, exchange: Exchange, position: StreamPosition
    ) -> None:
        status, media = response.status_code, media_type(response.headers)
        if not 200 <= status < 300:
            body = await conn.read_body(ERROR_BODY_BYTES)
            phrase = response.reason.decode("latin-1", "replace")
            await self.answer(exchange, status_reply(exchange.request_id, status, phrase, body, media))
        elif media == "application/json":
            limit = self.options.max_message_bytes
            data = await conn.read_body(limit)
            if data is None:
                await self.answer(exchange, _too_large(exchange.request_id, limit, "reply"))
            else:
                await self._take(exchange, data)
        elif media == "text/event-stream":
            await self._read_events(conn, exchange, position)
        else:
            what = f"HTTP {status} with {media or 'no content type'}"
            await self.answer(
                exchange, no_reply(exchange.request_id, f"the server answered {what}", status=status)
            )

    async def _read_events(self, conn: HttpConnection, exchange: Exchange, position: StreamPosition) -> None:
        """Deliver a request's stream until its reply (then finish the response briefly)."""

        async def take(data: str) -> bool:
            await self._take(exchange, data)
            return exchange.answered

        try:
            await read_stream(conn, self.options.max_message_bytes, position, take)
        except ValueError as exc:
            if "longer than" in str(exc):  # EventDecoder's size limit; otherwise bad UTF-8
                await self.answer(
                    exchange, _too_large(exchange.request_id, self.options.max_message_bytes, "event")
                )
            else:
                await self.answer(exchange, no_reply(exchange.request_id, str(exc), reason="invalid-stream"))
            raise _StreamBroken from None
        if exchange.answered:
            with trio.move_on_after(REPLY_TAIL_TIMEOUT):
                while await conn.receive_data():
                    pass  # the server SHOULD end the stream after the reply; anything more is dropped

    async def _take(self, exchange: Exchange, data: bytes | str) -> None:
        """One message of a request's response: its reply answers it, others are delivered."""
        try:
            message = decode(data)
        except ProtocolError as exc:
            logger.warning("invalid message from %s: %s", self.endpoint, exc)
            if not exchange.swallow:
                await self.deliver(exc)
            return
        if is_reply_to(message, exchange.request_id):
            await self.answer(exchange, message)
        elif exchange.swallow:
            logger.debug("dropped %s sent during a replayed initialize", message.get("method", "a reply"))
        else:
            await self.deliver(message)

    async def _resume(
        self, exchange: Exchange, position: StreamPosition, headers: list[tuple[str, str]]
    ) -> None:
        """Follow a request's broken stream with GET + ``Last-Event-ID`` until the reply."""
        failures = 0
        detail = "the event stream ended before the reply"
        while not exchange.settled and failures <= MAX_RESUME_FAILURES:
            await trio.sleep(reconnect_delay(position, failures))
            before = position.last_event_id
            assert before is not None
            logger.debug("resuming the stream of request %r after event %s", exchange.request_id, before)
            get_headers = self.headers("text/event-stream", *headers, ("Last-Event-ID", before))
            try:
                with exchange.reading():
                    async with self.pool.request("GET", get_headers) as (conn, response):
                        status = response.status_code
                        if status == 404:
                            await self.answer(
                                exchange,
                                no_reply(
                                    exchange.request_id, "the server ended the session", reason="session-lost"
                                ),
                            )
                            return
                        if status == 200 and media_type(response.headers) == "text/event-stream":
                            await self._read_events(conn, exchange, position)
                        else:
                            detail = f"resuming the event stream: HTTP {status}"
            except HttpFailure as exc:
                detail = f"resuming the event stream: {exc}"
            except _StreamBroken:
                return
            failures = 0 if position.last_event_id != before else failures + 1
        if not exchange.settled:
            await self.answer(exchange, no_reply(exchange.request_id, detail))

    # -- notifications and replies ------------------------------------------------------------------

    async def post_message(self, body: bytes, headers: list[tuple[str, str]]) -> int:
        """POST a notification or a reply; return the status (202 when accepted).

        Raises:
            HttpFailure: no connection, or it failed before the status arrived.
        """
        request_headers = self.headers(ACCEPT_BOTH, ("Content-Type", "application/json"), *headers)
        async with self.pool.request("POST", request_headers, body) as (conn, response):
            await conn.read_body(ERROR_BODY_BYTES)
            return response.status_code

    # -- the legacy session -----------------------------------------------------------------------

    async def renew(self, generation: int) -> None:
        """Renew the legacy session of ``generation`` (see :meth:`LegacySession.renew`).

        Raises:
            HttpFailure: the server could not be reached or refused the replayed messages.
        """
        await self.session.renew(generation, self._replay, self._notify)

    async def _replay(self, initialize: JSONObject) -> tuple[str | None, str | None]:
        exchange = Exchange(initialize["id"], "initialize", swallow=True)
        await self.post_request(initialize, encode(initialize)[:-1], [], exchange, lambda: None)
        reply = exchange.reply
        result = reply.get("result") if isinstance(reply, dict) else None
        if not isinstance(result, dict):
            raise HttpFailure(f"the server refused the repeated initialize: {reply}")
        version = result.get("protocolVersion")
        return exchange.session_id, version if isinstance(version, str) else None

    async def _notify(self, message: JSONObject, headers: list[tuple[str, str]]) -> None:
        status = await self.post_message(encode(message)[:-1], headers)
        if not 200 <= status < 300:
            raise HttpFailure(f"the server refused the repeated {message['method']}: HTTP {status}")

    async def listen_standalone(self) -> None:
        """Keep the session's standalone GET stream open and deliver what it carries.

        See :class:`~channels._http.client.standalone.StandaloneStream`; runs until cancelled.
        """
        await StandaloneStream(
            self.endpoint,
            self.pool,
            self.session,
            self.headers,
            self.renew,
            self.deliver,
            self.options.max_message_bytes,
        ).listen()

    async def delete_session(self) -> None:
        """End the legacy session (DELETE), best effort: failures are logged, not raised."""
        if self.session.session_id is None:
            return
        headers = self.headers("*/*", *self.session.headers_now())
        self.session.session_id = None
        try:
            async with self.pool.request("DELETE", headers) as (conn, response):
                await conn.read_body(ERROR_BODY_BYTES)
                logger.debug("session ended: HTTP %d", response.status_code)
        except (HttpFailure, trio.ClosedResourceError) as exc:
            logger.debug("could not end the session: %s", exc)


def _too_large(request_id: RequestId, limit: int, what: str) -> MessageTooLarge:
    return MessageTooLarge(
        f"the server's {what} is over {limit} bytes", limit=limit, prefix=b"", request_id=request_id
    )
