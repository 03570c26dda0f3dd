"""The MCP endpoint of an HTTP listener: POST, GET and DELETE on ``PATH``, for both MCP eras.

A POST is classified first (:func:`~channels._mcp.admission.era_of`):

* 2026-07-28 (modern): one request per POST, validated against its routing headers, then a
  channel of its own (:mod:`channels._http.server.modern`); no session is ever minted, and GET and
  DELETE get 405.
* 2025-03-26 to 2025-11-25 (legacy): ``initialize`` opens a session
  (:class:`~channels._http.server.session.SessionChannel`) whose id every later request must name (400
  without, 404 for an unknown or ended one, so the client initialises again); GET opens its
  standalone stream (one at a time, 409 otherwise) or resumes a stream after ``Last-Event-ID``
  (taking it over from a response still writing it: the client gave up on that one); DELETE ends
  it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import trio

from ..._core.errors import ProtocolError
from ..._core.jsonrpc import JSONObject, RequestId, decode_line
from ..._core.options import HttpOptions
from ..._core.ticker import Ticker
from ..._mcp.admission import LEGACY_VERSIONS, HttpRefusal, era_of, parse_body
from ..._mcp.refusal import protocol_refusal
from .call import HttpCall, Refused, method_not_allowed, refuse
from .modern import ModernPosts
from .response import StreamStyle, write_response
from .session import BUSY_RETRY_AFTER, SessionChannel, id_key, least_recently_used_idle, new_session_id
from .stream import ResponseStream, parse_event_id
from .verdicts import PostHeaderVerdicts

if TYPE_CHECKING:
    from .request import Request

logger = logging.getLogger("channels.http")

# How often idle sessions are looked for.
REAP_INTERVAL = 10.0
# Versions whose clients resume streams: they get a priming event and a retry delay (2025-11-25
# transports text, "SSE polling").
RESUMING_VERSIONS = frozenset({"2025-11-25"})
RETRY_MS = 1000
# Response styles a session keeps, one per (JSON allowed, version, CORS headers): a client sends
# from one Origin, so it uses two (its POSTs' and its GET stream's), three across initialize.
SESSION_STYLES = 8


def _parse_post(body: bytes | bytearray) -> tuple[JSONObject | list[JSONObject] | HttpRefusal, bytes | None]:
    """:func:`~channels._mcp.admission.parse_body`, and ``body`` if it is its one message's canonical line.

    A body of one message is decoded by :func:`~channels._core.jsonrpc.decode_line`, as
    ``parse_body`` decodes it, refused alike; the session hands that line to the bridge with the
    message, so an unchanged request reaches the child as posted, not encoded again.
    """
    if body[:1] != b"{":
        return parse_body(body), None  # a batch, or leading white space
    try:
        return decode_line(body)
    except ProtocolError as exc:
        return protocol_refusal(exc), None


def _unknown_session(request_id: RequestId | None = None) -> Refused:
    return refuse(404, -32001, "Session not found", "unknown-session", request_id)


class McpEndpoint:
    """The endpoint's sessions and methods (see the module docstring).

    Args:
        http: the listener's HTTP settings (session cap and idle timeout, event budget, keep-alive).
        ticker: where responses register their JSON wait's deadline.
        session_count: the sessions open now on the whole listener, these and the 2024-11-05
            transport's (they share ``max_sessions``).
    """

    def __init__(self, http: HttpOptions, ticker: Ticker, session_count: Callable[[], int]) -> None:
        self.http = http
        self.ticker = ticker
        self.session_count = session_count
        self.sessions: dict[str, SessionChannel] = {}
        self.modern = ModernPosts(http, ticker)
        self._post_headers = PostHeaderVerdicts()

    def handle(self, call: HttpCall) -> Awaitable[None]:
        """The route: the method's coroutine, returned to be awaited by the caller.

        Not a coroutine itself, so that no frame of its own sits in the request's await chain
        (each is passed through again at each resumption of the request's task).

        Raises:
            Refused: 405 for another method.
        """
        method = call.request.method
        if method == "POST":
            return self._post(call)
        if method == "GET":
            return self._get(call)
        if method == "DELETE":
            return self._delete(call)
        raise method_not_allowed(call.allow(b"GET, POST, DELETE"))

    async def reap_idle_sessions(self) -> None:
        """End sessions idle for longer than the idle timeout; runs until cancelled."""
        while True:
            await trio.sleep(min(REAP_INTERVAL, self.http.session_idle_timeout))
            now = trio.current_time()
            for session in list(self.sessions.values()):
                if session.idle and now - session.last_active > self.http.session_idle_timeout:
                    logger.info("%s: session %s idle, ended", session.peer, session.session_id[:8])
                    session.end()
                    _let_go(session)
                    self.sessions.pop(session.session_id, None)

    # --- POST ----------------------------------------------------------------------------

    async def _post(self, call: HttpCall) -> None:
        request = call.request
        verdict = self._post_headers.of(request.headers, request.fields)
        parsed, line = (verdict.refusal, None) if verdict.refusal is not None else _parse_post(request.body)
        if isinstance(parsed, HttpRefusal):
            raise Refused(parsed)
        headers, modern = request.headers, verdict.modern
        if isinstance(parsed, dict) and era_of(parsed, headers, header_modern=modern) == "modern":
            await self.modern.serve(call, parsed)
            return
        messages = parsed if isinstance(parsed, list) else [parsed]
        if verdict.legacy_refusal is not None:
            raise Refused(verdict.legacy_refusal)
        session_id = request.header(b"mcp-session-id")
        request_id = messages[0].get("id") if len(messages) == 1 else None  # what a refusal names
        if session_id is None:
            if len(messages) == 1 and messages[0].get("method") == "initialize" and "id" in messages[0]:
                await self._initialize(call, messages[0], line)
                return
            raise refuse(
                400,
                -32000,
                "Bad Request: no Mcp-Session-Id header; open a session with initialize first",
                "missing-session",
                request_id,
            )
        session = self._session(call, session_id, request_id)
        if isinstance(parsed, list) and session.protocol_version not in (None, "2025-03-26"):
            raise refuse(
                400, -32600, "Invalid Request: batches were removed after 2025-03-26", "batch-not-allowed"
            )
        requests = [message for message in messages if "method" in message and "id" in message]
        if len(requests) > 1 and len({id_key(message["id"]) for message in requests}) != len(requests):
            raise refuse(
                400, -32600, "Invalid Request: two requests of the batch share an id", "duplicate-id"
            )
        for message in requests:
            if message["method"] == "initialize":
                raise refuse(
                    400,
                    -32600,
                    "Invalid Request: the session is already initialized",
                    "already-initialized",
                    message["id"],
                )
            if session.in_flight(message["id"]):
                raise refuse(
                    400,
                    -32600,
                    "Invalid Request: a request with this id is already in flight",
                    "duplicate-id",
                    message["id"],
                )
        stream = session.open_request_stream(requests) if requests else None
        try:
            await session.deliver(messages, line)
        except trio.ClosedResourceError:
            raise _unknown_session(request_id) from None
        if stream is None:
            await call.respond(202)
        else:
            await self._write(call, stream, session)

    def _session(
        self, call: HttpCall, session_id: bytes, request_id: RequestId | None = None
    ) -> SessionChannel:
        """The live session ``session_id`` names, opened with the same token as this request's.

        Refused with 404 (naming ``request_id``, the id of the request refused, if any) otherwise.

        A session is bound to the credential that opened it, an OAuth token's principal included
        (issuer, subject, client and scopes; the spec's security best practices,
        2025-11-25, "Session Hijacking": bind the session to the user's identity): another token
        holder who learnt the id gets 404, as for an unknown session.
        """
        session = self.sessions.get(session_id.decode("latin-1"))
        if session is None or session.closed or session.ended:
            raise _unknown_session(request_id)
        if not call.owns(session.peer):
            # Said once per refused request, so an operator can tell why a client lost its session
            # (a token of other scopes, another client's); the session id is not logged whole.
            logger.info(
                "%s: session %s refused: it was opened with another credential (%s)",
                call.peer,
                session.session_id[:8],
                session.peer.credential or "none",
            )
            raise _unknown_session(request_id)
        return session

    async def _initialize(self, call: HttpCall, message: JSONObject, line: bytes | None) -> None:
        if self.session_count() >= self.http.max_sessions:
            self._evict_or_refuse(message)
        session = SessionChannel(new_session_id(), call.peer, self.http.event_budget)
        self.sessions[session.session_id] = session
        session.on_close.append(lambda closed: self.sessions.pop(closed.session_id, None))
        stream = session.open_request_stream([message])
        await session.deliver([message], line)
        call.start(session)
        logger.debug("%s: session %s opened", session.peer, session.session_id[:8])
        await self._write(call, stream, session)
        if stream.ended and session.protocol_version is None:  # it failed: no session after all
            session.end()
            self.sessions.pop(session.session_id, None)

    def _evict_or_refuse(self, message: JSONObject) -> None:
        """At the session cap: end the least recently used idle session, or refuse (all busy)."""
        evicted = least_recently_used_idle(self.sessions.values())
        if evicted is None:
            retry = ((b"retry-after", b"%d" % BUSY_RETRY_AFTER),)
            text = "Service Unavailable: too many sessions, all busy"
            raise Refused(HttpRefusal(503, -32000, text, "too-many-sessions", message["id"], headers=retry))
        logger.info("%s: session %s evicted (the session cap)", evicted.peer, evicted.session_id[:8])
        del self.sessions[evicted.session_id]
        evicted.evict()
        _let_go(evicted)

    async def _write(
        self, call: HttpCall, stream: ResponseStream, session: SessionChannel, *, json_allowed: bool = True
    ) -> None:
        key = (json_allowed, session.protocol_version, call.cors)
        style = session.styles.get(key)
        if style is None:  # once per session and kind of response: a client sends the same each time
            resuming = session.protocol_version in RESUMING_VERSIONS
            style = StreamStyle(
                extra_headers=((b"mcp-session-id", session.session_id.encode()), *call.cors),
                json_allowed=json_allowed,
                json_wait=self.http.sse_after,
                priming=resuming,
                retry_ms=RETRY_MS if resuming else None,
                keepalive=self.http.sse_keepalive,
                ticker=self.ticker,
                answer_now=True,
                park=True,
            )
            if len(session.styles) >= SESSION_STYLES:
                session.styles.clear()
            session.styles[key] = style
        try:
            if not await write_response(call.connection, stream, style):
                logger.info(
                    "%s: the client closed its response before its end; kept for Last-Event-ID", call.peer
                )
        finally:
            session.last_active = trio.current_time()
            session.response_done(stream)

    # --- GET and DELETE ------------------------------------------------------------------

    async def _get(self, call: HttpCall) -> None:
        request = call.request
        session_id = request.header(b"mcp-session-id")
        if session_id is None and _version(request) not in LEGACY_VERSIONS:
            raise method_not_allowed(call.allow(b"POST"), "open a session with initialize for a GET stream")
        accept = b",".join(value for name, value in request.headers if name == b"accept").lower()
        if b"text/event-stream" not in accept and b"*/*" not in accept:
            raise refuse(
                406, -32000, "Not Acceptable: a GET stream needs Accept: text/event-stream", "not-acceptable"
            )
        if session_id is None:
            raise refuse(400, -32000, "Bad Request: no Mcp-Session-Id header", "missing-session")
        session = self._session(call, session_id)
        stream = session.standalone
        last = request.header(b"last-event-id")
        parsed = parse_event_id(last.decode("latin-1")) if last is not None else None
        if last is not None:
            found = session.streams.get(parsed[0]) if parsed else None
            if found is None:
                raise refuse(404, -32000, "Not Found: those events are no longer kept", "unknown-event-id")
            stream = found
        if parsed is not None and stream.attached:
            # The client resumes a stream whose response it gave up on before the bridge noticed
            # (its close is still on the way): that response stops, and this one replays. One still
            # waiting to answer as JSON sent no event id to resume from: it answers, this gets 409.
            taken = await stream.take_over()
            if session.streams.get(parsed[0]) is not stream:  # the session ended meanwhile
                raise refuse(404, -32000, "Not Found: those events are no longer kept", "unknown-event-id")
            if taken:
                logger.info("%s: a stream resumed while still open was taken over", call.peer)
        if stream.attached:  # checked before any rewind: the open response must not send twice
            raise refuse(409, -32000, "Conflict: that stream is already open", "stream-open")
        if parsed is not None and not stream.rewind(parsed[1]):
            raise refuse(404, -32000, "Not Found: those events are no longer kept", "unknown-event-id")
        await self._write(call, stream, session, json_allowed=False)

    async def _delete(self, call: HttpCall) -> None:
        session_id = call.request.header(b"mcp-session-id")
        if session_id is None:
            if _version(call.request) not in (None, *LEGACY_VERSIONS):
                raise method_not_allowed(call.allow(b"POST"), "2026-07-28 has no sessions to delete")
            raise refuse(400, -32000, "Bad Request: no Mcp-Session-Id header", "missing-session")
        session = self._session(call, session_id)
        del self.sessions[session.session_id]
        logger.debug("%s: session %s deleted", session.peer, session.session_id[:8])
        session.end()
        _let_go(session)
        await call.respond(200)


def _let_go(session: SessionChannel) -> None:
    """The client ended ``session``: its responses parked after their answer (``response.park``) end now.

    Rather than at their clients' next request or their deadline, holding the session until then.
    """
    for stream in list(session.streams.values()):
        if stream.watching is not None:
            stream.nudge()


def _version(request: Request) -> str | None:
    value = request.header(b"mcp-protocol-version")
    return value.decode("latin-1") if value is not None else None
