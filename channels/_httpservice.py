"""What an HTTP listener does with each request: MCP's Streamable HTTP and HTTP+SSE transports.

One :class:`HttpService` per ``http://`` address, shared by its listeners (a host name may bind
several sockets), holds the legacy sessions and 2024-11-05 SSE streams. Each TCP connection is
served by :meth:`HttpService.serve_connection` in its own task; each session, modern request or
SSE stream becomes an :class:`~channels.Incoming` for the bridge, started in the bridge's handler
nursery. The routes:

==========================================  ================================================
``POST PATH``                               a message (2026-07-28: one request per POST;
                                            legacy: ``initialize`` opens a session)
``GET PATH``                                a legacy session's standalone event stream, or
                                            the rest of a stream after ``Last-Event-ID``
``DELETE PATH``                             ends a legacy session
``GET DIR/sse``, ``POST DIR/messages``      the 2024-11-05 HTTP+SSE transport
``GET /.well-known/oauth-protected-resource PATH``  the OAuth metadata document, if configured
``OPTIONS`` (any of them)                   CORS preflight, if configured
==========================================  ================================================

Every request first passes :class:`~channels._guard.RequestGuard` (Host, Origin, bearer token);
nothing reaches a child before every check of its kind passed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, final
from urllib.parse import parse_qs

import attrs
import trio

from ._address import ListenOptions
from ._channel import MessageChannel, PeerInfo
from ._endpoint import Endpoint
from ._guard import Rejection, RequestGuard
from ._httpconn import BadRequest, ConnectionLimits, HttpConnection, Request
from ._httpexchange import ExchangeChannel, SseChannel
from ._httpsession import SessionChannel, new_session_id
from ._httpstream import ResponseStream, StreamStyle, parse_event_id, write_response
from ._jsonrpc import JSONObject
from ._listener import HandshakeError, Incoming, IncomingHandler, tls_handshake
from ._mcphttp import (
    LEGACY_VERSIONS,
    METHOD_NOT_FOUND,
    HttpRefusal,
    check_legacy_version,
    check_modern_request,
    check_param_headers,
    check_post_headers,
    era_of,
    parse_body,
    status_for_error,
    tool_headers_from_list,
)
from ._sse import encode_event

logger = logging.getLogger("channels.http")

# Seconds a request may wait for the first message of its answer before the response commits to
# an event stream (with a priming event and keep-alives); a quicker answer is one JSON body.
JSON_WAIT = 1.0
# How often idle sessions are looked for.
REAP_INTERVAL = 10.0
# The bridge's "too many connections" code (bridge/_errors.py): over HTTP that is a 503.
_TOO_MANY = {"too-many-connections"}
# Versions whose clients resume streams: they get a priming event and a retry delay (2025-11-25
# transports text, "SSE polling").
RESUMING_VERSIONS = frozenset({"2025-11-25"})
RETRY_MS = 1000
# Distinct (Accept, Content-Type) pairs whose check is remembered: clients send one pair each.
POST_HEADER_MEMO = 64
# Requests the 2026-07-28 era removed (its changelog): on a modern POST they are answered here,
# with the 404 and -32601 the transport specifies for a method the server does not implement.
REMOVED_METHODS = frozenset(
    {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)
CORS_ALLOW_HEADERS = (
    b"authorization, content-type, accept, last-event-id, mcp-session-id, mcp-protocol-version, "
    b"mcp-method, mcp-name"
)
CORS_EXPOSE_HEADERS = b"mcp-session-id, mcp-protocol-version"


@final
@attrs.define(eq=False)
class VirtualIncoming(Incoming):
    """A session, request or SSE stream that arrived over HTTP, for the bridge to serve."""

    channel: MessageChannel

    @property
    def peer(self) -> PeerInfo:
        return self.channel.peer

    @asynccontextmanager
    async def establish(self) -> AsyncIterator[MessageChannel]:
        try:
            yield self.channel
        finally:
            await self.channel.aclose()

    async def aclose(self) -> None:
        await self.channel.aclose()


def _refusal(refusal: Rejection | HttpRefusal) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    if isinstance(refusal, Rejection):
        return refusal.status, refusal.headers(), refusal.body()
    return refusal.status, refusal.response_headers(), refusal.body()


def _error(status: int, code: int, message: str, reason: str, request_id: Any = None) -> HttpRefusal:
    return HttpRefusal(status, code, message, reason, request_id=request_id)


class HttpService:
    """The sessions and routes of one HTTP address (see the module docstring).

    Args:
        endpoint: the address's scheme, host, port and MCP path.
        guard: the Host, Origin and token checks.
        options: limits and HTTP settings.
    """

    def __init__(self, endpoint: Endpoint, guard: RequestGuard, options: ListenOptions) -> None:
        self.endpoint = endpoint
        self.guard = guard
        self.open_guard = attrs.evolve(guard, tokens=None)  # for the OAuth metadata document
        self.options = options
        self.http = options.http
        self.limits = ConnectionLimits(
            head_timeout=options.handshake_timeout,
            body_timeout=max(options.handshake_timeout, 30.0),
            idle_timeout=max(options.handshake_timeout, 60.0),
            send_timeout=30.0,
            max_body=options.max_message_bytes,
        )
        base = endpoint.path.rstrip("/").rpartition("/")[0]
        self.sse_path = f"{base}/sse"
        self.messages_path = f"{base}/messages"
        self.metadata_path = "/.well-known/oauth-protected-resource" + endpoint.path.rstrip("/")
        self.sessions: dict[str, SessionChannel] = {}
        self.sse_channels: dict[str, SseChannel] = {}
        self.tool_headers: dict[str, dict[str, tuple[str, ...]]] = {}
        self.stopping = False
        self._idle_scopes: set[trio.CancelScope] = set()
        self._post_header_checks: dict[tuple[tuple[bytes, ...], tuple[bytes, ...]], HttpRefusal | None] = {}

    # --- lifecycle -----------------------------------------------------------------------

    def stop(self) -> None:
        """Stop taking requests: idle keep-alive connections close, new requests get 503."""
        self.stopping = True
        for scope in self._idle_scopes:
            scope.cancel()

    async def reap_idle_sessions(self) -> None:
        """End sessions idle for longer than the idle timeout; runs until cancelled."""
        while True:
            await trio.sleep(min(REAP_INTERVAL, self.http.session_idle_timeout))
            now = trio.current_time()
            for session in list(self.sessions.values()):
                if session.idle and now - session.last_active > self.http.session_idle_timeout:
                    logger.info("%s: session %s idle, ended", session.peer, session.session_id[:8])
                    session.end()
                    self.sessions.pop(session.session_id, None)

    async def serve_connection(
        self,
        stream: trio.abc.Stream,
        peer: PeerInfo,
        handler: IncomingHandler,
        nursery: trio.Nursery,
    ) -> None:
        """Serve one TCP connection's requests until it closes; closes ``stream``."""
        connection = HttpConnection(stream, self.limits)
        try:
            if isinstance(stream, trio.SSLStream):
                with trio.move_on_after(self.options.handshake_timeout) as deadline:
                    peer = await tls_handshake(stream, peer)
                if deadline.cancelled_caught:
                    raise HandshakeError("no TLS handshake in time")
            first = True
            while not self.stopping or first:
                with trio.CancelScope() as idle:
                    if not first:
                        self._idle_scopes.add(idle)
                    try:
                        request = await connection.next_request(first=first)
                    except BadRequest as exc:
                        logger.info("%s: %s", peer, exc)
                        await connection.refuse(exc)
                        return
                    finally:
                        self._idle_scopes.discard(idle)
                if idle.cancelled_caught or request is None:
                    return
                first = False
                connection.closing = self.stopping
                await self._dispatch(connection, request, peer, handler, nursery)
                if not connection.reusable:
                    return
        except HandshakeError as exc:
            logger.warning("%s: refused: %s", peer, exc)
        except trio.BrokenResourceError:
            pass  # the client left mid-response
        except Exception:
            # A bug here must cost one connection, not the daemon whose nursery this runs in.
            logger.exception("%s: internal error; HTTP connection closed", peer)
        finally:
            await connection.aclose()

    # --- routing -------------------------------------------------------------------------

    async def _dispatch(
        self,
        connection: HttpConnection,
        request: Request,
        peer: PeerInfo,
        handler: IncomingHandler,
        nursery: trio.Nursery,
    ) -> None:
        path = request.path
        metadata = path == self.metadata_path and self.http.resource_metadata is not None
        route = {
            self.endpoint.path: self._mcp,
            self.sse_path: self._legacy_sse,
            self.messages_path: self._legacy_message,
        }.get(path)
        if route is None and not metadata:
            await self._respond(
                connection,
                _error(404, -32000, f"Not Found: the MCP endpoint is {self.endpoint.path}", "not-found"),
            )
            return
        host = request.header(b"host")
        if self.http.trust_proxy:
            forwarded = request.header(b"x-forwarded-host")
            if forwarded is not None:
                host = forwarded.split(b",")[0].strip()
            forwarded_for = request.header(b"x-forwarded-for")
            if forwarded_for is not None:
                peer = attrs.evolve(peer, address=forwarded_for.split(b",")[0].strip().decode("latin-1"))
        cors = self._cors_headers(request)
        if request.method == "OPTIONS" and cors:
            await connection.respond(204, [*cors, *self._preflight_headers()])
            return
        outcome = (self.open_guard if metadata else self.guard).check(
            host.decode("latin-1") if host is not None else None, request.headers
        )
        if isinstance(outcome, Rejection):
            logger.info("%s: %s %s refused: %s", peer, request.method, path, outcome.message)
            await self._respond(connection, outcome, cors)
            return
        origin = request.header(b"origin")
        agent = request.header(b"user-agent")
        peer = attrs.evolve(
            peer,
            credential=outcome,
            origin=origin.decode("latin-1") if origin else None,
            user_agent=agent.decode("latin-1") if agent else None,
        )
        if metadata:
            await self._metadata(connection, request, cors)
            return
        if self.stopping:
            await self._respond(
                connection,
                _error(503, -32000, "Service Unavailable: the server is stopping", "shutting-down"),
                cors,
            )
            return
        assert route is not None
        await route(connection, request, peer, handler, nursery, cors)

    async def _respond(
        self,
        connection: HttpConnection,
        refusal: Rejection | HttpRefusal,
        extra: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        status, headers, body = _refusal(refusal)
        if status == 401 and self.http.resource_metadata is not None:
            headers = [(name, value) for name, value in headers if name != b"www-authenticate"]
            headers.append(
                (b"www-authenticate", f'Bearer resource_metadata="{self._metadata_url()}"'.encode())
            )
        await connection.respond(status, [*headers, *(extra or ())], body)

    def _metadata_url(self) -> str:
        return f"{self.endpoint.scheme}://{self.endpoint.authority}{self.metadata_path}"

    async def _metadata(
        self, connection: HttpConnection, request: Request, cors: list[tuple[bytes, bytes]]
    ) -> None:
        if request.method != "GET":
            await connection.respond(405, [(b"allow", b"GET"), *cors])
            return
        document = dict(self.http.resource_metadata or {})
        document.setdefault("resource", str(self.endpoint))
        await connection.respond(
            200, [(b"content-type", b"application/json"), *cors], json.dumps(document).encode()
        )

    def _check_post_headers(self, request: Request) -> HttpRefusal | None:
        """:func:`check_post_headers`, remembered per distinct Accept and Content-Type pair.

        A client sends the same two on every POST, and parsing Accept's ranges and q-values is
        a measurable part of a small request's cost.
        """
        key = (
            tuple(value for name, value in request.headers if name == b"accept"),
            tuple(value for name, value in request.headers if name == b"content-type"),
        )
        try:
            return self._post_header_checks[key]
        except KeyError:
            pass
        refusal = check_post_headers(request.headers)
        if len(self._post_header_checks) >= POST_HEADER_MEMO:
            self._post_header_checks.clear()
        self._post_header_checks[key] = refusal
        return refusal

    def _cors_headers(self, request: Request) -> list[tuple[bytes, bytes]]:
        origin = request.header(b"origin")
        if origin is None or origin.decode("latin-1").lower().rstrip("/") not in self.http.cors_origins:
            return []
        return [
            (b"access-control-allow-origin", origin),
            (b"access-control-expose-headers", CORS_EXPOSE_HEADERS),
            (b"vary", b"origin"),
        ]

    def _preflight_headers(self) -> list[tuple[bytes, bytes]]:
        return [
            (b"access-control-allow-methods", b"GET, POST, DELETE, OPTIONS"),
            (b"access-control-allow-headers", CORS_ALLOW_HEADERS),
            (b"access-control-max-age", b"600"),
        ]

    # --- the MCP endpoint ----------------------------------------------------------------

    async def _mcp(
        self,
        connection: HttpConnection,
        request: Request,
        peer: PeerInfo,
        handler: IncomingHandler,
        nursery: trio.Nursery,
        cors: list[tuple[bytes, bytes]],
    ) -> None:
        if request.method == "POST":
            await self._post(connection, request, peer, handler, nursery, cors)
        elif request.method == "GET":
            await self._get(connection, request, cors)
        elif request.method == "DELETE":
            await self._delete(connection, request, cors)
        else:
            allow = b"GET, POST, DELETE, OPTIONS" if cors else b"GET, POST, DELETE"
            await self._respond(
                connection,
                HttpRefusal(
                    405, -32000, "Method Not Allowed", "method-not-allowed", headers=((b"allow", allow),)
                ),
                cors,
            )

    async def _post(
        self,
        connection: HttpConnection,
        request: Request,
        peer: PeerInfo,
        handler: IncomingHandler,
        nursery: trio.Nursery,
        cors: list[tuple[bytes, bytes]],
    ) -> None:
        refusal = self._check_post_headers(request)
        parsed = refusal or parse_body(request.body)
        if isinstance(parsed, HttpRefusal):
            await self._respond(connection, parsed, cors)
            return
        if isinstance(parsed, dict) and era_of(parsed, request.headers) == "modern":
            await self._modern(connection, request, parsed, peer, handler, nursery, cors)
            return
        messages = parsed if isinstance(parsed, list) else [parsed]
        refusal = check_legacy_version(request.headers)
        if refusal is not None:
            await self._respond(connection, refusal, cors)
            return
        session_id = request.header(b"mcp-session-id")
        if session_id is None:
            if len(messages) == 1 and messages[0].get("method") == "initialize" and "id" in messages[0]:
                await self._initialize(connection, messages[0], peer, handler, nursery, cors)
            else:
                await self._respond(
                    connection,
                    _error(
                        400,
                        -32000,
                        "Bad Request: no Mcp-Session-Id header; open a session with initialize first",
                        "missing-session",
                    ),
                    cors,
                )
            return
        session = self.sessions.get(session_id.decode("latin-1"))
        if session is None or session.closed or session.ended:
            await self._respond(connection, _error(404, -32001, "Session not found", "unknown-session"), cors)
            return
        if isinstance(parsed, list) and session.protocol_version not in (None, "2025-03-26"):
            await self._respond(
                connection,
                _error(
                    400, -32600, "Invalid Request: batches were removed after 2025-03-26", "batch-not-allowed"
                ),
                cors,
            )
            return
        requests = [message for message in messages if "method" in message and "id" in message]
        for message in requests:
            if message["method"] == "initialize":
                await self._respond(
                    connection,
                    _error(
                        400,
                        -32600,
                        "Invalid Request: the session is already initialized",
                        "already-initialized",
                        message["id"],
                    ),
                    cors,
                )
                return
            if session.in_flight(message["id"]):
                await self._respond(
                    connection,
                    _error(
                        400,
                        -32600,
                        "Invalid Request: a request with this id is already in flight",
                        "duplicate-id",
                        message["id"],
                    ),
                    cors,
                )
                return
        stream = session.open_request_stream(requests) if requests else None
        try:
            await session.deliver(messages)
        except trio.ClosedResourceError:
            await self._respond(connection, _error(404, -32001, "Session not found", "unknown-session"), cors)
            return
        if stream is None:
            await connection.respond(202, cors)
            return
        await self._write(connection, stream, self._session_style(session, cors), session=session)

    def _session_style(
        self, session: SessionChannel, cors: list[tuple[bytes, bytes]], *, json_allowed: bool = True
    ) -> StreamStyle:
        resuming = session.protocol_version in RESUMING_VERSIONS
        return StreamStyle(
            extra_headers=[(b"mcp-session-id", session.session_id.encode()), *cors],
            json_allowed=json_allowed,
            json_wait=JSON_WAIT,
            priming=resuming,
            retry_ms=RETRY_MS if resuming else None,
            keepalive=self.http.sse_keepalive,
        )

    async def _write(
        self,
        connection: HttpConnection,
        stream: ResponseStream,
        style: StreamStyle,
        *,
        session: SessionChannel | None = None,
    ) -> bool:
        """Write ``stream`` as the response; False if the client left before it was complete."""
        complete = await write_response(connection, stream, style)
        if session is not None:
            session.last_active = trio.current_time()
            if stream.ended:
                session.forget(stream)
        return complete

    async def _initialize(
        self,
        connection: HttpConnection,
        message: JSONObject,
        peer: PeerInfo,
        handler: IncomingHandler,
        nursery: trio.Nursery,
        cors: list[tuple[bytes, bytes]],
    ) -> None:
        if len(self.sessions) + len(self.sse_channels) >= self.http.max_sessions:
            await self._respond(
                connection,
                _error(
                    503, -32000, "Service Unavailable: too many sessions", "too-many-sessions", message["id"]
                ),
                cors,
            )
            return
        session = SessionChannel(new_session_id(), peer, self.http.event_budget)
        self.sessions[session.session_id] = session
        session.on_close.append(lambda closed: self.sessions.pop(closed.session_id, None))
        stream = session.open_request_stream([message])
        await session.deliver([message])
        nursery.start_soon(handler, VirtualIncoming(session))
        logger.debug("%s: session %s opened", peer, session.session_id[:8])
        await self._write(connection, stream, self._session_style(session, cors), session=session)
        if stream.ended and session.protocol_version is None:  # it failed: no session after all
            session.end()
            self.sessions.pop(session.session_id, None)

    async def _get(
        self, connection: HttpConnection, request: Request, cors: list[tuple[bytes, bytes]]
    ) -> None:
        version = request.header(b"mcp-protocol-version")
        session_id = request.header(b"mcp-session-id")
        if session_id is None and (version is None or version.decode("latin-1") not in LEGACY_VERSIONS):
            allow = b"POST, OPTIONS" if cors else b"POST"
            await self._respond(
                connection,
                HttpRefusal(
                    405,
                    -32000,
                    "Method Not Allowed: open a session with initialize for a GET stream",
                    "method-not-allowed",
                    headers=((b"allow", allow),),
                ),
                cors,
            )
            return
        accept = b",".join(value for name, value in request.headers if name == b"accept").lower()
        if b"text/event-stream" not in accept and b"*/*" not in accept:
            await self._respond(
                connection,
                _error(
                    406,
                    -32000,
                    "Not Acceptable: a GET stream needs Accept: text/event-stream",
                    "not-acceptable",
                ),
                cors,
            )
            return
        if session_id is None:
            await self._respond(
                connection,
                _error(400, -32000, "Bad Request: no Mcp-Session-Id header", "missing-session"),
                cors,
            )
            return
        session = self.sessions.get(session_id.decode("latin-1"))
        if session is None or session.closed or session.ended:
            await self._respond(connection, _error(404, -32001, "Session not found", "unknown-session"), cors)
            return
        stream = session.standalone
        last = request.header(b"last-event-id")
        if last is not None:
            parsed = parse_event_id(last.decode("latin-1"))
            found = session.streams.get(parsed[0]) if parsed else None
            if found is None or parsed is None or not found.rewind(parsed[1]):
                await self._respond(
                    connection,
                    _error(404, -32000, "Not Found: those events are no longer kept", "unknown-event-id"),
                    cors,
                )
                return
            stream = found
        if stream.attached:
            await self._respond(
                connection, _error(409, -32000, "Conflict: that stream is already open", "stream-open"), cors
            )
            return
        await self._write(
            connection, stream, self._session_style(session, cors, json_allowed=False), session=session
        )

    async def _delete(
        self, connection: HttpConnection, request: Request, cors: list[tuple[bytes, bytes]]
    ) -> None:
        session_id = request.header(b"mcp-session-id")
        version = request.header(b"mcp-protocol-version")
        if session_id is None and version is not None and version.decode("latin-1") not in LEGACY_VERSIONS:
            allow = b"POST, OPTIONS" if cors else b"POST"
            refusal = HttpRefusal(
                405,
                -32000,
                "Method Not Allowed: 2026-07-28 has no sessions to delete",
                "method-not-allowed",
                headers=((b"allow", allow),),
            )
            await self._respond(connection, refusal, cors)
            return
        if session_id is None:
            await self._respond(
                connection,
                _error(400, -32000, "Bad Request: no Mcp-Session-Id header", "missing-session"),
                cors,
            )
            return
        session = self.sessions.pop(session_id.decode("latin-1"), None)
        if session is None or session.closed or session.ended:
            await self._respond(connection, _error(404, -32001, "Session not found", "unknown-session"), cors)
            return
        logger.debug("%s: session %s deleted", session.peer, session.session_id[:8])
        session.end()
        await connection.respond(200, cors)

    async def _modern(
        self,
        connection: HttpConnection,
        request: Request,
        message: JSONObject,
        peer: PeerInfo,
        handler: IncomingHandler,
        nursery: trio.Nursery,
        cors: list[tuple[bytes, bytes]],
    ) -> None:
        refusal = check_modern_request(message, request.headers) or check_param_headers(
            message, request.headers, self.tool_headers
        )
        if refusal is not None:
            await self._respond(connection, refusal, cors)
            return
        if message.get("method") in REMOVED_METHODS and "id" in message:
            # Not forwarded: a dual-era child would answer initialize with -32022, or worse,
            # settle a shared process into the legacy era for everyone.
            refusal = HttpRefusal(
                404, METHOD_NOT_FOUND, "Method not found", "removed-method", request_id=message["id"]
            )
            await self._respond(connection, refusal, cors)
            return
        if "id" not in message or "method" not in message:
            # 2026-07-28 defines no client notification over HTTP (cancelling is closing the
            # response); it is accepted and, with no request to relate to, goes no further.
            await connection.respond(202, cors)
            return
        exchange = ExchangeChannel(message, peer, _modern_status, self._learn)
        nursery.start_soon(handler, VirtualIncoming(exchange))
        style = StreamStyle(extra_headers=cors, json_wait=JSON_WAIT, keepalive=self.http.sse_keepalive)
        if not await self._write(connection, exchange.stream, style):
            exchange.leave()

    def _learn(self, request: JSONObject, reply: JSONObject) -> None:
        if request.get("method") == "tools/list" and isinstance(reply.get("result"), dict):
            self.tool_headers.update(tool_headers_from_list(reply["result"]))

    # --- the 2024-11-05 HTTP+SSE transport ------------------------------------------------

    async def _legacy_sse(
        self,
        connection: HttpConnection,
        request: Request,
        peer: PeerInfo,
        handler: IncomingHandler,
        nursery: trio.Nursery,
        cors: list[tuple[bytes, bytes]],
    ) -> None:
        if request.method != "GET":
            await self._respond(
                connection,
                HttpRefusal(
                    405, -32000, "Method Not Allowed", "method-not-allowed", headers=((b"allow", b"GET"),)
                ),
                cors,
            )
            return
        if len(self.sessions) + len(self.sse_channels) >= self.http.max_sessions:
            await self._respond(
                connection,
                _error(503, -32000, "Service Unavailable: too many sessions", "too-many-sessions"),
                cors,
            )
            return
        channel = SseChannel(new_session_id(), peer)
        self.sse_channels[channel.session_id] = channel
        channel.on_close.append(lambda closed: self.sse_channels.pop(closed.session_id, None))
        nursery.start_soon(handler, VirtualIncoming(channel))
        endpoint = encode_event(
            f"{self.messages_path}?session_id={channel.session_id}".encode(), event="endpoint"
        )
        style = StreamStyle(
            extra_headers=cors, json_allowed=False, keepalive=self.http.sse_keepalive, event="message"
        )
        try:
            await write_response(connection, channel.stream, style, first_events=[endpoint])
        finally:
            channel.leave()
            self.sse_channels.pop(channel.session_id, None)

    async def _legacy_message(
        self,
        connection: HttpConnection,
        request: Request,
        peer: PeerInfo,
        handler: IncomingHandler,
        nursery: trio.Nursery,
        cors: list[tuple[bytes, bytes]],
    ) -> None:
        if request.method != "POST":
            await self._respond(
                connection,
                HttpRefusal(
                    405, -32000, "Method Not Allowed", "method-not-allowed", headers=((b"allow", b"POST"),)
                ),
                cors,
            )
            return
        query = parse_qs(request.query)
        ids = query.get("session_id") or query.get("sessionId")
        if not ids:
            await self._respond(
                connection, _error(400, -32000, "Bad Request: session_id is missing", "missing-session"), cors
            )
            return
        channel = self.sse_channels.get(ids[0])
        if channel is None:
            await self._respond(connection, _error(404, -32001, "Session not found", "unknown-session"), cors)
            return
        content_type = request.header(b"content-type") or b""
        if not content_type.lower().startswith(b"application/json"):
            await self._respond(
                connection,
                _error(
                    415, -32000, "Unsupported Media Type: expected application/json", "unsupported-media-type"
                ),
                cors,
            )
            return
        parsed = parse_body(request.body)
        if isinstance(parsed, HttpRefusal):
            await self._respond(connection, parsed, cors)
            return
        try:
            for message in parsed if isinstance(parsed, list) else [parsed]:
                await channel.deliver(message)
        except trio.ClosedResourceError:
            await self._respond(connection, _error(404, -32001, "Session not found", "unknown-session"), cors)
            return
        await connection.respond(202, [(b"content-type", b"text/plain"), *cors], b"Accepted")


def _modern_status(reply: JSONObject) -> int:
    error = reply.get("error")
    if not isinstance(error, dict):
        return 200
    data = error.get("data")
    if isinstance(data, dict) and data.get("reason") in _TOO_MANY:
        return 503
    code = error.get("code")
    return status_for_error(code) if isinstance(code, int) else 200
