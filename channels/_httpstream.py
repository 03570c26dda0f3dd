"""Response streams: messages a channel sends, written out by the HTTP connection that serves them.

A :class:`ResponseStream` is one logical stream of server-to-client messages: the answer to one
POSTed request, a legacy session's standalone GET stream, a 2024-11-05 SSE connection. The channel
side :meth:`~ResponseStream.put` messages without waiting for the network (the session's byte
budget bounds what may pile up); the HTTP side takes them with :func:`write_response`, which
decides between one ``application/json`` body and ``text/event-stream``.

Events carry ids ``KEY/SEQ`` (the stream's key, then a sequence number from 1), unique within a
session and naming their stream, so a client that lost a resumable stream can ask for the rest
with ``Last-Event-ID`` (:meth:`~ResponseStream.rewind`). Written events of a resumable stream are
kept until the session's event budget needs the room (oldest first, :class:`EventBudget`).
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence

import attrs
import trio

from ._httpconn import HttpConnection
from ._sse import KEEPALIVE, encode_event

# SSE response headers: X-Accel-Buffering stops nginx from buffering the stream (the MCP
# transports text asks for it), no-cache keeps intermediaries from storing it.
SSE_HEADERS = (
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
)
JSON_HEADERS = ((b"content-type", b"application/json"),)
NO_ANSWER = (
    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Connection closed",'
    b'"data":{"reason":"no-answer"}}}'
)


@attrs.define(eq=False)
class EventBudget:
    """The bytes of events one session may keep for replay, shared by its streams (oldest go first).

    Attributes:
        limit: the most bytes kept.
        used: the bytes kept now.
    """

    limit: int
    used: int = 0
    on_empty: Callable[[ResponseStream], object] | None = None
    """Called when an ended stream has no event kept any more (its owner may forget it)."""
    _order: collections.deque[ResponseStream] = attrs.field(factory=collections.deque)

    def charge(self, stream: ResponseStream, size: int) -> None:
        self.used += size
        self._order.append(stream)
        while self.used > self.limit and self._order:
            oldest = self._order.popleft()
            self.used -= oldest.forget_oldest()
            if self.on_empty is not None and oldest.ended and not oldest.kept:
                self.on_empty(oldest)


class ResponseStream:
    """Messages for one response, queued by the channel side and written by the HTTP side.

    Args:
        key: the stream's name within its session (the first part of its event ids).
        finals: how many messages end the stream (replies to the request, or to each request
            of a batch); ``0`` for a stream that only ends when :meth:`end` is called.
        budget: where a resumable stream's events are charged, or ``None`` if the stream is not
            resumable (its events are dropped once written).
    """

    def __init__(self, key: str, finals: int, budget: EventBudget | None = None) -> None:
        self.key = key
        self.finals_left = finals
        self.budget = budget
        self._events: collections.deque[tuple[bytes, bool, int]] = collections.deque()
        self._first_seq = 1  # sequence number of _events[0]
        self.position = 1  # the next sequence number the HTTP side will write
        self.ended = False  # no more messages will come
        self.attached = False  # an HTTP response is writing this stream now
        self.unwritten = 0  # bytes queued and not written yet
        self._changed = trio.Event()
        self._room = trio.Event()

    @property
    def kept(self) -> int:
        """How many events are kept (written or not)."""
        return len(self._events)

    @property
    def next_seq(self) -> int:
        return self._first_seq + len(self._events)

    def put(self, data: bytes, *, final: bool = False, status: int = 200) -> None:
        """Queue one encoded message.

        Args:
            data: the encoded message.
            final: it is a reply this stream waits for.
            status: the HTTP status if this message ends up the whole response (a JSON body).
        """
        if self.ended:
            return
        self._events.append((data, final, status))
        self.unwritten += len(data)
        if final:
            self.finals_left -= 1
            if self.finals_left == 0:
                self.ended = True
        if self.budget is not None:
            self.budget.charge(self, len(data))
        self._wake()

    def end(self) -> None:
        """No more messages will come (the session or channel ended)."""
        self.ended = True
        self._wake()

    def forget_oldest(self) -> int:
        """Drop the oldest kept event (the budget needs room); return its size."""
        if not self._events:
            return 0
        data, _, _ = self._events.popleft()
        if self.position <= self._first_seq:
            self.unwritten -= len(data)  # never written: lost, as the budget demands
            self._room.set()
        self._first_seq += 1
        self.position = max(self.position, self._first_seq)
        return len(data)

    def rewind(self, seq: int) -> bool:
        """Resume after event ``seq`` (a ``Last-Event-ID``); False if those events are gone."""
        if seq + 1 < self._first_seq or seq >= self.next_seq:
            return False
        self.position = seq + 1
        return True

    def pending(self) -> list[tuple[int, bytes, bool, int]]:
        """The events not written yet: sequence number, data, final, status."""
        start = self.position - self._first_seq
        return [
            (self._first_seq + index, data, final, status)
            for index, (data, final, status) in enumerate(self._events)
            if index >= start
        ]

    def written(self, seq: int, size: int) -> None:
        """Events up to ``seq`` (``size`` bytes) were written; a stream not resumable forgets them."""
        self.unwritten = max(0, self.unwritten - size)
        self._room.set()
        self.position = seq + 1
        if self.budget is None:
            while self._events and self._first_seq <= seq:
                self._events.popleft()
                self._first_seq += 1

    async def wait(self) -> None:
        """Return when there is something to write or the stream ended."""
        while not self.pending() and not self.ended:
            self._changed = trio.Event()
            await self._changed.wait()

    async def wait_room(self, limit: int, timeout: float | None) -> None:
        """Wait while more than ``limit`` bytes are queued and a response is writing them.

        Backpressure onto the sender: a client that does not read its stream holds up the
        sender, not the bridge's memory. A stream nobody is writing is bounded by its budget
        instead (a resumable stream) or has no sender left (the others).

        Raises:
            trio.TooSlowError: still over ``limit`` after ``timeout`` seconds.
        """
        with trio.fail_after(timeout if timeout is not None else float("inf")):
            while self.unwritten > limit and self.attached and not self.ended:
                self._room = trio.Event()
                await self._room.wait()

    def _wake(self) -> None:
        self._changed.set()

    def event_id(self, seq: int) -> str:
        return f"{self.key}/{seq}"


def parse_event_id(text: str) -> tuple[str, int] | None:
    """``"KEY/SEQ"`` → ``(KEY, SEQ)``, or ``None`` for an id this server did not write."""
    key, slash, seq = text.rpartition("/")
    if not slash or not seq.isdigit():
        return None
    return key, int(seq)


@attrs.frozen
class StreamStyle:
    """How one response writes its stream.

    Attributes:
        extra_headers: headers besides the content type (``Mcp-Session-Id``, CORS).
        json_allowed: a stream whose first queued message is its only final one may be sent as
            one ``application/json`` body.
        json_wait: how long to wait for that first message before committing to SSE.
        priming: send a priming event (an id with empty data) first, for clients that resume
            (MCP 2025-11-25).
        retry_ms: a ``retry:`` field to send with the priming event, or ``None``.
        keepalive: seconds of silence after which a comment is sent.
        event: the SSE event type to name on each message, or ``None`` (``message`` implied).
    """

    extra_headers: Sequence[tuple[bytes, bytes]] = ()
    json_allowed: bool = True
    json_wait: float = 1.0
    priming: bool = False
    retry_ms: int | None = None
    keepalive: float = 15.0
    event: str | None = None


async def write_response(
    connection: HttpConnection,
    stream: ResponseStream,
    style: StreamStyle,
    *,
    first_events: Sequence[bytes] = (),
) -> bool:
    """Write ``stream`` as this request's response until it is complete; True if it was.

    A stream whose only message is its final one, queued within ``style.json_wait``, goes out as
    one JSON body; anything else as an event stream, during which the connection is watched, so
    that a client that leaves is noticed at once (not at the next keep-alive) and its stream can
    be resumed elsewhere. Returns False if the client went away first (what was not written stays
    in ``stream`` for a resumption, if resumable).

    Args:
        connection: the client's connection; the response is its current one.
        stream: the messages; marked attached while this runs.
        style: JSON or SSE, priming, keepalive.
        first_events: raw SSE bytes to send first (the legacy ``endpoint`` event).
    """
    stream.attached = True
    try:
        if style.json_allowed and not first_events and await _answer_as_json(connection, stream, style):
            return True
        left = False
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                nonlocal left
                await connection.wait_disconnected()
                left = True
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
            await _write_events(connection, stream, style, first_events)
            nursery.cancel_scope.cancel()
        return not left
    except trio.BrokenResourceError:
        return False
    finally:
        stream.attached = False
        stream._room.set()


async def _answer_as_json(connection: HttpConnection, stream: ResponseStream, style: StreamStyle) -> bool:
    """Send the stream as one JSON body if it is its final message alone; True if it was sent."""
    with trio.move_on_after(style.json_wait):
        await stream.wait()
    events = stream.pending()
    if len(events) == 1 and events[0][2] and stream.ended:
        seq, data, _, status = events[0]
        await connection.respond(status, [*JSON_HEADERS, *style.extra_headers], data)
        stream.written(seq, len(data))
        return True
    if not events and stream.ended:  # the channel closed without an answer (never expected)
        await connection.respond(503, [*JSON_HEADERS, *style.extra_headers], NO_ANSWER)
        return True
    return False


async def _write_events(
    connection: HttpConnection, stream: ResponseStream, style: StreamStyle, first_events: Sequence[bytes]
) -> None:
    await connection.start_stream(200, [*SSE_HEADERS, *style.extra_headers])
    head = list(first_events)
    if style.priming:
        retry = f"retry: {style.retry_ms}\n".encode() if style.retry_ms is not None else b""
        head.append(retry + encode_event(b"", event_id=stream.event_id(stream.position - 1)))
    if head:
        await connection.send_body(b"".join(head))
    while True:
        with trio.move_on_after(style.keepalive) as quiet:
            await stream.wait()
        if quiet.cancelled_caught:
            await connection.send_body(KEEPALIVE)
            continue
        events = stream.pending()
        if events:
            await connection.send_body(
                b"".join(
                    encode_event(data, event_id=stream.event_id(seq), event=style.event)
                    for seq, data, _, _ in events
                )
            )
            stream.written(events[-1][0], sum(len(data) for _, data, _, _ in events))
        if stream.ended and not stream.pending():
            await connection.end_stream()
            return
