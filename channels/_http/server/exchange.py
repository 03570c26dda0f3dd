"""Channels for one HTTP response: a modern request (MCP 2026-07-28), or a 2024-11-05 SSE stream.

:class:`ExchangeChannel`: in the 2026-07-28 era each POST carries one request and its response
carries everything about it, so the POST is a channel of its own: ``receive()`` gives the request,
``send()`` writes the reply (and the notifications before it) to the response, and then
``receive()`` ends. If the client closes the response first, ``receive()`` raises
``trio.BrokenResourceError``: the bridge then cancels the request at the child (closing the
response stream is how HTTP cancels in that era). :meth:`ExchangeChannel.send_nowait` queues on the
response without a task or a wait: the shared child's relay bounds what waits by
:attr:`ExchangeChannel.waiting` instead of a queue and a writer of its own.

:class:`SseChannel`: the 2024-11-05 HTTP+SSE transport. A GET opens an event stream and is the
channel; the client POSTs its messages to the endpoint the stream's first event named, and they
come out of ``receive()``. Closing the GET ends the channel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import trio

from ..._core.channel import MessageChannel, PeerInfo
from ..._core.jsonrpc import JSONObject, encode
from .backlog import Backlog
from .stream import ResponseStream

# What a 2024-11-05 SSE channel may hold from POSTs the bridge has not read yet (messages).
SSE_INBOUND_QUEUE = 64


class ExchangeChannel(MessageChannel):
    """One POSTed request and its response, as a channel (see the module docstring).

    Args:
        request: the request, validated.
        peer: who sent it.
        status_of: the HTTP status for an error reply sent as the whole response (a 2026-07-28
            error reply maps to 4xx); a result's is 200.
        on_reply: called with the request and its reply, before the reply is queued (the
            listener learns tool header annotations from ``tools/list`` results this way).
    """

    def __init__(
        self,
        request: JSONObject,
        peer: PeerInfo,
        status_of: Callable[[JSONObject], int],
        on_reply: Callable[[JSONObject, JSONObject], None] | None = None,
    ) -> None:
        self._request: JSONObject | None = request
        self._original = request
        self._request_id = request.get("id")
        self._peer = peer
        self._status_of = status_of
        self._on_reply = on_reply
        self.backlog = Backlog()
        self.stream = ResponseStream("0", finals=1, backlog=self.backlog)
        self._over = False  # replied, or the client left
        # Made by a receive() that waits for that, and only then: served in the POST's own task,
        # the request is received once and nothing waits here (SharedChild.serve_exchange).
        self._over_event: trio.Event | None = None
        self.one_request = True
        self.client_left = False
        self.closed = False

    @property
    def peer(self) -> PeerInfo:
        return self._peer

    def leave(self) -> None:
        """The client closed the response before the reply (the HTTP side calls this)."""
        if not self.stream.ended:
            self.client_left = True
        self._set_over()

    def _set_over(self) -> None:
        self._over = True
        if self._over_event is not None:
            self._over_event.set()

    async def receive(self) -> JSONObject:
        if self.closed:
            raise trio.ClosedResourceError("the exchange is closed")
        if self._request is not None:
            request, self._request = self._request, None
            # A cancel point, not a pass of the scheduler: the task was just started for this
            # request, and yields at its next receive (which waits for the reply).
            await trio.lowlevel.checkpoint_if_cancelled()
            return request
        if self._over:
            await trio.lowlevel.checkpoint()
        else:
            if self._over_event is None:
                self._over_event = trio.Event()
            await self._over_event.wait()
        if self.client_left:
            raise trio.BrokenResourceError("the client closed the response stream")
        raise trio.EndOfChannel

    async def send(self, value: JSONObject) -> None:
        await self.send_many([value])

    async def send_many(self, messages: Sequence[JSONObject]) -> None:
        if self.closed:
            raise trio.ClosedResourceError("the exchange is closed")
        await self.backlog.make_room(self.send_timeout)
        for message in messages:
            self.send_nowait(message)
        await trio.lowlevel.checkpoint()

    @property
    def waiting(self) -> tuple[int, int]:
        """The messages and bytes queued on the response and not written yet."""
        return self.stream.unwritten, self.stream.queued_bytes

    def send_nowait(self, message: JSONObject) -> None:
        """Queue ``message`` on the response at once, as :meth:`send` does but without waiting.

        Without backpressure: the caller bounds what waits, by :attr:`waiting`.

        Raises:
            trio.ClosedResourceError: the exchange is closed.
        """
        if self.closed:
            raise trio.ClosedResourceError("the exchange is closed")
        data = encode(message, newline=False)
        self.bytes_sent += len(data)
        final = "method" not in message and message.get("id") == self._request_id
        if final:
            if self._on_reply is not None and self._request_id is not None:
                self._on_reply(self._original, message)
            # A reply is a result or an error, never both (validated): a result's status is 200.
            status = 200 if "result" in message else self._status_of(message)
            self.stream.put(data, final=True, status=status)
            self._set_over()
        elif "method" in message or message.get("id") is None:
            self.stream.put(data)  # a notification about this request, or an error about none

    def end(self) -> None:
        """Close the exchange now, without waiting: its response ends with what was queued on it.

        The bridge's way to stop serving a request it serves in the POST's own task.
        """
        self.closed = True
        self.stream.end()
        self._set_over()

    async def aclose(self) -> None:
        self.end()
        # A cancel point, not a pass of the scheduler: it is closed twice per request (by the
        # bridge, then by the end of its ``establish`` block), just before its task ends.
        await trio.lowlevel.checkpoint_if_cancelled()


class SseChannel(MessageChannel):
    """A 2024-11-05 HTTP+SSE connection (see the module docstring).

    Args:
        session_id: the id in the endpoint URL the client POSTs to.
        peer: who opened the stream.
    """

    def __init__(self, session_id: str, peer: PeerInfo) -> None:
        self.session_id = session_id
        self._peer = peer
        self.backlog = Backlog()
        self.stream = ResponseStream("0", finals=0, backlog=self.backlog)
        self._inbound_send, self._inbound = trio.open_memory_channel[JSONObject](SSE_INBOUND_QUEUE)
        self.closed = False
        self._left = False
        self.on_close: list[Callable[[SseChannel], Any]] = []

    @property
    def peer(self) -> PeerInfo:
        return self._peer

    async def deliver(self, message: JSONObject) -> None:
        """Hand a POSTed message to the bridge (waits while the queue is full).

        Raises:
            trio.ClosedResourceError: the stream is gone.
        """
        try:
            await self._inbound_send.send(message)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise trio.ClosedResourceError("the SSE stream is gone") from None

    def leave(self) -> None:
        """The client closed the event stream: the bridge's next ``receive`` fails."""
        self._inbound_send.close()
        self._left = True

    async def receive(self) -> JSONObject:
        if self.closed:
            raise trio.ClosedResourceError("the SSE channel is closed")
        try:
            return await self._inbound.receive()
        except trio.EndOfChannel:
            raise trio.BrokenResourceError("the client closed the event stream") from None

    def receive_nowait(self) -> JSONObject:
        if self.closed:
            raise trio.ClosedResourceError("the SSE channel is closed")
        try:
            return self._inbound.receive_nowait()
        except trio.EndOfChannel:
            raise trio.BrokenResourceError("the client closed the event stream") from None

    async def send(self, value: JSONObject) -> None:
        await self.send_many([value])

    async def send_many(self, messages: Sequence[JSONObject]) -> None:
        if self.closed:
            raise trio.ClosedResourceError("the SSE channel is closed")
        if self._left:
            raise trio.BrokenResourceError("the client closed the event stream")
        await self.backlog.make_room(self.send_timeout)
        for message in messages:
            data = encode(message, newline=False)
            self.bytes_sent += len(data)
            self.stream.put(data)
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._inbound_send.close()
        self._inbound.close()
        self.stream.end()
        for callback in self.on_close:
            callback(self)
        await trio.lowlevel.checkpoint()
