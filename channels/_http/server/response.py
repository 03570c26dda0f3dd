"""Writing a response stream out as this request's response: one JSON body, or an event stream.

:func:`write_response` is the HTTP side of a :class:`~channels._http.server.stream.ResponseStream`:
a stream whose only message is its final one, queued within the style's JSON wait, goes out as one
``application/json`` body; anything else as ``text/event-stream`` (events with ids ``KEY/SEQ``, a
priming event for clients that resume, keep-alive comments), while the connection is watched for
the client leaving. What was not written stays in the stream, for a resumption if it is
resumable.

An event stream is chosen only when it must be: a message goes out before the answer (progress,
a log message, a request to the client), or the answer takes longer than the JSON wait, a
keep-alive threshold (``--sse-after``, 15 s) after which the stream's comments keep proxies from
timing the response out. Clients cap what one event may carry (the Python SDK at 1 MiB), so a
large answer that merely takes a while must not go out as an event.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import trio

from ..._core.cancel import cancelled_when
from ..._core.ticker import Ticker
from ..sse import KEEPALIVE, encode_event
from .conn import NOT_SENT, PART_SENT, SENT, HttpConnection
from .connvalues import header_block
from .request import read_ready
from .stream import ResponseStream

# SSE response headers: X-Accel-Buffering stops nginx from buffering the stream (the MCP
# transports text asks for it), no-cache keeps intermediaries from storing it.
SSE_HEADERS = (
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
)
JSON_HEADERS = ((b"content-type", b"application/json"),)
# The first part of the JSON wait is bounded by the ticker alone, without watching the connection:
# most answers come well within it, and a watch costs a task. Past it, the wait goes on while the
# connection is watched, so that a client that leaves is noticed at once (it may be a cancel).
QUICK_WAIT = 1.0


@attrs.frozen
class StreamStyle:
    """How one response writes its stream.

    Attributes:
        extra_headers: headers besides the content type (``Mcp-Session-Id``, CORS).
        json_allowed: a stream whose first queued message is its only final one may be sent as
            one ``application/json`` body.
        json_wait: how long to wait for that first message before committing to SSE (the
            keep-alive threshold: ``HttpOptions.sse_after``).
        priming: send a priming event (an id with empty data) first, for clients that resume
            (MCP 2025-11-25).
        retry_ms: a ``retry:`` field to send with the priming event, or ``None``.
        keepalive: seconds of silence after which a comment is sent.
        event: the SSE event type to name on each message, or ``None`` (``message`` implied).
        ticker: where to register the JSON wait's deadline (no cancel scope per request); without
            one, a cancel scope bounds it.
        answer_now: an answer queued while the response waits for it as JSON is written by the
            task that queues it, at once (:class:`JsonAnswer`).
        park: with ``answer_now``, on a plain socket, the response waits for that answer and its
            client's next request at once (:func:`park`).
        json_headers: a JSON answer's headers (the content type and ``extra_headers``), encoded.
    """

    extra_headers: Sequence[tuple[bytes, bytes]] = ()
    json_allowed: bool = True
    json_wait: float = 15.0
    priming: bool = False
    retry_ms: int | None = None
    keepalive: float = 15.0
    event: str | None = None
    ticker: Ticker | None = None
    answer_now: bool = False
    park: bool = False
    # A JSON answer's headers, encoded once for all the responses of this style.
    json_headers: bytes = attrs.field(
        init=False,
        default=attrs.Factory(
            lambda self: header_block((*JSON_HEADERS, *self.extra_headers)), takes_self=True
        ),
    )


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

    A resumption may take an event stream over (:meth:`ResponseStream.take_over`): this then
    stops at once and returns False, as if the client had left. A response still waiting to
    answer as JSON has sent no event id, so nothing names it to be resumed: it gets no cancel
    scope until it becomes an event stream (one scope less per JSON answer).

    Args:
        connection: the client's connection; the response is its current one.
        stream: the messages; attached while this runs.
        style: JSON or SSE, priming, keepalive.
        first_events: raw SSE bytes to send first (the legacy ``endpoint`` event).
    """
    stream.attach()
    unprogressed = connection.on_progress
    if stream.backlog is not None:  # part of a message written is progress for its backlog
        connection.on_progress = stream.backlog.progressed
    # All in this one coroutine, not helpers awaited in turn: each coroutine of a request's await
    # chain is passed through again at each resumption of its task.
    try:
        if style.json_allowed and not first_events:
            answered = await _answer_as_json(connection, stream, style)
            if answered is not None:
                if not answered:
                    stream.abandon()
                return answered
        with trio.CancelScope() as writer:
            stream.writing_events(writer)
            return await _write_watched(connection, stream, style, first_events)
        # Taken over by a resumption (the client gave up on this response): what was not written
        # stays in the stream, kept for that resumption; the connection, cut mid-response, closes.
        stream.abandon()
        return False
    except trio.BrokenResourceError:
        stream.abandon()
        return False
    finally:
        stream.detach()
        connection.on_progress = unprogressed


async def _write_watched(
    connection: HttpConnection, stream: ResponseStream, style: StreamStyle, first_events: Sequence[bytes]
) -> bool:
    """Write the event stream while watching the connection; False if the client left first."""
    broken = False
    async with cancelled_when(connection.wait_disconnected) as left:
        try:
            await _write_events(connection, stream, style, first_events)
        except trio.BrokenResourceError:
            broken = True
    if left.happened or broken:
        stream.abandon()
    return not (left.happened or broken)


