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
  ``Last-Event-ID``; a 404 for the session renews it transparently (:mod:`channels._http.client.session`);
  ``send_eof`` and ``aclose`` end it with DELETE.
* **Modern** (a request with ``params._meta["io.modelcontextprotocol/protocolVersion"]``,
  2026-07-28): one self-contained POST per request with ``MCP-Protocol-Version``, ``Mcp-Method``
  and ``Mcp-Name`` (and ``Mcp-Param-*`` for tool arguments annotated ``x-mcp-header``, see
  :mod:`channels._mcp.params`); no session. The client's ``notifications/cancelled`` for such a
  request closes its response stream, which is how HTTP cancels in 2026-07-28; it is not POSTed.

Which exchange each message becomes is :mod:`channels._http.client.dispatch`; the exchanges
themselves are :mod:`channels._http.client.exchange`, and the legacy session's standalone GET
stream is :mod:`channels._http.client.standalone`, all over the keep-alive connections of
:mod:`channels._http.client.conn` (at most 16, two of them kept for notifications and replies).

Every request gets exactly one answer: the server's reply, or an error reply with the request's id
when the server gave none (the table in :mod:`channels._mcp.client`), unless the client cancelled it.
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

from ..._core.channel import MessageChannel, PeerInfo
from ..._core.errors import InvalidMessage, ProtocolError
from ..._core.jsonrpc import JSONObject, Kind, encode, validate
from ..._core.options import ConnectOptions
from ..._core.tlscontext import client_context
from ..._core.unwrap import single_exception
from ..._sockets.endpoint import Endpoint
from .conn import ConnectionPool
from .dispatch import Dispatcher
from .exchange import Exchanges, Item
from .session import LegacySession

logger = logging.getLogger("channels.http.client")

RECEIVE_QUEUE = 16
"""Messages received and not yet taken by ``receive``. When it is full, the tasks reading response
streams wait, and TCP flow control slows the server: memory stays bounded by this many messages
(plus one per open stream) of at most ``max_message_bytes`` each."""
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
        self._http = Exchanges(endpoint, options, pool, LegacySession(), self._deliver)
        self._dispatch = Dispatcher(self._http, self._spawn)
        self._pool = pool
        self._tasks: trio.Nursery | None = None
        self._active = 0
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
                self._dispatch.start_request(value, body, done)
            elif value.get("method") == "notifications/cancelled" and self._dispatch.cancel(value):
                done.set()
            else:
                self._dispatch.post(value, body, done)
            await done.wait()
        finally:
            self._sending = False

    def _spawn(self, task: Callable[..., Awaitable[object]], *args: object) -> None:
        """Start ``task(*args)`` in the background, counted as activity until it returns."""
        assert self._tasks is not None, "the channel's tasks are not running (use open_http_client)"
        self._active += 1
        if self._quiet.is_set():
            self._quiet = trio.Event()
        self._tasks.start_soon(self._counted, task, args)

    async def _counted(self, task: Callable[..., Awaitable[object]], args: tuple[object, ...]) -> None:
        try:
            await task(*args)
        finally:
            self._active -= 1
            if self._active == 0:
                self._quiet.set()

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
        self._dispatch.end()
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
