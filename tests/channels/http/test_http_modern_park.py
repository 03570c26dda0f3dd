"""A 2026-07-28 POST's response, answered by the task that routes its answer, waits for its client's next bytes.

As a legacy session's do (test_http_park.py), through the MCP endpoint with an exchange handler
that serves the request in the POST's own task: that task wakes once per request, at the client's
next request on the connection, not once for the answer and again for that request. What counts
the request as served is told at the answer (``MessageChannel.on_answered``), not at that wake;
a client that leaves after its answer completed its request (nothing is cancelled), one that leaves
before it cancels it, and an answer not written whole wakes the response to write the rest. Real
sockets (a socket pair); no bridge.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Awaitable, Callable

import attrs
import trio
import trio.testing

from channels import PeerInfo
from channels._core.channel import MessageChannel
from channels._core.jsonrpc import JSONObject
from channels._core.options import HttpOptions
from channels._core.ticker import Ticker
from channels._http.server.call import HttpCall
from channels._http.server.conn import HttpConnection
from channels._http.server.endpoint import McpEndpoint
from channels._http.server.exchange import ExchangeChannel
from channels._http.server.request import Request

from socketpairs import connection_pair, read_all

TIMEOUT = 10
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
BODY = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"_meta": META}}).encode()
HEADERS = (
    (b"content-type", b"application/json"),
    (b"accept", b"application/json, text/event-stream"),
    (b"mcp-protocol-version", b"2026-07-28"),
    (b"mcp-method", b"tools/list"),
)
REPLY: JSONObject = {"jsonrpc": "2.0", "id": 5, "result": {"tools": []}}
NEXT = b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 2\r\n\r\n{}"


@attrs.define
class Served:
    """A POST served in its own task, as the bridge's shared child serves one, seen from outside."""

    connection: HttpConnection
    exchange: ExchangeChannel | None = None
    answered: list[MessageChannel] = attrs.field(factory=list)  # what on_answered was called with
    responded: list[bool] = attrs.field(factory=list)
    handled: bool = False

    async def serve(self, exchange: MessageChannel, respond: Callable[[], Awaitable[bool]]) -> None:
        assert isinstance(exchange, ExchangeChannel)
        exchange.on_answered = self.answered.append
        assert await exchange.receive() == json.loads(BODY)
        self.exchange = exchange  # the test answers it from its own task
        self.responded.append(await respond())
        await exchange.aclose()

    async def handle(self, nursery: trio.Nursery) -> None:
        call = HttpCall(
            self.connection,
            Request("POST", "/mcp", HEADERS, BODY),
            PeerInfo("http", "127.0.0.1:1"),
            None,
            handler=lambda incoming: trio.sleep(0),
            nursery=nursery,
            exchanges=self.serve,
        )
        await McpEndpoint(HttpOptions(), Ticker(), lambda: 0).handle(call)
        self.handled = True

    async def waiting(self, nursery: trio.Nursery) -> ExchangeChannel:
        """Start serving; the exchange once its response waits for the answer."""
        nursery.start_soon(self.handle, nursery)
        await trio.testing.wait_all_tasks_blocked()
        assert self.exchange is not None and not self.handled
        return self.exchange


async def _answered(nursery: trio.Nursery, served: Served, client: socket.socket) -> bytes:
    """Answer the request once its response waits; what that put on the wire."""
    exchange = await served.waiting(nursery)
    exchange.send_nowait(REPLY)
    return read_all(client)


async def test_a_2026_response_answered_at_once_is_served_at_its_answer_and_wakes_only_at_the_next_request() -> (
    None
):
    connection, client = connection_pair()
    served = Served(connection)
    with client, trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            wire = await _answered(nursery, served, client)
            assert wire.startswith(b"HTTP/1.1 200 OK\r\n") and wire.endswith(b'"result":{"tools":[]}}')
            assert served.answered == [served.exchange]  # told at once, by the task that answered
            await trio.testing.wait_all_tasks_blocked()
            assert served.responded == [] and not served.handled  # not woken by its answer
            client.send(NEXT)
        assert served.responded == [True] and served.handled and served.answered == [served.exchange]
        request = await connection.next_request(first=False)  # the bytes it read are kept for it
        assert request is not None and request.body == b"{}"
        await connection.aclose()


async def test_a_2026_request_whose_client_closes_after_its_answer_is_complete_and_not_cancelled() -> None:
    connection, client = connection_pair()
    served = Served(connection)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            with client:
                assert (await _answered(nursery, served, client)).endswith(b"}")
        assert served.responded == [True] and served.exchange is not None
        assert not served.exchange.client_left  # the bridge cancels nothing at the child
        await connection.aclose()


async def test_a_2026_request_whose_client_leaves_before_its_answer_is_cancelled_and_never_answered() -> None:
    connection, client = connection_pair()
    served = Served(connection)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            exchange = await served.waiting(nursery)
            client.close()
        assert served.responded == [False] and exchange.client_left and served.answered == []
        await connection.aclose()


async def test_a_2026_answer_the_kernel_does_not_take_at_once_wakes_its_response_and_is_not_told_early() -> (
    None
):
    connection, client = connection_pair(buffer=4096)
    served = Served(connection)
    reply: JSONObject = {"jsonrpc": "2.0", "id": 5, "result": {"tools": [], "padding": "x" * 60_000}}
    with client, trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            exchange = await served.waiting(nursery)
            exchange.send_nowait(reply)
            assert served.answered == []  # its response writes the rest; the bridge is told then
            wire = read_all(client)
            while not served.handled:
                await trio.testing.wait_all_tasks_blocked()
                wire += read_all(client)
            wire += read_all(client)
        assert served.responded == [True] and wire.endswith(b'"' + b"x" * 60_000 + b'"}}')
        await connection.aclose()
