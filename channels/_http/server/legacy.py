"""The 2024-11-05 HTTP+SSE transport, for clients older than Streamable HTTP.

``GET DIR/sse`` opens an event stream (an :class:`~channels._http.server.exchange.SseChannel`, one child
or attachment each, as a connection): its first event, ``endpoint``, names
``DIR/messages?session_id=ID``, where the client POSTs its messages (202 ``Accepted``; 400 without
a session id or with a bad body, 404 for an unknown one); everything for the client comes as
``message`` events. Closing the stream ends the channel.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qs

import trio

from ..._core.jsonrpc import RequestId
from ..._core.options import HttpOptions
from ..._mcp.admission import HttpRefusal, parse_body
from ..sse import encode_event
from .call import HttpCall, Refused, method_not_allowed, refuse
from .exchange import SseChannel
from .response import StreamStyle, write_response
from .session import new_session_id


class LegacySse:
    """The transport's streams (see the module docstring).

    Args:
        http: the listener's HTTP settings (the session cap, keep-alive).
        messages_path: where clients POST; named in each stream's ``endpoint`` event.
        session_count: the sessions open now on the whole listener, these and the Streamable
            HTTP endpoint's (they share ``max_sessions``).
    """

    def __init__(self, http: HttpOptions, messages_path: str, session_count: Callable[[], int]) -> None:
        self.http = http
        self.messages_path = messages_path
        self.session_count = session_count
        self.channels: dict[str, SseChannel] = {}

    async def open_stream(self, call: HttpCall) -> None:
        if call.request.method != "GET":
            raise method_not_allowed(b"GET")
        if self.session_count() >= self.http.max_sessions:
            raise refuse(503, -32000, "Service Unavailable: too many sessions", "too-many-sessions")
        channel = SseChannel(new_session_id(), call.peer)
        self.channels[channel.session_id] = channel
        channel.on_close.append(lambda closed: self.channels.pop(closed.session_id, None))
        call.start(channel)
        endpoint = f"{self.messages_path}?session_id={channel.session_id}".encode()
        style = StreamStyle(
            extra_headers=call.cors,
            json_allowed=False,
            keepalive=self.http.sse_keepalive,
            event="message",
        )
        try:
            await write_response(
                call.connection,
                channel.stream,
                style,
                first_events=[encode_event(endpoint, event="endpoint")],
            )
        finally:
            channel.leave()
            self.channels.pop(channel.session_id, None)

    async def post_message(self, call: HttpCall) -> None:
        request = call.request
        if request.method != "POST":
            raise method_not_allowed(b"POST")
        query = parse_qs(request.query)
        ids = query.get("session_id") or query.get("sessionId")  # the Python and TypeScript SDKs' names
        if not ids:
            raise refuse(
                400,
                -32000,
                "Bad Request: session_id is missing",
                "missing-session",
                _request_id(request.body),
            )
        channel = self.channels.get(ids[0])
        if channel is None or not call.owns(channel.peer):  # bound to its token
            raise refuse(404, -32001, "Session not found", "unknown-session", _request_id(request.body))
        content_type = request.header(b"content-type") or b""
        if not content_type.lower().startswith(b"application/json"):
            raise refuse(
                415, -32000, "Unsupported Media Type: expected application/json", "unsupported-media-type"
            )
        parsed = parse_body(request.body)
        if isinstance(parsed, HttpRefusal):
            raise Refused(parsed)
        try:
            for message in parsed if isinstance(parsed, list) else [parsed]:
                await channel.deliver(message)
        except trio.ClosedResourceError:
            request_id = parsed.get("id") if isinstance(parsed, dict) else None
            raise refuse(404, -32001, "Session not found", "unknown-session", request_id) from None
        await call.respond(202, [(b"content-type", b"text/plain")], b"Accepted")


def _request_id(body: bytes | bytearray) -> RequestId | None:
    """The id of the one request ``body`` holds, for a refusal to name; ``None`` if it holds none."""
    parsed = parse_body(body)
    return parsed.get("id") if isinstance(parsed, dict) else None
