"""What an HTTP listener does with each request: MCP's Streamable HTTP and HTTP+SSE transports.

One :class:`HttpService` per ``http://`` address, shared by its listeners (a host name may bind
several sockets). Each TCP connection is served by :meth:`HttpService.serve_connection` in its
own task; each session, modern request or SSE stream becomes an :class:`~channels.Incoming` for
the bridge, started in the bridge's handler nursery. The routes:

==========================================  ================================================
``POST PATH``                               a message (2026-07-28: one request per POST;
                                            legacy: ``initialize`` opens a session), see
                                            :mod:`channels._http.server.endpoint`
``GET PATH``                                a legacy session's standalone event stream, or
                                            the rest of a stream after ``Last-Event-ID``
``DELETE PATH``                             ends a legacy session
``GET DIR/sse``, ``POST DIR/messages``      the 2024-11-05 HTTP+SSE transport, see
                                            :mod:`channels._http.server.legacy`
``GET /.well-known/oauth-protected-resource PATH``  the OAuth metadata document, if configured
``OPTIONS`` (any of them)                   CORS preflight, if configured
==========================================  ================================================

Every request first passes :class:`~channels._core.guard.RequestGuard` (Host, Origin, bearer
token), and with OAuth :mod:`channels._http.server.oauth` (the access token, on the head, finished
before routing if it needs a fetch); nothing reaches a child before every check of its kind
passed. A route refuses a request by raising :class:`~channels._http.server.call.Refused` before
it has answered anything; the refusal is answered here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from functools import partial

import attrs
import trio

from ..._core.channel import PeerInfo
from ..._core.guard import Rejection, RequestGuard, header_values
from ..._core.listener import HandshakeError, IncomingHandler, tls_handshake
from ..._core.oauth import Principal
from ..._core.options import ListenOptions
from ..._core.ticker import Ticker
from ..._core.tlsstream import TLS_STREAMS
from ..._mcp.admission import HttpRefusal
from ..._sockets.endpoint import Endpoint
from .call import HttpCall, Refused, method_not_allowed, refuse
from .conn import ConnectionLimits, HttpConnection
from .endpoint import McpEndpoint
from .legacy import LegacySse
from .oauth import WELL_KNOWN, HttpOAuth
from .request import BadRequest, Credential, Request, Unverified

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
CORS_MAX_AGE = b"600"
# TCP connections one HTTP address serves at once; more wait in the kernel's listen backlog.
# Each costs a file descriptor and a task; systemd's default soft limit is 1024 descriptors, and
# children and their pipes need some too.
MAX_CONNECTIONS = 512  # seconds a browser may remember a preflight (Chromium caps it at 7200)

Headers = Sequence[tuple[bytes, bytes]]


class HttpService:
    """The routes of one HTTP address (see the module docstring).

    Args:
        endpoint: the address's scheme, host, port and MCP path.
        guard: the Host, Origin and token checks.
        options: limits and HTTP settings.
        oauth: the OAuth check, which the service owns (its verifier runs beside the connections).
    """

    def __init__(
        self, endpoint: Endpoint, guard: RequestGuard, options: ListenOptions, oauth: HttpOAuth | None = None
    ) -> None:
        self.endpoint = endpoint
        self.guard = guard
        self.open_guard = attrs.evolve(guard, tokens=None)  # for the metadata document, and OAuth
        self.oauth = oauth
        self.options = options
        self.http = options.http
        self.limits = ConnectionLimits(
            head_timeout=options.handshake_timeout,
            body_timeout=max(options.handshake_timeout, BODY_TIMEOUT),
            idle_timeout=max(options.handshake_timeout, IDLE_TIMEOUT),
            send_timeout=SEND_TIMEOUT,
            max_body=options.max_message_bytes,
        )
        self.ticker = Ticker()
        self.mcp = McpEndpoint(self.http, self.ticker, self.session_count)
        base = endpoint.path.rstrip("/").rpartition("/")[0]
        self.legacy = LegacySse(self.http, f"{base}/messages", self.session_count)
        self.metadata_path = WELL_KNOWN + endpoint.path.rstrip("/")
        # An explicit document (--oauth-metadata) wins over the one generated from the OAuth settings.
        self.document = self.http.resource_metadata or (oauth.document if oauth is not None else None)
        self.metadata_paths = oauth.metadata_paths if oauth is not None else {self.metadata_path}
        self._routes = {
            endpoint.path: self.mcp.handle,
            f"{base}/sse": self.legacy.open_stream,
            f"{base}/messages": self.legacy.post_message,
        }
        self.stopping = False
        self._slots = trio.CapacityLimiter(MAX_CONNECTIONS)
        self._ticking = False

    async def connection_slot(self) -> object:
        """Wait for room for one more TCP connection; give the token back to :meth:`release_slot`."""
        slot = object()
        await self._slots.acquire_on_behalf_of(slot)
        return slot

    def release_slot(self, slot: object) -> None:
        self._slots.release_on_behalf_of(slot)

    async def start_background(self, nursery: trio.Nursery) -> None:
        """Run the deadlines' ticker and the OAuth verifier in ``nursery``, once; wait till ready.

        ``nursery`` is the bridge's handler nursery: they live beside the connections, not the
        accept loop, since a graceful stop cancels accepting while reads, answers and token
        checks in progress still need them. They end once the service is stopping and no
        connection is left.
        """
        if not self._ticking:
            self._ticking = True
            await nursery.start(self._background)

    async def _background(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            if self.oauth is not None:
                await nursery.start(self.oauth.run)
            task_status.started()
            await self.ticker.run(lambda: self.stopping and self._slots.borrowed_tokens == 0)
            nursery.cancel_scope.cancel()

    def session_count(self) -> int:
        """Legacy sessions and 2024-11-05 streams open now (they share ``max_sessions``)."""
        return len(self.mcp.sessions) + len(self.legacy.channels)

    # --- lifecycle -----------------------------------------------------------------------

    def stop(self) -> None:
        """Stop taking requests: idle keep-alive connections close, new requests get 503."""
        self.stopping = True
        for waiter in self.ticker.waiters():
            if isinstance(waiter, HttpConnection) and waiter.waiting_for_request:
                self.ticker.discard(waiter)
                waiter.expire()

    async def serve_connection(
        self,
        stream: trio.abc.Stream,
        peer: PeerInfo,
        handler: IncomingHandler,
        nursery: trio.Nursery,
        slot: object = None,
    ) -> None:
        """Serve one TCP connection's requests until it closes.

        Closes ``stream`` and gives back ``slot`` (its place among :data:`MAX_CONNECTIONS`).
        """
        connection = HttpConnection(stream, self.limits, partial(self._check_head, peer))
        try:
            if isinstance(stream, TLS_STREAMS):
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
                        if not exc.logged:
                            logger.info("%s: %s", peer, exc)
                        await connection.refuse(exc)
                        if exc.keep_alive and connection.reusable:
                            first = False
                            continue  # an over-limit body read to its end: the next may follow
                        return
                    finally:
                        self.ticker.discard(connection)
                    if request is None:
                        return
                    if reading.cancel_called:
                        return  # it came just as its deadline passed: not served, the connection closes
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
            if slot is not None:
                self.release_slot(slot)

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
        metadata = path in self.metadata_paths and self.document is not None
        route = self._routes.get(path)
        if route is None and not metadata:
            message = f"Not Found: the MCP endpoint is {self.endpoint.path}"
            await self._refuse(connection, HttpRefusal(404, -32000, message, "not-found"))
            return
        if self.http.trust_proxy:
            peer = _forwarded_for(request.headers, peer)
        cors = self._cors_headers(request)
        if request.method == "OPTIONS" and cors:
            await connection.respond(204, [*cors, *_preflight_headers(request)])
            return
        credential: Credential | HttpRefusal = request.credential
        if isinstance(credential, Unverified) and self.oauth is not None and not metadata:
            credential = await self.oauth.finish(peer, request)
            if isinstance(credential, HttpRefusal):
                await self._refuse(connection, credential, cors)
                return
        principal = credential if isinstance(credential, Principal) else None
        label = principal.label if principal is not None else credential
        assert label is None or isinstance(label, str)
        call = HttpCall(connection, request, peer, label, handler, nursery, cors, principal=principal)
        try:
            if metadata:
                await self._metadata(call)
            elif self.stopping:
                raise refuse(503, -32000, "Service Unavailable: the server is stopping", "shutting-down")
            else:
                assert route is not None
                await route(call)
        except Refused as exc:
            await self._refuse(connection, exc.refusal, cors)

    def _check_head(
        self, peer: PeerInfo, method: bytes, target: bytes, headers: list[tuple[bytes, bytes]]
    ) -> BadRequest | Credential:
        """Host, Origin and token, on the head alone (see :data:`~channels._http.server.request.HeadCheck`).

        So a refused client never gets ``100 Continue`` nor has its body read into memory.
        """
        path = target.partition(b"?")[0].decode("latin-1")
        host: bytes | None = None
        hosts = origins = 0
        origin = None
        for name, value in headers:  # one pass: this runs for every request
            if name == b"host":
                host, hosts = value, hosts + 1
            elif name == b"origin":
                origin, origins = value, origins + 1
        cors = self._cors_for(origin) if origins == 1 else ()
        if method == b"OPTIONS" and cors:
            return None  # a CORS preflight: answered as such, it reaches nothing
        host = self._client_host(host if hosts == 1 else None, headers)
        metadata = path in self.metadata_paths and self.document is not None
        outcome = (self.open_guard if metadata or self.oauth else self.guard).check(
            host.decode("latin-1") if host is not None else None, headers
        )
        if self.http.trust_proxy and (self.oauth or isinstance(outcome, Rejection)):
            peer = _forwarded_for(headers, peer)
        if self.oauth is not None and not metadata and not isinstance(outcome, Rejection):
            return self.oauth.check_head(peer, method, path, headers, cors)
        if not isinstance(outcome, Rejection):
            return outcome
        logger.info("%s: %s %s refused: %s", peer, method.decode("latin-1", "replace"), path, outcome.message)
        status, response_headers, body = outcome.status, outcome.headers(), outcome.body()
        if status == 401 and self.document is not None:
            base = self._public_base_of(host, headers)
            challenge = f'Bearer resource_metadata="{base}{self.metadata_path}"'
            response_headers = [
                (name, value) for name, value in response_headers if name != b"www-authenticate"
            ]
            response_headers.append((b"www-authenticate", challenge.encode()))
        return BadRequest(status, outcome.message, headers=[*response_headers, *cors], body=body, logged=True)

    async def _refuse(
        self,
        connection: HttpConnection,
        refusal: Rejection | HttpRefusal,
        cors: Headers = (),
    ) -> None:
        if isinstance(refusal, Rejection):
            status, headers, body = refusal.status, refusal.headers(), refusal.body()
        else:
            status, headers, body = refusal.status, refusal.response_headers(), refusal.body()
        await connection.respond(status, [*headers, *cors], body)

    def _client_host(self, host: bytes | None, headers: Headers) -> bytes | None:
        """The host the client asked for.

        ``host`` (the one ``Host`` header), or behind a trusted proxy its ``X-Forwarded-Host``.
        """
        forwarded = _first_forwarded(headers, b"x-forwarded-host") if self.http.trust_proxy else None
        return forwarded if forwarded is not None else host

    def _public_base_of(self, host: bytes | None, headers: Headers) -> str:
        """``SCHEME://HOST[:PORT]`` for the client's host ``host``.

        The scheme is the endpoint's, or behind a trusted proxy its ``X-Forwarded-Proto``.
        """
        scheme, authority = self.endpoint.scheme, self.endpoint.authority
        if self.http.trust_proxy:
            proto = (_first_forwarded(headers, b"x-forwarded-proto") or b"").lower()
            if proto in (b"http", b"https"):
                scheme = proto.decode("latin-1")
        if host:
            authority = host.decode("latin-1")
        return f"{scheme}://{authority}"

    def _public_base(self, request: Request) -> str:
        """``SCHEME://HOST[:PORT]`` as the client reached this endpoint.

        Its checked ``Host``, or behind a trusted proxy ``X-Forwarded-Host`` and
        ``X-Forwarded-Proto``.
        """
        return self._public_base_of(
            self._client_host(request.header(b"host"), request.headers), request.headers
        )

    async def _metadata(self, call: HttpCall) -> None:
        if call.request.method != "GET":
            raise method_not_allowed(b"GET")
        document = dict(self.document or {})
        document.setdefault("resource", self._public_base(call.request) + self.endpoint.path)
        await call.respond(200, [(b"content-type", b"application/json")], json.dumps(document).encode())

    def _cors_headers(self, request: Request) -> tuple[tuple[bytes, bytes], ...]:
        return self._cors_for(request.header(b"origin"))

    def _cors_for(self, origin: bytes | None) -> tuple[tuple[bytes, bytes], ...]:
        if origin is None or origin.decode("latin-1").lower().rstrip("/") not in self.http.cors_origins:
            return ()
        return (
            (b"access-control-allow-origin", origin),
            (b"access-control-expose-headers", CORS_EXPOSE_HEADERS),
            (b"vary", b"origin"),
        )


def _preflight_headers(request: Request) -> list[tuple[bytes, bytes]]:
    """A preflight's answer: the MCP headers, plus the ``Mcp-Param-*`` ones it asks for.

    Those are named after a tool's ``x-mcp-header`` annotations, which no fixed list can hold.
    """
    asked = request.header(b"access-control-request-headers") or b""
    params = [name.strip() for name in asked.lower().split(b",") if name.strip().startswith(b"mcp-param-")]
    allowed = b", ".join([CORS_ALLOW_HEADERS, *params])
    return [
        (b"access-control-allow-methods", b"GET, POST, DELETE, OPTIONS"),
        (b"access-control-allow-headers", allowed),
        (b"access-control-max-age", CORS_MAX_AGE),
    ]


def _first_forwarded(headers: Headers, name: bytes) -> bytes | None:
    """The first entry of a proxy's header ``name``, if it was sent exactly once."""
    values = header_values(headers, name)
    return values[0].split(b",")[0].strip() if len(values) == 1 else None


def _forwarded_for(headers: Headers, peer: PeerInfo) -> PeerInfo:
    """Behind a trusted proxy: ``peer`` with the client's address, from ``X-Forwarded-For``."""
    address = _first_forwarded(headers, b"x-forwarded-for")
    return peer if address is None else attrs.evolve(peer, address=address.decode("latin-1"))
