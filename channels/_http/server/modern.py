"""A POST of the 2026-07-28 era: one request, checked against its headers, then a channel of its own.

The MCP endpoint (:mod:`channels._http.server.endpoint`) hands over each POST whose message is of
the modern era (:func:`~channels._mcp.admission.era_of`). Its headers must agree with its body
(:func:`~channels._mcp.modern.check_modern_request`, and the ``Mcp-Param-{Name}`` headers of the
tools a ``tools/list`` reply declared them for); then it is a channel of its own
(:class:`~channels._http.server.exchange.ExchangeChannel`), served by the bridge in the POST's own
task if it gave an exchange handler, else handed to it as a connection of its own. No session is
ever minted.
"""

from __future__ import annotations

import logging

from ..._core.channel import PeerInfo
from ..._core.jsonrpc import JSONObject
from ..._core.options import HttpOptions
from ..._core.ticker import Ticker
from ..._mcp.admission import (
    METHOD_NOT_FOUND,
    check_modern_request,
    check_param_headers,
    status_for_error,
    tool_headers_from_list,
)
from .call import HttpCall, Refused, refuse
from .exchange import ExchangeChannel
from .response import StreamStyle, write_response

logger = logging.getLogger("channels.http")

# Requests the 2026-07-28 era removed (its changelog): on a modern POST they are answered here,
# with the 404 and -32601 the transport specifies for a method the server does not implement.
REMOVED_METHODS = frozenset(
    {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)
# Response styles kept, one per set of CORS headers (a client sends from one Origin; past it the
# memo starts again), and peers, one per keep-alive connection and credential: a few clients'
# connections at once (the benchmark keeps 64 open).
STYLES = 8
PEERS = 256
# The bridge's "too many connections" refusal (bridge/_errors.py) is a 503 over HTTP.
OVER_CAPACITY = frozenset({"too-many-connections"})


class ModernPosts:
    """The 2026-07-28 POSTs of one MCP endpoint, and what they taught it (tool header annotations).

    Args:
        http: the listener's HTTP settings (the JSON wait, SSE keep-alive).
        ticker: where responses register their JSON wait's deadline.
    """

    def __init__(self, http: HttpOptions, ticker: Ticker) -> None:
        self.http = http
        self.ticker = ticker
        self.tool_headers: dict[str, dict[str, tuple[str, ...]]] = {}
        self._styles: dict[tuple[tuple[bytes, bytes], ...], StreamStyle] = {}  # by CORS headers
        self._peers: dict[int, tuple[PeerInfo, tuple[object, ...], PeerInfo]] = {}  # see _peer()

    async def serve(self, call: HttpCall, message: JSONObject) -> None:
        """Serve ``call``, a POST whose one message ``message`` (validated) is of the 2026-07-28 era."""
        request = call.request
        headers = request.headers
        refusal = check_modern_request(message, headers, fields=request.fields, validated=True)
        if refusal is None and self.tool_headers:  # only once a tools/list declared some
            refusal = check_param_headers(message, headers, self.tool_headers)
        if refusal is not None:
            raise Refused(refusal)
        if message.get("method") in REMOVED_METHODS and "id" in message:
            # Not forwarded: a dual-era child would answer initialize with -32022, or worse,
            # settle a shared process into the legacy era for everyone.
            raise refuse(404, METHOD_NOT_FOUND, "Method not found", "removed-method", message["id"])
        if "id" not in message or "method" not in message:
            # 2026-07-28 defines no client notification over HTTP (cancelling is closing the
            # response); it is accepted and, with no request to relate to, goes no further.
            await call.respond(202)
            return
        # Only a tools/list reply teaches anything (_learn): no call per reply for the others.
        learn = self._learn if message["method"] == "tools/list" else None
        exchange = ExchangeChannel(message, self._peer(call), _modern_status, learn)
        style = self._styles.get(call.cors)
        if style is None:  # once per set of CORS headers: a client sends from one Origin
            style = StreamStyle(
                extra_headers=call.cors,
                json_wait=self.http.sse_after,
                keepalive=self.http.sse_keepalive,
                ticker=self.ticker,
                answer_now=True,  # the reply is written by the task that routes it (response.JsonAnswer)
            )
            if len(self._styles) >= STYLES:
                self._styles.clear()
            self._styles[call.cors] = style

        async def respond() -> bool:
            if await write_response(call.connection, exchange.stream, style):
                return True
            logger.info("%s: the client closed its response before the reply; request cancelled", call.peer)
            exchange.leave()
            return False

        if call.exchanges is not None:  # the bridge serves it in this task (docs/design.md)
            await call.exchanges(exchange, respond)
        else:
            call.start(exchange)
            await respond()

    def _peer(self, call: HttpCall) -> PeerInfo:
        """:attr:`HttpCall.peer`, made once per connection, credential, ``Origin`` and ``User-Agent``.

        A client sends the same on every POST of a keep-alive connection. The memo is keyed by the
        connection's address record, which it keeps (so that its id is not reused while
        remembered), and checked against the request's own values: a request that differs in any
        gets a peer of its own.
        """
        fields = call.request.fields  # each header sent once: a repeated one counts as absent
        seen = (call.credential, call.principal, fields.get(b"origin"), fields.get(b"user-agent"))
        address = call.address
        remembered = self._peers.get(id(address))
        if remembered is not None and remembered[0] is address and remembered[1] == seen:
            return remembered[2]
        peer = call.peer
        if len(self._peers) >= PEERS:
            self._peers.clear()
        self._peers[id(address)] = (address, seen, peer)
        return peer

    def _learn(self, request: JSONObject, reply: JSONObject) -> None:
        """Remember the ``x-mcp-header`` annotations of the tools a ``tools/list`` reply lists."""
        if request.get("method") == "tools/list" and isinstance(reply.get("result"), dict):
            self.tool_headers.update(tool_headers_from_list(reply["result"]))


def _modern_status(reply: JSONObject) -> int:
    """The status of a 2026-07-28 response that is one JSON reply."""
    error = reply.get("error")
    if not isinstance(error, dict):
        return 200
    data = error.get("data")
    if isinstance(data, dict) and data.get("reason") in OVER_CAPACITY:
        return 503
    code = error.get("code")
    return status_for_error(code) if isinstance(code, int) else 200
