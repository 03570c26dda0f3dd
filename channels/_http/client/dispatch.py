"""Which HTTP exchange each message of the stdio client becomes (both MCP eras).

:class:`Dispatcher` is the policy half of :class:`~channels._http.client.channel.HttpClientChannel`:

* a request becomes a POST whose response is read until the reply
  (:meth:`Exchanges.post_request <channels._http.client.exchange.Exchanges.post_request>`). A modern one
  (``params._meta`` names its protocol version: :func:`~channels._mcp.headers.claimed_version`)
  carries the routing headers and no session; a legacy one carries the session's headers, waits
  while ``initialize`` is unanswered or the session is being renewed, and is retried on a
  renewed session after a 404;
* a request that finds every connection slot taken queues without holding up the sender (see
  :meth:`Dispatcher._admit`);
* ``notifications/cancelled`` for a modern request in flight closes that request's stream and is
  not POSTed; for a legacy one it is POSTed, then the request is abandoned;
* other notifications and replies are POSTed and must be accepted (202); once
  ``notifications/initialized`` is, the standalone GET stream is opened
  (:class:`~channels._http.client.standalone.StandaloneStream`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import attrs
import trio

from ..._core.jsonrpc import JSONObject, is_request_id
from ..._mcp.client import (
    SESSION_HEADER,
    modern_headers,
    no_reply,
    too_many_requests,
)
from ..._mcp.client import request_key as _key
from ..._mcp.headers import claimed_version
from .conn import ConnectionPool, HttpFailure
from .exchange import ACK_TIMEOUT, MAX_SESSION_RENEWALS, Exchange, Exchanges, Item
from .session import LegacySession

logger = logging.getLogger("channels.http.client")

MAX_QUEUED_REQUESTS = 64
"""Requests that may wait for a connection while every slot is taken (see ``_admit``); more are
answered at once with ``TOO_MANY_REQUESTS``. A stdio client rarely has more than a few requests
outstanding, and each queued one holds its body (up to the client's message limit) in memory."""

Spawn = Callable[..., None]
"""Start ``task(*args)`` among the channel's tasks, counted until it returns (``send_eof`` waits)."""


@attrs.define(eq=False)
class Dispatcher:
    """Turns the stdio client's messages into HTTP exchanges (see the module's description).

    Attributes:
        exchanges: the requests in flight, by id (JSON type kept apart).
        modern_version: the 2026-07-28-era version of the latest modern request, for the
            headers of modern notifications.
        ending: ``send_eof`` was called: no standalone stream may start.
    """

    http: Exchanges
    spawn: Spawn
    exchanges: dict[tuple[type, object], Exchange] = attrs.field(factory=dict)
    modern_version: str | None = None
    standalone: trio.CancelScope | None = None
    queued: int = 0
    ending: bool = False

    @property
    def session(self) -> LegacySession:
        """The legacy session state (shared with :attr:`http`)."""
        return self.http.session

    @property
    def pool(self) -> ConnectionPool:
        """The connections (shared with :attr:`http`)."""
        return self.http.pool

    def post(self, message: JSONObject, body: bytes, done: trio.Event) -> None:
        """POST a notification or a reply; ``done`` is set once it was accepted (or given up)."""
        self.spawn(self._post, message, body, done)

    def end(self) -> None:
        """``send_eof``: stop the streams that never end on their own (standalone, listen)."""
        self.ending = True
        if self.standalone is not None:
            self.standalone.cancel()
        for exchange in list(self.exchanges.values()):
            if exchange.listen:
                exchange.abandon()

    def start_request(self, message: JSONObject, body: bytes, done: trio.Event) -> None:
        """Start the exchange of a request; ``done`` is set once it is written, or queued.

        An ``initialize`` begins a new legacy session at once, before the caller's ``send``
        returns, so that the client's next messages wait for its session id.
        """
        method = message["method"]
        version = claimed_version(message)
        exchange = Exchange(
            message["id"], method, modern=version is not None, listen=method == "subscriptions/listen"
        )
        if version is not None:
            self.modern_version = version
        elif method == "initialize":
            self.session.begin(message)  # before send returns: later messages wait for the session
            generation = self.session.generation

            def established(answer: Item) -> None:
                reply = answer if isinstance(answer, dict) and "result" in answer else None
                self.session.established(generation, exchange.session_id if reply else None, reply)

            exchange.on_answer = established
        self.exchanges[_key(message["id"])] = exchange
        self.spawn(self._request, message, body, version, exchange, done)

    async def _request(
        self, message: JSONObject, body: bytes, version: str | None, exchange: Exchange, done: trio.Event
    ) -> None:
        try:
            if await self._admit(exchange, done):
                try:
                    await self._exchange(message, body, version, exchange, done)
                finally:
                    self.pool.long_exchanges.release()
        except HttpFailure as exc:
            await self.http.answer(exchange, no_reply(exchange.request_id, str(exc), reason="session-lost"))
        except trio.ClosedResourceError:
            pass  # the channel is closing
        finally:
            done.set()
            if exchange.on_answer is not None and not exchange.answered:
                exchange.on_answer(no_reply(exchange.request_id, "abandoned"))  # settles the session
            if self.exchanges.get(_key(exchange.request_id)) is exchange:
                del self.exchanges[_key(exchange.request_id)]

    async def _admit(self, exchange: Exchange, done: trio.Event) -> bool:
        """Take a connection slot for a request; return False if it was answered instead.

        When every slot is taken the request queues, and the sender is let go at once: it may
        have to send the very reply (to a server's sampling request, say) that a request holding
        a slot waits for. Past :data:`MAX_QUEUED_REQUESTS` queued, it is answered at once.
        """
        slots = self.pool.long_exchanges
        try:
            slots.acquire_nowait()
            return True
        except trio.WouldBlock:
            pass
        if self.queued >= MAX_QUEUED_REQUESTS:
            await self.http.answer(exchange, too_many_requests(exchange.request_id, MAX_QUEUED_REQUESTS))
            return False
        self.queued += 1
        done.set()
        try:
            await slots.acquire()
        finally:
            self.queued -= 1
        return True

    async def _exchange(
        self, message: JSONObject, body: bytes, version: str | None, exchange: Exchange, done: trio.Event
    ) -> None:
        http = self.http
        if version is not None:
            routing = modern_headers(message, version)
            if message["method"] == "tools/call":
                routing += http.tool_headers.headers_for(message.get("params"))
            await http.post_request(message, body, routing, exchange, done.set)
            return
        initialize = message["method"] == "initialize"
        for attempt in range(MAX_SESSION_RENEWALS + 1):
            if initialize:  # the start of a session carries none (and is never renewed)
                headers: list[tuple[str, str]] = []
                generation = self.session.generation
            else:
                headers, generation = await self.session.headers()
            if not await http.post_request(message, body, headers, exchange, done.set):
                return
            if attempt == MAX_SESSION_RENEWALS:
                break
            await http.renew(generation)
        await http.answer(
            exchange, no_reply(exchange.request_id, "the session keeps being lost", reason="session-lost")
        )

    def cancel(self, notification: JSONObject) -> bool:
        """Handle the client's ``notifications/cancelled`` here if no session needs to hear it.

        A modern request's response stream is closed (HTTP's way to cancel in 2026-07-28).
        Returns whether the notification is done with; if not, it is POSTed.
        """
        params = notification.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        exchange = self.exchanges.get(_key(request_id)) if is_request_id(request_id) else None
        if exchange is None:
            return not self.session.active  # nothing in flight: only a session may care
        if exchange.modern:
            logger.debug("cancelling request %r: closing its response stream", request_id)
            exchange.abandon()
            return True
        return False  # a legacy request: the server is told (then the request is abandoned)

    async def _post(self, message: JSONObject, body: bytes, done: trio.Event) -> None:
        """POST a notification or a reply and wait for it to be accepted (202)."""
        what = message.get("method") or f"the reply to {message.get('id')!r}"
        try:
            for attempt in range(MAX_SESSION_RENEWALS + 1):
                generation = None
                if self.session.active:
                    headers, generation = await self.session.headers()
                elif self.modern_version is not None and "method" in message:
                    headers = modern_headers(message, self.modern_version)
                else:
                    headers = []
                with trio.move_on_after(ACK_TIMEOUT) as timer:
                    status = await self.http.post_message(body, headers)
                if timer.cancelled_caught:
                    logger.warning("%s: not accepted within %gs; given up", what, ACK_TIMEOUT)
                    return
                sent_session = any(name == SESSION_HEADER for name, _ in headers)
                if (
                    status == 404
                    and sent_session
                    and generation is not None
                    and attempt < MAX_SESSION_RENEWALS
                ):
                    await self.http.renew(generation)
                    continue
                if not 200 <= status < 300:
                    logger.warning("%s: refused by the server with HTTP %d", what, status)
                else:
                    self._accepted(message)
                return
        except HttpFailure as exc:
            logger.warning("%s: not delivered: %s", what, exc)
        except trio.ClosedResourceError:
            pass
        finally:
            done.set()

    def _accepted(self, message: JSONObject) -> None:
        method = message.get("method")
        if method == "notifications/initialized" and self.session.active:
            self.session.initialized = message
            if self.standalone is None and not self.ending and self.session.session_id is not None:
                self.standalone = trio.CancelScope()
                self.spawn(self._run_standalone, self.standalone)
        elif method == "notifications/cancelled":
            params = message.get("params")
            request_id = params.get("requestId") if isinstance(params, dict) else None
            exchange = self.exchanges.get(_key(request_id)) if is_request_id(request_id) else None
            if exchange is not None:
                exchange.abandon()  # the server was told; the client expects no reply

    async def _run_standalone(self, scope: trio.CancelScope) -> None:
        try:
            with scope:
                await self.http.listen_standalone()
        except trio.ClosedResourceError:
            pass
