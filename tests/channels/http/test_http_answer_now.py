"""An answer queued while its response waits for it as JSON is written by the task that queues it.

``StreamStyle(answer_now=True)`` (a legacy session's responses, and a 2026-07-28 POST's): the
reply pump's ``put`` writes the response at once (``response.JsonAnswer``), where the response's
own task would write it a scheduler pass later. The bytes on the wire must be the same either way, the answer must count in
the backlog until it is written whole, and what the kernel does not take at once is written by the
response's own task. Real sockets (a socket pair); no bridge.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import trio
import trio.testing

from channels import PeerInfo
from channels._core.channel import MessageChannel
from channels._core.jsonrpc import encode
from channels._core.options import HttpOptions
from channels._core.ticker import Ticker
from channels._http.server.backlog import Backlog
from channels._http.server.call import HttpCall
from channels._http.server.endpoint import McpEndpoint
from channels._http.server.exchange import ExchangeChannel
from channels._http.server.request import Request
from channels._http.server.response import StreamStyle, write_response
from channels._http.server.stream import ResponseStream

from socketpairs import connection_pair, read_all

TIMEOUT = 10
HEADERS = ((b"mcp-session-id", b"0123"),)


async def _answer(answer_now: bool, body: bytes, buffer: int | None = None) -> tuple[bytes, bytes, bool]:
    """Queue ``body`` as the final answer while a response waits; what was on the wire right
    after ``put`` (before the response's task ran again), all that came in the end, the result."""
    connection, client = connection_pair(buffer)
    backlog = Backlog()
    stream = ResponseStream("1", finals=1, backlog=backlog)
    style = StreamStyle(extra_headers=HEADERS, ticker=Ticker(), answer_now=answer_now)
    result: list[bool] = []

    async def respond() -> None:
        result.append(await write_response(connection, stream, style))

    with client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(respond)
            await trio.testing.wait_all_tasks_blocked()
            assert (stream.answer_now is not None) is answer_now
            stream.put(body, final=True)
            at_once = read_all(client)
            assert stream.unwritten == 1 or not at_once  # counted until written whole
            assert backlog.unwritten == (len(body) if stream.unwritten else 0)
            wire = at_once
            while not result:  # the response's task finishes (the peer reads meanwhile)
                await trio.testing.wait_all_tasks_blocked()
                wire += read_all(client)
            wire += read_all(client)
        assert stream.unwritten == 0 and backlog.unwritten == 0 and stream.answer_now is None
        await connection.aclose()
    return at_once, wire, result[0]


async def test_an_answer_written_by_the_task_that_queues_it_is_the_response_its_own_task_writes() -> None:
    with trio.fail_after(TIMEOUT):
        body = b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}]}}'
        own_at_once, own, own_ok = await _answer(False, body)
        now_at_once, now, now_ok = await _answer(True, body)
    assert own_ok and now_ok
    assert own_at_once == b""  # its own task had not run yet
    assert now_at_once == now == own  # written by put(), byte for byte the same response
    assert own.startswith(b"HTTP/1.1 200 OK\r\n") and own.endswith(b"\r\n\r\n" + body)
    assert b"mcp-session-id: 0123\r\n" in own and b"content-type: application/json\r\n" in own


async def test_what_the_kernel_does_not_take_at_once_of_an_answer_is_written_by_the_responses_own_task() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        body = b'{"jsonrpc":"2.0","id":8,"result":"' + b"x" * 60_000 + b'"}'
        _, own, own_ok = await _answer(False, body, buffer=4096)
        now_at_once, now, now_ok = await _answer(True, body, buffer=4096)
    assert own_ok and now_ok
    assert 0 < len(now_at_once) < len(now)  # a part at once, the rest by the response's task
    assert now == own and own.endswith(body)


async def test_a_2026_reply_is_written_by_the_task_that_routes_it_before_its_posts_task_runs_again() -> None:
    """The 2026-07-28 era's POSTs answer as the legacy sessions' do (``McpEndpoint._modern``)."""
    connection, client = connection_pair()
    endpoint = McpEndpoint(HttpOptions(), Ticker(), lambda: 0)
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"_meta": meta}}).encode()
    headers = (
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"mcp-protocol-version", b"2026-07-28"),
        (b"mcp-method", b"tools/list"),
    )
    reply = {"jsonrpc": "2.0", "id": 5, "result": {"tools": []}}
    at_once: list[bytes] = []

    async def serve(exchange: MessageChannel, respond: Callable[[], Awaitable[bool]]) -> None:
        assert isinstance(exchange, ExchangeChannel)
        assert await exchange.receive() == json.loads(body)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(respond)
            await trio.testing.wait_all_tasks_blocked()
            exchange.send_nowait(reply)
            at_once.append(read_all(client))  # before the response's own task ran again
        await exchange.aclose()

    with client, trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            call = HttpCall(
                connection,
                Request("POST", "/mcp", headers, body),
                PeerInfo("http", "127.0.0.1:1"),
                None,
                handler=lambda incoming: trio.sleep(0),
                nursery=nursery,
                exchanges=serve,
            )
            await endpoint.handle(call)
        wire = at_once[0] + read_all(client)
        await connection.aclose()
    assert at_once[0] == wire  # all of it, written by send_nowait's put()
    assert wire.startswith(b"HTTP/1.1 200 OK\r\n") and b"content-type: application/json\r\n" in wire
    assert wire.endswith(b"\r\n\r\n" + encode(reply, newline=False))
