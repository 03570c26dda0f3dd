"""What an HTTP listener does with each request: MCP's Streamable HTTP and HTTP+SSE transports.

One :class:`HttpService` per ``http://`` address, shared by its listeners (a host name may bind
several sockets). Each TCP connection is served by :meth:`HttpService.serve_connection` in its
own task; each session, modern request or SSE stream becomes an :class:`~channels.Incoming` for
the bridge, started in the bridge's handler nursery. The routes:

==========================================  ================================================
``POST PATH``                               a message (2026-07-28: one request per POST;
                                            legacy: ``initialize`` opens a session), see
                                            :mod:`channels._httpendpoint`
``GET PATH``                                a legacy session's standalone event stream, or
                                            the rest of a stream after ``Last-Event-ID``
``DELETE PATH``                             ends a legacy session
``GET DIR/sse``, ``POST DIR/messages``      the 2024-11-05 HTTP+SSE transport, see
                                            :mod:`channels._httplegacy`
``GET /.well-known/oauth-protected-resource PATH``  the OAuth metadata document, if configured
``OPTIONS`` (any of them)                   CORS preflight, if configured
==========================================  ================================================

Every request first passes :class:`~channels._guard.RequestGuard` (Host, Origin, bearer token);
nothing reaches a child before every check of its kind passed. A route refuses a request by
raising :class:`~channels._httpcall.Refused` before it has answered anything; the refusal is
answered here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

import attrs
import trio

from ._address import ListenOptions
from ._channel import PeerInfo
from ._endpoint import Endpoint
from ._guard import Rejection, RequestGuard
from ._httpcall import HttpCall, Refused, method_not_allowed, refuse
from ._httpconn import BadRequest, ConnectionLimits, HttpConnection, Request
from ._httpendpoint import McpEndpoint
from ._httplegacy import LegacySse
from ._listener import HandshakeError, IncomingHandler, tls_handshake
from ._mcphttp import HttpRefusal
from ._ticker import Ticker

logger = logging.getLogger("channels.http")

# The body of a request may take this long once its head is in, and a kept-alive connection may
# wait this long for its next request (nginx's client_body_timeout and keepalive_timeout are 60 s
# and 75 s); both at least the handshake timeout.
BODY_TIMEOUT = 30.0
IDLE_TIMEOUT = 60.0
# A response the client does not read for this long is cut off (as --send-timeout's default).
SEND_TIMEOUT = 30.0
CORS_ALLOW_HEADERS = (
    b"authorization, content-type, accept, last-event-id, mcp-session-id, mcp-protocol-version, "
    b"mcp-method, mcp-name"
)
CORS_EXPOSE_HEADERS = b"mcp-session-id, mcp-protocol-version"
CORS_MAX_AGE = b"600"  # seconds a browser may remember a preflight (Chromium caps it at 7200)

Headers = Sequence[tuple[bytes, bytes]]


class HttpService:
    """The routes of one HTTP address (see the module docstring).

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
            body_timeout=max(options.handshake_timeout, BODY_TIMEOUT),
            idle_timeout=max(options.handshake_timeout, IDLE_TIMEOUT),
            send_timeout=SEND_TIMEOUT,
            max_body=options.max_message_bytes,
        )
        self.mcp = McpEndpoint(self)
        base = endpoint.path.rstrip("/").rpartition("/")[0]
        self.legacy = LegacySse(self, messages_path=f"{base}/messages")
        self.metadata_path = "/.well-known/oauth-protected-resource" + endpoint.path.rstrip("/")
        self._routes = {
            endpoint.path: self.mcp.handle,
            f"{base}/sse": self.legacy.open_stream,
            f"{base}/messages": self.legacy.post_message,
        }
        self.stopping = False
        self.ticker = Ticker()

    def session_count(self) -> int:
        """Legacy sessions and 2024-11-05 streams open now (they share ``max_sessions``)."""
        return len(self.mcp.sessions) + len(self.legacy.channels)

    # --- lifecycle -----------------------------------------------------------------------

    def stop(self) -> None:
        """Stop taking requests: idle keep-alive connections close, new requests get 503."""
        self.stopping = True
        for waiter in self.ticker.waiters():
            if isinstance(waiter, HttpConnection) and waiter.phase == "idle":
                self.ticker.discard(waiter)
                waiter.expire()

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
            # Cancelled only while a read is overdue (the ticker's doing) or idle while stopping.
            with trio.CancelScope() as reading:
                connection.read_scope = reading
                first = True
                while not self.stopping or first:
                    self.ticker.add(connection)
                    try:
                        request = await connection.next_request(first=first)
                    except BadRequest as exc:
                        logger.info("%s: %s", peer, exc)
                        await connection.refuse(exc)
                        return
                    finally:
                        self.ticker.discard(connection)
                    if request is None:
                        return
                    first = False
                    connection.closing = self.stopping
                    await self._dispatch(connection, request, peer, handler, nursery)
                    del request  # a large body is not kept while the connection waits for the next
                    if not connection.reusable:
                        return
            timeout = connection.timed_out() if reading.cancelled_caught else None
            if timeout is not None:
                logger.info("%s: %s", peer, timeout)
                await connection.refuse(timeout)
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
        route = self._routes.get(path)
        if route is None and not metadata:
            message = f"Not Found: the MCP endpoint is {self.endpoint.path}"
            await self._refuse(connection, HttpRefusal(404, -32000, message, "not-found"))
            return
        host = request.header(b"host")
        if self.http.trust_proxy:
            host, peer = _forwarded(request, host, peer)
        cors = self._cors_headers(request)
        if request.method == "OPTIONS" and cors:
            await connection.respond(204, [*cors, *PREFLIGHT_HEADERS])
            return
        outcome = (self.open_guard if metadata else self.guard).check(
            host.decode("latin-1") if host is not None else None, request.headers
        )
        if isinstance(outcome, Rejection):
            logger.info("%s: %s %s refused: %s", peer, request.method, path, outcome.message)
            await self._refuse(connection, outcome, cors, request)
            return
        call = HttpCall(connection, request, peer, outcome, handler, nursery, cors)
        try:
            if metadata:
                await self._metadata(call)
            elif self.stopping:
                raise refuse(503, -32000, "Service Unavailable: the server is stopping", "shutting-down")
            else:
                assert route is not None
                await route(call)
        except Refused as exc:
            await self._refuse(connection, exc.refusal, cors, request)

    async def _refuse(
        self,
        connection: HttpConnection,
        refusal: Rejection | HttpRefusal,
        cors: Headers = (),
        request: Request | None = None,
    ) -> None:
        if isinstance(refusal, Rejection):
            status, headers, body = refusal.status, refusal.headers(), refusal.body()
        else:
            status, headers, body = refusal.status, refusal.response_headers(), refusal.body()
        if status == 401 and self.http.resource_metadata is not None:
            headers = [(name, value) for name, value in headers if name != b"www-authenticate"]
            challenge = f'Bearer resource_metadata="{self._public_base(request)}{self.metadata_path}"'
            headers.append((b"www-authenticate", challenge.encode()))
        await connection.respond(status, [*headers, *cors], body)

    def _public_base(self, request: Request | None) -> str:
        """``SCHEME://HOST[:PORT]`` as the client reached this endpoint.

        The request's ``Host`` (already checked by the guard), or behind a trusted proxy its
        ``X-Forwarded-Host`` and ``X-Forwarded-Proto``; the bound address if there is none.
        """
        scheme, authority = self.endpoint.scheme, self.endpoint.authority
        if request is None:
            return f"{scheme}://{authority}"
        host = request.header(b"host")
        if self.http.trust_proxy:
            forwarded_host = request.header(b"x-forwarded-host")
            forwarded_proto = request.header(b"x-forwarded-proto")
            if forwarded_host is not None:
                host = forwarded_host.split(b",")[0].strip()
            if forwarded_proto is not None:
                proto = forwarded_proto.split(b",")[0].strip().lower()
                scheme = proto.decode("latin-1") if proto in (b"http", b"https") else scheme
        if host:
            authority = host.decode("latin-1")
        return f"{scheme}://{authority}"

    async def _metadata(self, call: HttpCall) -> None:
        if call.request.method != "GET":
            raise method_not_allowed(b"GET")
        document = dict(self.http.resource_metadata or {})
        document.setdefault("resource", self._public_base(call.request) + self.endpoint.path)
        await call.respond(200, [(b"content-type", b"application/json")], json.dumps(document).encode())

    def _cors_headers(self, request: Request) -> tuple[tuple[bytes, bytes], ...]:
        origin = request.header(b"origin")
        if origin is None or origin.decode("latin-1").lower().rstrip("/") not in self.http.cors_origins:
            return ()
        return (
            (b"access-control-allow-origin", origin),
            (b"access-control-expose-headers", CORS_EXPOSE_HEADERS),
            (b"vary", b"origin"),
        )


PREFLIGHT_HEADERS = (
    (b"access-control-allow-methods", b"GET, POST, DELETE, OPTIONS"),
    (b"access-control-allow-headers", CORS_ALLOW_HEADERS),
    (b"access-control-max-age", CORS_MAX_AGE),
)


def _forwarded(request: Request, host: bytes | None, peer: PeerInfo) -> tuple[bytes | None, PeerInfo]:
    """Behind a trusted proxy: the Host the client asked for and the client's address."""
    forwarded_host = request.header(b"x-forwarded-host")
    if forwarded_host is not None:
        host = forwarded_host.split(b",")[0].strip()
    forwarded_for = request.header(b"x-forwarded-for")
    if forwarded_for is not None:
        peer = attrs.evolve(peer, address=forwarded_for.split(b",")[0].strip().decode("latin-1"))
    return host, peer
