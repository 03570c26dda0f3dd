"""Legacy Streamable HTTP sessions (MCP 2025-03-26 to 2025-11-25) as message channels.

A session begins with a POSTed ``initialize`` and is one :class:`SessionChannel`: what the client
POSTs comes out of ``receive()``, and what the bridge ``send()`` sends goes to one response stream:

1. a reply, to the stream of the POST that carried its request;
2. a ``notifications/progress``, to the stream of the request whose ``progressToken`` it names;
3. a notification about the session rather than a request (a list changed, a resource updated):
   to the standalone GET stream, where it waits for a GET if none is open;
4. any other notification or server request (a log message, a sampling or roots request): to the
   stream of the one request in flight, if exactly one is; otherwise to the standalone GET stream
   if one is open; otherwise to the stream of the newest request in flight; otherwise it waits on
   the standalone stream for a GET.

So each message goes out on exactly one stream, never broadcast. A session ends with DELETE, an
idle timeout, eviction (the session cap was reached and it was the least recently used idle one),
or when the bridge closes its channel (its child exited): later requests naming it get 404, which
tells a client to initialise again.

What a session keeps is bounded: an ended stream keeps its written events for ``Last-Event-ID``
(its client may have lost the end of it, even if the bridge wrote it all) within the session's
event budget, and only the :data:`KEPT_STREAMS` most recently ended streams are kept (older ones
are dropped with their events). When the session ends, everything is dropped.
"""

from __future__ import annotations

import collections
import logging
import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import trio

from ..._core.channel import MessageChannel, PeerInfo
from ..._core.errors import ProtocolError
from ..._core.jsonrpc import JSONObject, encode
from .backlog import Backlog
from .stream import EventBudget, ResponseStream

if TYPE_CHECKING:
    from .response import StreamStyle

logger = logging.getLogger("channels.http")

SESSION_ID_BYTES = 16  # 128 random bits, as secrets.token_hex() gives by default
# What a session's channel may hold from POSTs the bridge has not read yet (messages): enough for
# a burst of concurrent POSTs; beyond it a POST waits (backpressure onto the client).
INBOUND_QUEUE = 64
# Bytes of notifications kept for a standalone GET stream nobody has opened (the GET is optional
# for a client): beyond it the oldest are dropped and counted, rather than stall the session.
STANDALONE_BACKLOG = 1024 * 1024
STANDALONE_KEY = "0"
# Ended streams a session keeps for a resumption (a kilobyte of records each, besides the events the
# budget bounds): more than a client resumes at once (one per request in flight when it dropped).
KEPT_STREAMS = 32
# Seconds a client refused because every session is busy is told to wait (Retry-After): a busy
# session turns idle, and evictable, when its last request is answered; most calls take less.
BUSY_RETRY_AFTER = 5
# Server notifications about the session as a whole, never about one request (MCP schema's
# ServerNotification union, 2025-11-25).
SESSION_NOTIFICATIONS = frozenset(
    {
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
    }
)

# A POSTed message, with the body it came in if that is its canonical line (SessionChannel.deliver).
Posted = tuple[JSONObject, bytes | None]


def new_session_id() -> str:
    """A session id from the OS CSPRNG: 32 hex digits (visible ASCII, as the spec requires)."""
    return os.urandom(SESSION_ID_BYTES).hex()  # secrets.token_hex's way: importing secrets loads OpenSSL


def id_key(request_id: Any) -> tuple[type, Any]:
    """A dict key for a JSON-RPC id that keeps ``1`` and ``"1"`` apart."""
    return (type(request_id), request_id)