async def _answer_as_json(
    connection: HttpConnection, stream: ResponseStream, style: StreamStyle
) -> bool | None:
    """Send the stream as one JSON body if it is its final message alone.

    Returns True if it was sent, False if the client left while it waited, ``None`` if the
    response is to be an event stream.
    """
    if not stream.unwritten and not stream.ended:
        now = trio.current_time()
        deadline = now + style.json_wait
        quick = min(deadline, now + QUICK_WAIT)
        if style.ticker is None:
            with trio.move_on_at(quick):
                await stream.wait()
        else:
            stream.deadline = quick  # the stream is the ticker's waiter: no object per request
            style.ticker.add(stream)
            parked = style.park and style.answer_now and connection.socket is not None
            answer = stream.answer_now = JsonAnswer(connection, style, parked) if style.answer_now else None
            left = False
            try:
                if parked:
                    left = not await park(connection, stream)
                else:
                    await stream.wait()
            finally:
                style.ticker.discard(stream)
                stream.answer_now = stream.watching = None
                stream.nudged = False
            if answer is not None and answer.sent:
                if answer.sent == PART_SENT:
                    await connection.finish_response()
                stream.written(answer.seq, replayable=False)
                return True
            if left:
                return False
        if not stream.unwritten and not stream.ended and await _wait_watched(connection, stream, deadline):
            return False
    if stream.unwritten == 1 and stream.ended:
        seq, data, final, status = stream.first_unwritten()
        if final:
            await connection.respond(status, style.json_headers, data)
            stream.written(seq, replayable=False)
            return True
    # Ended with nothing to write: the client cancelled the request, and no answer may come (MCP
    # cancellation). The event stream below then ends with no event, as one already begun does.
    return None


@attrs.define(eq=False)
class JsonAnswer:
    """A response waiting for its answer as JSON, which the task that queues it may write.

    The reply pump of a session routes the answer to its stream (:meth:`ResponseStream.put`),
    which calls this with it: the response is written from the pump's task at once, as much as
    the kernel takes without waiting (:meth:`HttpConnection.respond_now`), rather than a
    scheduler pass later by the response's own task, which that answer wakes. That task then
    only finishes: it writes any rest within the send timeout and marks the answer written.
    Nothing else changes: the answer stays queued, and counted in the backlog, until it is
    written whole; an event stream is never answered so, nor a response past its quick wait.

    Attributes:
        sent: what :meth:`HttpConnection.respond_now` wrote (``NOT_SENT`` until called).
        seq: the answer's event, once sent.
    """

    connection: HttpConnection
    style: StreamStyle
    parked: bool = False
    sent: int = NOT_SENT
    seq: int = 0

    def __call__(self, stream: ResponseStream) -> bool:
        """Write the answer; True if the response's task need not wake for it (see :func:`park`)."""
        stream.answer_now = None  # once
        seq, data, _, status = stream.first_unwritten()
        self.sent = self.connection.respond_now(status, self.style.json_headers, data)
        self.seq = seq
        return self.parked and self.sent == SENT and self.connection.reusable


async def park(connection: HttpConnection, stream: ResponseStream) -> bool:
    """Wait for ``stream``'s answer and the client's next bytes at once; False if the client left.

    The answer to a request is written by the task that routes it (:class:`JsonAnswer`); waiting
    for it on the stream, the response's task would wake once for it, only to finish and wait
    for the next request, a second pass of the scheduler per request. Parked here, it waits for
    the socket to be readable instead, and wakes once: at the client's next request (read and
    kept for it), or at its end. Anything else that comes for the stream (an answer not written
    whole, a message before the answer, the stream's end, its deadline) ends the wait at once:
    :meth:`ResponseStream._changed_now` calls ``trio.lowlevel.notify_closing`` on the socket,
    which ends a ``wait_readable`` on it and does nothing else (the socket is not closed; the
    next wait registers it again). A cancel scope per request would cost as much as the pass it
    saves. A kept-alive connection's idle timeout so counts from the end of this wait, at most
    the quick wait (:data:`QUICK_WAIT`) after the request.
    """
    sock = connection.socket
    assert sock is not None
    stream.watching = sock
    try:
        await trio.lowlevel.wait_readable(sock)
    except trio.ClosedResourceError:
        return True  # woken by the stream (only the response's own task closes the socket)
    data = read_ready(sock.fileno())
    if data is not None:
        connection.keep(data)
    return data != b""


async def _wait_watched(connection: HttpConnection, stream: ResponseStream, deadline: float) -> bool:
    """Wait for the stream's first message until ``deadline``, watching the connection.

    Returns True if the client left meanwhile.
    """
    async with cancelled_when(connection.wait_disconnected) as left:
        with trio.move_on_at(deadline):
            while not stream.unwritten and not stream.ended:
                await stream.wait()
    return left.happened


async def _write_events(
    connection: HttpConnection, stream: ResponseStream, style: StreamStyle, first_events: Sequence[bytes]
) -> None:
    # The head goes out with the first events (one write), and the last events with the end.
    head = list(first_events)
    if style.priming:
        head.append(encode_event(b"", event_id=stream.event_id(stream.last_written()), retry=style.retry_ms))
    await connection.start_stream(200, [*SSE_HEADERS, *style.extra_headers], b"".join(head))
    while True:
        with trio.move_on_after(style.keepalive) as quiet:
            await stream.wait()
        if quiet.cancelled_caught:
            await connection.send_body(KEEPALIVE)
            continue
        events = stream.pending()
        # An ended stream takes no more messages: if it had ended when they were taken, these
        # events are its last, and go out with its end.
        last = stream.ended
        if events:
            await connection.send_body(
                b"".join(
                    encode_event(data, event_id=stream.event_id(seq), event=style.event)
                    for seq, data, _, _ in events
                ),
                last=last,
            )
            stream.written(events[-1][0])
        elif last:
            await connection.send_body(b"", last=True)
        if last:
            return
