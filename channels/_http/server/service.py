"""What one server's HTTP endpoint does with each request: MCP's Streamable HTTP and HTTP+SSE.

One :class:`HttpService` per served MCP endpoint: an ``http://`` address's (shared by its
listeners: a host name may bind several sockets), or one server mounted on a shared host
(:class:`~channels.HttpHost`). The connections are not its own: the front
(:mod:`channels._http.server.front`) reads each request and hands it to the service its path
names; each session, modern request or SSE stream becomes an :class:`~channels.Incoming` for the
bridge, started in the bridge's handler nursery. The routes, for an endpoint at ``PATH``:

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
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

import attrs
import trio

from ..._core.channel import ExchangeHandler, PeerInfo
from ..._core.guard import Rejection, RequestGuard
from ..._core.listener import IncomingHandler
from ..._core.oauth import Principal
from ..._core.options import ListenOptions
from ..._core.ticker import Ticker
from ..._mcp.admission import HttpRefusal
from ..._sockets.endpoint import Endpoint
from .call import HttpCall, Refused, method_not_allowed, refuse
from .conn import HttpConnection
from .endpoint import McpEndpoint
from .legacy import LegacySse
from .proxying import Headers, cors_for, first_forwarded, forwarded_for, preflight_headers
from .request import BadRequest, Credential, Request, Unverified, single_fields
from .routing import WELL_KNOWN, legacy_base

if TYPE_CHECKING:
    from .oauth import HttpOAuth  # with ListenOptions.oauth only: it loads channels._oauth

logger = logging.getLogger("channels.http")

Route = Callable[[HttpCall], Awaitable[None]]


class HttpService:
    """The routes of one MCP endpoint (see the module docstring).

    Args:
        endpoint: the scheme, host, port and MCP path.
        guard: the Host, Origin and token checks.
        options: limits and HTTP settings.
        ticker: the front's deadlines, where responses register their JSON wait.
        oauth: the OAuth check, which the service owns (its verifier runs in :meth:`run_oauth`).
        name: the mounted server's name, for the 503 before it serves; ``None`` for an
            ``http://`` address's own endpoint.
        routes: instead of the MCP routes, these (a host's index).
        bare_metadata: serve the metadata at the bare well-known path too (an ``http://``
            address's endpoint is the only resource on its host; a mount is one of several).

    Attributes:
        handler, nursery: the bridge's handler and handler nursery, once it serves
            (:meth:`attach`); until then requests get 503.
        exchanges: the bridge's handler of 2026-07-28 requests, each in its POST's own task, if
            it gave one (``MessageListener.dispatch_exchanges``); else they go to ``handler``.
        stopping: set by :meth:`stop`: requests get 503 from then on.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        guard: RequestGuard,
        options: ListenOptions,
        ticker: Ticker,
        oauth: HttpOAuth | None = None,
        *,
        name: str | None = None,
        routes: Mapping[str, Route] | None = None,
        bare_metadata: bool = True,
    ) -> None:
        self.endpoint = endpoint
        self.name = name
        self.guard = guard
        self.open_guard = attrs.evolve(guard, tokens=None)  # for the metadata document, and OAuth
        self.oauth = oauth
        self.options = options
        self.http = options.http
        self.max_body = options.max_message_bytes
        self.mcp = McpEndpoint(self.http, ticker, self.session_count)
        base = legacy_base(endpoint.path)
        self.legacy = LegacySse(self.http, f"{base}/messages", self.session_count)
        self.metadata_path = WELL_KNOWN + endpoint.path.rstrip("/")
        # An explicit document (--oauth-metadata) wins over the one generated from the OAuth settings.
        self.document = self.http.resource_metadata or (oauth.document if oauth is not None else None)
        paths = oauth.metadata_paths if oauth is not None else {self.metadata_path}
        self.metadata_paths = paths if bare_metadata else paths - {WELL_KNOWN}
        self.routes: Mapping[str, Route] = (
            routes
            if routes is not None
            else {
                endpoint.path: self.mcp.handle,
                f"{base}/sse": self.legacy.open_stream,
                f"{base}/messages": self.legacy.post_message,
            }
        )
        self.handler: IncomingHandler | None = None
        self.nursery: trio.Nursery | None = None
        self.exchanges: ExchangeHandler | None = None
        self.stopping = False
        self._calls = 0  # requests being answered: the OAuth verifier outlives them
        self._drained = trio.Event()
        self._oauth_started = False

    def paths(self) -> dict[str, Route | None]:
        """Every path this service answers: its routes, and its metadata's (``None``) if it has any."""
        table: dict[str, Route | None] = dict(self.routes)
        if self.document is not None:
            table.update(dict.fromkeys(sorted(self.metadata_paths)))
        return table

    def session_count(self) -> int:
        """Legacy sessions and 2024-11-05 streams open now (they share ``max_sessions``)."""
        return len(self.mcp.sessions) + len(self.legacy.channels)

    # --- lifecycle -----------------------------------------------------------------------

    def attach(self, handler: IncomingHandler, nursery: trio.Nursery) -> None:
        """Serve from now on: new channels go to ``handler``, run in ``nursery``."""
        self.handler, self.nursery = handler, nursery

    async def start_oauth(self, nursery: trio.Nursery) -> None:
        """Run the OAuth verifier in ``nursery``, once, until stopping with no request being answered.

        ``nursery`` is the bridge's handler nursery, beside the connections, not the accept loop:
        a graceful stop cancels accepting while answers and token checks in progress still need
        it. Nothing to run without OAuth.
        """
        if self.oauth is not None and not self._oauth_started:
            self._oauth_started = True
            await nursery.start(self._run_oauth)

    async def _run_oauth(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        assert self.oauth is not None
        async with trio.open_nursery() as nursery:
            await nursery.start(self.oauth.run)
            task_status.started()
            await self._drained.wait()
            nursery.cancel_scope.cancel()

    def stop(self) -> None:
        """Stop taking requests: they get 503 from then on."""
        self.stopping = True
        if self._calls == 0:
            self._drained.set()

    async def close(self) -> None:
        """Stop, and end every session and 2024-11-05 stream (the bridge sees them end)."""
        self.stop()
        self._drained.set()
        for session in list(self.mcp.sessions.values()):
            session.end()
            await session.aclose()
        self.mcp.sessions.clear()
        for channel in list(self.legacy.channels.values()):
            channel.leave()
            await channel.aclose()

    # --- a request -----------------------------------------------------------------------

    async def dispatch(
        self, connection: HttpConnection, request: Request, peer: PeerInfo, route: Route | None
    ) -> None:
        """Answer ``request`` on ``route`` (``None``: the metadata document).

        One coroutine from here to the route's (no helper awaited in between): every resumption of
        a request's task passes through each coroutine of its await chain.
        """
        self._calls += 1
        try:
            if self.http.trust_proxy:
                peer = forwarded_for(request.headers, peer)
            allowed = self.http.cors_origins
            cors = cors_for(request.header(b"origin"), allowed) if allowed else ()
            if request.method == "OPTIONS" and cors:
                await connection.respond(204, [*cors, *preflight_headers(request)])
                return
            credential: Credential | HttpRefusal = request.credential
            if isinstance(credential, Unverified) and self.oauth is not None and route is not None:
                credential = await self.oauth.finish(peer, request)
                if isinstance(credential, HttpRefusal):
                    await refuse_on(connection, credential, cors)
                    return
            principal = credential if isinstance(credential, Principal) else None
            label = principal.label if principal is not None else credential
            assert label is None or isinstance(label, str)
            handler, nursery = self.handler, self.nursery
            try:
                if route is None:
                    await self._metadata(connection, request, cors)
                elif self.stopping:
                    raise refuse(503, -32000, "Service Unavailable: the server is stopping", "shutting-down")
                elif handler is None or nursery is None:
                    message = f"Service Unavailable: server {self.name} is not available"
                    raise refuse(503, -32000, message, "not-available")
                else:
                    call = HttpCall(
                        connection, request, peer, label, handler, nursery, cors, principal, self.exchanges
                    )
                    await route(call)
            except Refused as exc:
                await refuse_on(connection, exc.refusal, cors)
        finally:
            self._calls -= 1
            if self.stopping and self._calls == 0:
                self._drained.set()

    def check_head(
        self,
        peer: PeerInfo,
        method: bytes,
        path: str,
        headers: Headers,
        *,
        open: bool,
        fields: Mapping[bytes, bytes] | None = None,
    ) -> BadRequest | Credential:
        """Host, Origin and token, on the head alone (see :data:`~channels._http.server.request.HeadCheck`).

        So a refused client never gets ``100 Continue`` nor has its body read into memory.
        ``open``: Host and Origin only (the metadata document, a path no route takes).
        ``fields``: :func:`~channels._http.server.request.single_fields` of ``headers``, if made.
        """
        if fields is None:
            fields = single_fields(headers)
        origin = fields.get(b"origin")  # the one Origin (several are refused by the guard)
        cors = cors_for(origin, self.http.cors_origins) if self.http.cors_origins else ()
        if method == b"OPTIONS" and cors:
            return None  # a CORS preflight: answered as such, it reaches nothing
        host = self._client_host(fields.get(b"host"), headers)
        outcome = (self.open_guard if open or self.oauth else self.guard).check(
            host.decode("latin-1") if host is not None else None, headers, fields
        )
        if self.http.trust_proxy and (self.oauth or isinstance(outcome, Rejection)):
            peer = forwarded_for(headers, peer)
        if self.oauth is not None and not open and not isinstance(outcome, Rejection):
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

    def _client_host(self, host: bytes | None, headers: Headers) -> bytes | None:
        """The host the client asked for.

        ``host`` (the one ``Host`` header), or behind a trusted proxy its ``X-Forwarded-Host``.
        """
        forwarded = first_forwarded(headers, b"x-forwarded-host") if self.http.trust_proxy else None
        return forwarded if forwarded is not None else host

    def _public_base_of(self, host: bytes | None, headers: Headers) -> str:
        """``SCHEME://HOST[:PORT]`` for the client's host ``host``.

        The scheme is the endpoint's, or behind a trusted proxy its ``X-Forwarded-Proto``.
        """
        scheme, authority = self.endpoint.scheme, self.endpoint.authority
        if self.http.trust_proxy:
            proto = (first_forwarded(headers, b"x-forwarded-proto") or b"").lower()
            if proto in (b"http", b"https"):
                scheme = proto.decode("latin-1")
        if host:
            authority = host.decode("latin-1")
        return f"{scheme}://{authority}"

    def public_base(self, request: Request) -> str:
        """``SCHEME://HOST[:PORT]`` as the client reached this endpoint.

        Its checked ``Host``, or behind a trusted proxy ``X-Forwarded-Host`` and
        ``X-Forwarded-Proto``.
        """
        return self._public_base_of(
            self._client_host(request.header(b"host"), request.headers), request.headers
        )

    async def _metadata(self, connection: HttpConnection, request: Request, cors: Headers) -> None:
        if request.method != "GET":
            raise method_not_allowed(b"GET")
        document = dict(self.document or {})
        document.setdefault("resource", self.public_base(request) + self.endpoint.path)
        headers = [(b"content-type", b"application/json"), *cors]
        await connection.respond(200, headers, json.dumps(document).encode())


async def refuse_on(connection: HttpConnection, refusal: Rejection | HttpRefusal, cors: Headers = ()) -> None:
    """Answer ``refusal`` on ``connection``, with the CORS headers ``cors``."""
    if isinstance(refusal, Rejection):
        status, headers, body = refusal.status, refusal.headers(), refusal.body()
    else:
        status, headers, body = refusal.status, refusal.response_headers(), refusal.body()
    await connection.respond(status, [*headers, *cors], body)