class SessionChannel(MessageChannel):
    """One legacy session, as the bridge sees it: a channel of the client's messages.

    The HTTP listener makes it, hands it to the bridge inside an :class:`~channels.Incoming`,
    and feeds it; the bridge's ``aclose()`` ends the session.

    Args:
        session_id: the ``Mcp-Session-Id``.
        peer: who opened the session.
        event_budget: bytes of events kept for ``Last-Event-ID`` replay.
    """

    def __init__(self, session_id: str, peer: PeerInfo, event_budget: int) -> None:
        self.session_id = session_id
        self._peer = peer
        self.protocol_version: str | None = None  # the version the initialize reply chose
        self.budget = EventBudget(event_budget, on_empty=self.forget)
        self.backlog = Backlog()
        self.dropped = 0  # notifications dropped for a standalone stream nobody opened
        # Each POSTed message with its body, if that is its canonical line (see deliver()).
        self._inbound_send, self._inbound = trio.open_memory_channel[Posted](INBOUND_QUEUE)
        self.requests: dict[tuple[type, Any], ResponseStream] = {}
        self.by_progress: dict[tuple[type, Any], ResponseStream] = {}
        self.streams: dict[str, ResponseStream] = {}
        self._order: collections.OrderedDict[ResponseStream, None] = collections.OrderedDict()
        self.standalone = self._stream(STANDALONE_KEY, finals=0)
        self._next_key = 1
        self.closed = False  # the bridge closed the channel: the session is over
        self.ended = False  # the client ended it (DELETE, idle): receive() sees the end
        self.last_active = trio.current_time()
        self.evicted = False  # ended to make room for a new session (the session cap)
        self._resumable: collections.OrderedDict[ResponseStream, None] = collections.OrderedDict()
        self.on_close: list[Any] = []
        self.styles: dict[tuple[Any, ...], StreamStyle] = {}  # the endpoint's, per kind of response

    @property
    def peer(self) -> PeerInfo:
        return self._peer

    def _stream(self, key: str, finals: int) -> ResponseStream:
        stream = ResponseStream(key, finals, self.budget, self.backlog)
        self.streams[key] = stream
        return stream

    # --- the HTTP side -------------------------------------------------------------------

    def open_request_stream(self, messages: list[JSONObject]) -> ResponseStream:
        """A stream for the replies to ``messages`` (requests), registered before they are sent."""
        stream = self._stream(str(self._next_key), finals=len(messages))
        self._next_key += 1
        for message in messages:
            self.requests[id_key(message["id"])] = stream
            token = _progress_token(message)
            if token is not None:
                self.by_progress[id_key(token)] = stream
        self._order[stream] = None
        return stream

    def in_flight(self, request_id: Any) -> bool:
        return id_key(request_id) in self.requests

    async def deliver(self, messages: list[JSONObject], line: bytes | None = None) -> None:
        """Hand POSTed messages to the bridge, in order (waits while the queue is full).

        ``line``: the body of a POST of one message when it is that message's canonical encoding
        (:func:`~channels._core.jsonrpc.decode_line`), handed out with it by
        :meth:`receive_batch_lines`; ``None`` otherwise.

        Raises:
            trio.ClosedResourceError: the session is over.
        """
        self.last_active = trio.current_time()
        for message in messages:
            if message.get("method") == "notifications/cancelled":
                self._cancelled(message)
            posted = (message, line if len(messages) == 1 else None)
            try:
                try:
                    self._inbound_send.send_nowait(posted)  # the usual case: the bridge waits
                except trio.WouldBlock:
                    await self._inbound_send.send(posted)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                raise trio.ClosedResourceError("the session is over") from None

    def _cancelled(self, message: JSONObject) -> None:
        """The client cancelled a request: its stream no longer waits for that reply.

        The spec says a server SHOULD NOT answer a cancelled request, so none may come; the stream
        ends if nothing else is owed on it, and the session can then be found idle.
        """
        params = message.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        stream = self.requests.pop(id_key(request_id), None)
        if stream is None:
            return
        self._reply_sent(stream)
        stream.finals_left -= 1
        if stream.finals_left <= 0:
            stream.end()
            if stream.abandoned and not stream.attached:  # its client left it already
                self.forget(stream)

    def end(self) -> None:
        """The client ended the session (DELETE, idle): the bridge's ``receive`` sees the end."""
        if not self.ended:
            self.ended = True
            self._inbound_send.close()

    def evict(self) -> None:
        """End the session to make room for a new one: as :meth:`end`, and say so."""
        self.evicted = True
        self.end()

    def response_done(self, stream: ResponseStream) -> None:
        """The response writing ``stream`` returned, or failed: settle what it leaves behind.

        A response that failed without saying so (an error the writer did not expect) is treated
        as a client that left: what it did not write stops counting against the backlog.
        """
        if not stream.attached and not stream.abandoned and stream.unwritten:
            stream.abandon()
        if stream.ended:
            self.forget(stream)

    def forget(self, stream: ResponseStream) -> None:
        """A request stream ended: keep it for ``Last-Event-ID`` if it has events, within bounds.

        Among the :data:`KEPT_STREAMS` most recently ended; the oldest is dropped beyond.
        """
        self._order.pop(stream, None)
        if self.closed and not stream.attached:  # the session is over: nothing is resumed
            stream.release()
            self.streams.pop(stream.key, None)
            return
        if stream.key == STANDALONE_KEY or stream.attached:
            return  # the standalone stream lives as long as the session; a response still writes
        if stream.kept:
            self._resumable[stream] = None
            while len(self._resumable) > KEPT_STREAMS:
                oldest, _ = self._resumable.popitem(last=False)
                oldest.release()
                self.streams.pop(oldest.key, None)
        else:
            self._resumable.pop(stream, None)
            self.streams.pop(stream.key, None)

    @property
    def idle(self) -> bool:
        """Not :attr:`busy` and no standalone GET stream open: the idle timeout may end it."""
        return not self.busy and not self.standalone.attached

    @property
    def busy(self) -> bool:
        """A request is in flight or a response to one is being written; never evicted.

        In flight: POSTed and neither answered nor cancelled. Being written: an HTTP response is
        attached to a request's stream (an event stream, or one answered and not parked). An open
        standalone GET stream does not make a session busy: a client keeps it open for the whole
        session, so counting it would make every live session of such clients unevictable, and an
        evicted session's GET stream simply ends.
        """
        others = (stream for key, stream in self.streams.items() if key != STANDALONE_KEY)
        return bool(self.requests) or any(stream.attached and not stream.answered for stream in others)

    # --- the bridge side -----------------------------------------------------------------

    async def receive(self) -> JSONObject:
        return (await self._receive_posted())[0]

    async def _receive_posted(self) -> Posted:
        if self.closed:
            raise trio.ClosedResourceError("the session channel is closed")
        try:
            return await self._inbound.receive()
        except trio.ClosedResourceError:  # not trio.EndOfChannel, which passes
            raise trio.ClosedResourceError("the session channel is closed") from None

    def receive_nowait(self) -> JSONObject:
        if self.closed:
            raise trio.ClosedResourceError("the session channel is closed")
        return self._inbound.receive_nowait()[0]

    async def receive_batch_lines(
        self, max_count: int
    ) -> tuple[list[JSONObject | ProtocolError], list[bytes | None]]:
        """As :meth:`MessageChannel.receive_batch_lines`: each message with its POST body, if canonical."""
        message, line = await self._receive_posted()
        items: list[JSONObject | ProtocolError] = [message]
        lines = [line]
        while len(items) < max_count and not self.closed:
            try:
                message, line = self._inbound.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                break  # what was taken is delivered; the next receive raises the end
            items.append(message)
            lines.append(line)
        return items, lines

    async def send(self, value: JSONObject) -> None:
        await self.send_lines([value], (None,))
        await trio.lowlevel.cancel_shielded_checkpoint()  # send keeps trio's rule: a full checkpoint

    async def send_many(self, messages: Sequence[JSONObject]) -> None:
        await self.send_lines(messages, [None] * len(messages))

    async def send_lines(self, messages: Sequence[JSONObject], lines: Sequence[bytes | None]) -> None:
        """As :meth:`MessageChannel.send_lines`: a given line is the response body (or event data) as is.

        No yield unless it waited (routing only queues), as ``StreamChannel.send_lines``.
        """
        if len(lines) != len(messages):
            raise ValueError(f"{len(lines)} lines for {len(messages)} messages")
        if self.closed:
            raise trio.ClosedResourceError("the session channel is closed")
        await self.backlog.make_room(self.send_timeout)
        if self.closed:  # while it waited for room
            raise trio.ClosedResourceError("the session channel is closed")
        for message, line in zip(messages, lines, strict=True):
            self._route(message, encode(message, newline=False) if line is None else line)
        await trio.lowlevel.checkpoint_if_cancelled()

    def _route(self, message: JSONObject, data: bytes) -> None:
        self.bytes_sent += len(data)
        if "method" not in message:
            stream = self.requests.pop(id_key(message.get("id")), None)
            if stream is not None:
                self._reply_sent(stream)
                stream.put(data, final=True)
                if stream.ended and stream.abandoned and not stream.attached:  # its client left it
                    self.forget(stream)
                if message.get("id") is not None and self.protocol_version is None:
                    result = message.get("result")
                    if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
                        self.protocol_version = result["protocolVersion"]
            # else: a reply nobody waits for (an id the bridge invented, a request answered
            # already); the bridge only sends replies to requests it received, so drop it.
            return
        if message.get("method") == "notifications/progress":
            params = message.get("params")
            token = params.get("progressToken") if isinstance(params, dict) else None
            stream = self.by_progress.get(id_key(token)) if token is not None else None
            if stream is not None and not stream.ended:
                stream.put(data)
                return
        stream = (
            self.standalone if message.get("method") in SESSION_NOTIFICATIONS else self._route_unrelated()
        )
        stream.put(data)
        if stream is self.standalone and not stream.attached:
            while stream.queued_bytes > STANDALONE_BACKLOG and stream.drop_oldest_unwritten():
                if not self.dropped:
                    logger.warning(
                        "%s: session %s opened no GET stream; its oldest notifications are dropped",
                        self.peer,
                        self.session_id[:8],
                    )
                self.dropped += 1

    def _route_unrelated(self) -> ResponseStream:
        live = [stream for stream in self._order if not stream.ended]
        if len(live) == 1:
            return live[0]
        if self.standalone.attached or not live:
            return self.standalone
        return live[-1]

    def _reply_sent(self, stream: ResponseStream) -> None:
        if stream.finals_left <= 1:
            self._order.pop(stream, None)
            for key in [key for key, value in self.by_progress.items() if value is stream]:
                del self.by_progress[key]

    async def aclose(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._inbound_send.close()
        self._inbound.close()
        for key, stream in list(self.requests.items()):
            # Every request gets a reply (docs/design.md §5.1): the bridge answers what is in flight
            # before it closes, so this only catches what it could not.
            stream.put(encode(session_ended(key[1]), newline=False), final=True)
        for held in (self.requests, self.by_progress, self._order, self._resumable):
            held.clear()
        self.budget.clear()  # and the budget's call back: no cycle keeps the streams once released
        for stream in self.streams.values():
            stream.end()
            if not stream.attached:
                stream.release()  # a response still writing it finishes first, then it goes too
        self.streams = {key: stream for key, stream in self.streams.items() if stream.attached}
        for callback in self.on_close:
            callback(self)
        await trio.lowlevel.checkpoint()


def least_recently_used_idle(sessions: Iterable[SessionChannel]) -> SessionChannel | None:
    """The session not busy (:attr:`SessionChannel.busy`) active least recently, or ``None``."""
    candidates = [session for session in sessions if not (session.busy or session.ended or session.closed)]
    return min(candidates, key=lambda session: session.last_active, default=None)


def session_ended(request_id: Any) -> JSONObject:
    """The reply to a request whose session ended before its answer came."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": -32000, "message": "Connection closed", "data": {"reason": "session-ended"}},
    }


def _progress_token(message: JSONObject) -> Any:
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta.get("progressToken") if isinstance(meta, dict) else None
