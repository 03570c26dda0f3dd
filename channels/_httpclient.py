"""The client end of MCP's Streamable HTTP transport, as a :class:`~channels.MessageChannel`.

``send(message)`` POSTs the message; ``receive()`` returns what the server sends back, in order of
arrival: replies and related messages from POST responses (a JSON body, or an event stream), and
in the legacy era the messages of the standalone GET stream. With it, ``mcp-bridge connect
http://...`` gives a stdio-only MCP client a Streamable HTTP server.

Both protocol eras, decided per message:

* **Legacy** (the client opened with ``initialize``, versions up to 2025-11-25): the server's
  ``Mcp-Session-Id`` and the negotiated ``MCP-Protocol-Version`` go on every later message; after
  ``notifications/initialized`` the standalone GET stream is opened (405: the server has none) and
  kept open; a request's event stream that breaks before its reply is resumed with
  ``Last-Event-ID``; a 404 for the session renews it transparently (:mod:`channels._httpsession`);
  ``send_eof`` and ``aclose`` end it with DELETE.
* **Modern** (a request with ``params._meta["io.modelcontextprotocol/protocolVersion"]``,
  2026-07-28): one self-contained POST per request with ``MCP-Protocol-Version``, ``Mcp-Method``
  and ``Mcp-Name``; no session. The client's ``notifications/cancelled`` for such a request closes
  its response stream, which is how HTTP cancels in 2026-07-28; it is not POSTed.

Every request gets exactly one answer: the server's reply, or an error reply with the request's id
when the server gave none (the table in :mod:`channels._mcphttp`), unless the client cancelled it.
So ``receive`` never raises ``BrokenResourceError``: a failing server fails requests one by one.

Authentication: ``open_http_client`` only checks that a connection can be opened; it cannot raise
:class:`~channels.AccessDenied`, because HTTP authenticates each request, and a refused token is
the answer to a request (code ``UNAUTHORIZED``, ``data.status`` 401 or 403).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import final

import trio

from ._address import ConnectOptions
from ._channel import MessageChannel, PeerInfo
from ._endpoint import Endpoint
from ._errors import InvalidMessage, ProtocolError
from ._httpconn import ConnectionPool, HttpFailure
from ._httpexchange import ACK_TIMEOUT, MAX_SESSION_RENEWALS, Exchange, Exchanges, Item
from ._httpsession import LegacySession
from ._jsonrpc import JSONObject, Kind, encode, is_request_id, validate
from ._mcphttp import (
    METHOD_HEADER,
    SESSION_HEADER,
    VERSION_HEADER,
    modern_headers,
    modern_version,
    no_reply,
    too_many_requests,
)
from ._mcphttp import request_key as _key
from ._tls import client_context
from ._unwrap import single_exception

logger = logging.getLogger("channels.http.client")

RECEIVE_QUEUE = 16
"""Messages received and not yet taken by ``receive``. When it is full, the tasks reading response
streams wait, and TCP flow control slows the server: memory stays bounded by this many messages
(plus one per open stream) of at most ``max_message_bytes`` each."""
MAX_QUEUED_REQUESTS = 64
"""Requests that may wait for a connection while every slot is taken (see ``_admit``); more are
answered at once with ``TOO_MANY_REQUESTS``. A stdio client rarely has more than a few requests
outstanding, and each queued one holds its body (up to the client's message limit) in memory."""
CLOSE_TIMEOUT = 2.0
"""Seconds ``aclose`` gives the DELETE that ends a legacy session (best effort)."""


@final
class HttpClientChannel(MessageChannel):
    """Messages to and from a Streamable HTTP MCP endpoint (see the module's description).

    Made by :func:`open_http_client`, which runs its background tasks; not constructed directly.

    ``send`` returns once the message is on the wire: a request's POST has been written (its
    answer comes through ``receive``), a notification's or reply's POST has been accepted. A
    request that finds every connection taken by other requests is queued instead and ``send``
    returns at once: the next message may be the reply a held request waits for (sampling,
    elicitation). A cancelled ``send`` may leave the message to be sent anyway, as the contract
    allows.

    ``send_eof`` ends the standalone stream and any ``subscriptions/listen`` stream (they never
    end on their own), and ``receive`` raises ``EndOfChannel`` once every other request has been
    answered and the legacy session has been ended (DELETE).

    :attr:`send_timeout` is not supported (it stays ``None``).
    """

    def __init__(self, endpoint: Endpoint, options: ConnectOptions, pool: ConnectionPool) -> None:
        self._peer = PeerInfo(endpoint.transport, endpoint.authority)
        self._queue_in, self._queue_out = trio.open_memory_channel[Item](RECEIVE_QUEUE)
        self._session = LegacySession()
        self._http = Exchanges(endpoint, options, pool, self._session, self._deliver)
        self._pool = pool
        self._exchanges: dict[tuple[type, object], Exchange] = {}
        self._modern_version: str | None = None
        self._tasks: trio.Nursery | None = None
        self._standalone: trio.CancelScope | None = None
        self._active = 0
        self._queued = 0
        self._quiet = trio.Event()
        self._quiet.set()
        self._closed = False
        self._eof = False
        self._sending = False
        self._receiving = False

    @property
    def peer(self) -> PeerInfo:
        """The server: transport ``http`` or ``https``, and its ``HOST:PORT``."""
        return self._peer

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the channel's background tasks until :meth:`aclose` (``open_http_client`` does)."""
        async with trio.open_nursery() as tasks:
            self._tasks = tasks
            task_status.started()
            await trio.sleep_forever()

    # -- receiving --------------------------------------------------------------------------------

    async def receive(self) -> JSONObject:
        """The next message from the server, in order of arrival.

        Cancel-safe: a cancelled receive loses no message.

        Raises:
            ProtocolError: the server sent something that is not one valid JSON-RPC message
                (:class:`~channels.MessageTooLarge` for a reply over ``max_message_bytes``, with
                the request's id); the channel stays usable.
            trio.EndOfChannel: after :meth:`send_eof`, once everything owed has arrived.
            trio.ClosedResourceError: this side closed the channel (also wakes a blocked receive).
            trio.BusyResourceError: another task is receiving.
        """
        if self._receiving:
            raise trio.BusyResourceError("another task is already receiving on this channel")
        if self._closed:
            raise trio.ClosedResourceError("channel was closed")
        self._receiving = True
        try:
            item = await self._queue_out.receive()
        except trio.ClosedResourceError:
            raise trio.ClosedResourceError("channel was closed") from None
        finally:
            self._receiving = False
        return _unpack(item)

    def receive_nowait(self) -> JSONObject:
        """A message that has already arrived, without waiting.

        Raises:
            trio.WouldBlock: nothing has arrived.
            Anything :meth:`receive` raises.
        """
        if self._receiving:
            raise trio.BusyResourceError("another task is already receiving on this channel")
        if self._closed:
            raise trio.ClosedResourceError("channel was closed")
        return _unpack(self._queue_out.receive_nowait())

    async def _deliver(self, item: Item) -> None:
        try:
            await self._queue_in.send(item)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            logger.debug("dropped a message that arrived after the channel was closed")

    # -- sending ----------------------------------------------------------------------------------

    async def send(self, value: JSONObject) -> None:
        """POST one message (see the class description for when it returns).

        Raises:
            ValueError: ``value`` is not a JSON-RPC message, or holds a string JSON cannot carry;
                nothing is sent.
            TypeError: ``value`` holds something that is not JSON data; nothing is sent.
            trio.ClosedResourceError: this side closed the channel, or called :meth:`send_eof`.
            trio.BusyResourceError: another task is sending.
        """
        if self._sending:
            raise trio.BusyResourceError("another task is already sending on this channel")
        try:
            kind = validate(value)
        except InvalidMessage as exc:
            raise ValueError(f"not a JSON-RPC message: {exc}") from None
        body = encode(value)[:-1]
        self._sending = True
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
            if self._closed:
                raise trio.ClosedResourceError("channel was closed")
            if self._eof:
                raise trio.ClosedResourceError("the sending direction was closed (send_eof)")
            done = trio.Event()
            if kind is Kind.REQUEST:
                self._start_request(value, body, done)
            elif value.get("method") == "notifications/cancelled" and self._cancel(value):
                done.set()
            else:
                self._spawn(self._post, value, body, done)
            await done.wait()
        finally:
            self._sending = False

    def _spawn(self, task: Callable[..., Awaitable[object]], *args: object) -> None:
        """Start a task that counts as activity: ``send_eof`` waits for it to call :meth:`_task_done`."""
        assert self._tasks is not None, "the channel's tasks are not running (use open_http_client)"
        self._active += 1
        if self._quiet.is_set():
            self._quiet = trio.Event()
        self._tasks.start_soon(task, *args)

    def _task_done(self) -> None:
        self._active -= 1
        if self._active == 0:
            self._quiet.set()

    def _start_request(self, message: JSONObject, body: bytes, done: trio.Event) -> None:
        method = message["method"]
        version = modern_version(message)
        exchange = Exchange(
            message["id"], method, modern=version is not None, listen=method == "subscriptions/listen"
        )
        if version is not None:
            self._modern_version = version
        elif method == "initialize":
            self._session.begin(message)  # before send returns: later messages wait for the session
            generation = self._session.generation

            def established(answer: Item) -> None:
                reply = answer if isinstance(answer, dict) and "result" in answer else None
                self._session.established(generation, exchange.session_id if reply else None, reply)

            exchange.on_answer = established
        self._exchanges[_key(message["id"])] = exchange
        self._spawn(self._request, message, body, version, exchange, done)

    async def _request(
        self, message: JSONObject, body: bytes, version: str | None, exchange: Exchange, done: trio.Event
    ) -> None:
        try:
            if await self._admit(exchange, done):
                try:
                    await self._exchange(message, body, version, exchange, done)
                finally:
                    self._pool.long_exchanges.release()
        except HttpFailure as exc:
            await self._http.answer(exchange, no_reply(exchange.request_id, str(exc), reason="session-lost"))
        except trio.ClosedResourceError:
            pass  # the channel is closing
        finally:
            done.set()
            if exchange.on_answer is not None and not exchange.answered:
                exchange.on_answer(no_reply(exchange.request_id, "abandoned"))  # settles the session
            if self._exchanges.get(_key(exchange.request_id)) is exchange:
                del self._exchanges[_key(exchange.request_id)]
            self._task_done()

    async def _admit(self, exchange: Exchange, done: trio.Event) -> bool:
        """Take a connection slot for a request; return False if it was answered instead.

        When every slot is taken the request queues, and the sender is let go at once: it may
        have to send the very reply (to a server's sampling request, say) that a request holding
        a slot waits for. Past :data:`MAX_QUEUED_REQUESTS` queued, it is answered at once.
        """
        slots = self._pool.long_exchanges
        try:
            slots.acquire_nowait()
            return True
        except trio.WouldBlock:
            pass
        if self._queued >= MAX_QUEUED_REQUESTS:
            await self._http.answer(exchange, too_many_requests(exchange.request_id, MAX_QUEUED_REQUESTS))
            return False
        self._queued += 1
        done.set()
        try:
            await slots.acquire()
        finally:
            self._queued -= 1
        return True

    async def _exchange(
        self, message: JSONObject, body: bytes, version: str | None, exchange: Exchange, done: trio.Event
    ) -> None:
        http = self._http
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
                generation = self._session.generation
            else:
                headers, generation = await self._session.headers()
            if not await http.post_request(message, body, headers, exchange, done.set):
                return
            if attempt == MAX_SESSION_RENEWALS:
                break
            await http.renew(generation)
        await http.answer(
            exchange, no_reply(exchange.request_id, "the session keeps being lost", reason="session-lost")
        )

    def _cancel(self, notification: JSONObject) -> bool:
        """Handle the client's ``notifications/cancelled`` here if no session needs to hear it.

        A modern request's response stream is closed (HTTP's way to cancel in 2026-07-28).
        Returns whether the notification is done with; if not, it is POSTed.
        """
        params = notification.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        exchange = self._exchanges.get(_key(request_id)) if is_request_id(request_id) else None
        if exchange is not None and exchange.modern:
            logger.debug("cancelling request %r: closing its response stream", request_id)
            exchange.abandon()
            return True
        return not self._session.active  # without a session there is nobody to tell

    async def _post(self, message: JSONObject, body: bytes, done: trio.Event) -> None:
        """POST a notification or a reply and wait for it to be accepted (202)."""
        what = message.get("method") or f"the reply to {message.get('id')!r}"
        try:
            for attempt in range(MAX_SESSION_RENEWALS + 1):
                generation = None
                if self._session.active:
                    headers, generation = await self._session.headers()
                elif self._modern_version is not None and "method" in message:
                    headers = [(VERSION_HEADER, self._modern_version), (METHOD_HEADER, message["method"])]
                else:
                    headers = []
                with trio.move_on_after(ACK_TIMEOUT) as timer:
                    status = await self._http.post_message(body, headers)
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
                    await self._http.renew(generation)
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
            self._task_done()

    def _accepted(self, message: JSONObject) -> None:
        method = message.get("method")
        if method == "notifications/initialized" and self._session.active:
            self._session.initialized = message
            if self._standalone is None and not self._eof and self._session.session_id is not None:
                self._standalone = trio.CancelScope()
                self._spawn(self._run_standalone, self._standalone)
        elif method == "notifications/cancelled":
            params = message.get("params")
            request_id = params.get("requestId") if isinstance(params, dict) else None
            exchange = self._exchanges.get(_key(request_id)) if is_request_id(request_id) else None
            if exchange is not None:
                exchange.abandon()  # the server was told; the client expects no reply

    async def _run_standalone(self, scope: trio.CancelScope) -> None:
        try:
            with scope:
                await self._http.listen_standalone()
        except trio.ClosedResourceError:
            pass
        finally:
            self._task_done()

    # -- closing ----------------------------------------------------------------------------------

    async def send_eof(self) -> None:
        """No more messages will be sent; ``receive`` ends once everything owed has arrived.

        Ends the standalone stream and ``subscriptions/listen`` streams at once, waits for the
        replies to the other requests, then ends the legacy session (DELETE). Idempotent.

        Raises:
            trio.ClosedResourceError: the channel was closed.
            trio.BusyResourceError: a task is sending.
        """
        if self._closed:
            raise trio.ClosedResourceError("channel was closed")
        if self._sending:
            raise trio.BusyResourceError("another task is sending on this channel")
        await trio.lowlevel.checkpoint()
        if self._eof:
            return
        self._eof = True
        if self._standalone is not None:
            self._standalone.cancel()
        for exchange in list(self._exchanges.values()):
            if exchange.listen:
                exchange.abandon()
        assert self._tasks is not None
        self._tasks.start_soon(self._finish)

    async def _finish(self) -> None:
        await self._quiet.wait()
        with trio.move_on_after(CLOSE_TIMEOUT):
            await self._http.delete_session()
        self._queue_in.close()

    async def aclose(self) -> None:
        """Close: stop every exchange, end the legacy session, close the connections.

        The DELETE that ends the session gets 2 s, even if cancelled. Idempotent; wakes a blocked
        ``receive`` (it raises ``trio.ClosedResourceError``).
        """
        if self._closed:
            await trio.lowlevel.checkpoint()
            return
        self._closed = True
        self._queue_out.close()
        if self._tasks is not None:
            self._tasks.cancel_scope.cancel()
        try:
            with trio.move_on_after(CLOSE_TIMEOUT, shield=True):
                await self._http.delete_session()
        finally:
            await self._pool.aclose()


def _unpack(item: Item) -> JSONObject:
    if isinstance(item, ProtocolError):
        raise item
    return item


@asynccontextmanager
async def open_http_client(endpoint: Endpoint, options: ConnectOptions) -> AsyncIterator[MessageChannel]:
    """Connect to a Streamable HTTP MCP endpoint; yield the channel, closed when the block ends.

    One connection is opened (and kept for the first request) to check that the server can be
    reached; nothing is sent. ``options.token`` goes in every request's ``Authorization: Bearer``
    header; ``options.tls_ca``, ``tls_cert`` and ``tls_key`` configure TLS for ``https``;
    ``options.handshake_timeout`` bounds each connection and TLS handshake; and
    ``options.max_message_bytes`` bounds response bodies and events. Background tasks (response
    streams, the standalone stream) run while the block runs.

    Raises:
        ConnectError: a PEM file that cannot be loaded, no connection, or a failed TLS handshake.
    """
    if endpoint.secure:
        client_context(endpoint, options)  # bad files fail before any connection is made
    pool = ConnectionPool(endpoint, options)
    await pool.check_reachable()
    channel = HttpClientChannel(endpoint, options, pool)
    with single_exception():
        async with trio.open_nursery() as nursery:
            await nursery.start(channel.run)
            try:
                yield channel
            finally:
                await channel.aclose()
                nursery.cancel_scope.cancel()
