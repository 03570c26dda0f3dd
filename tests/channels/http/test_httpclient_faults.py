"""The Streamable HTTP client channel against a scripted server: precise faults, headers, limits.

The server is ``tests/scripted_http.py`` (h11 over real loopback sockets), driven per test: a
legacy session that the server forgets (404), event streams cut before the reply, bodies trickled
one byte per chunk, oversized events, slow requests, error statuses, idle connections closed
behind the client's back. ``tests/channels/http/test_httpclient.py`` runs the same channel against the official
SDK's server.
"""

from __future__ import annotations

import json
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import h11
import pytest
import trio
from scripted_http import ServerExchange, scripted_server
from trio.testing import wait_all_tasks_blocked

from channels import (
    UNAUTHORIZED,
    ConnectError,
    ConnectOptions,
    MessageChannel,
    MessageTooLarge,
    ProtocolError,
)
from channels._http.client import dispatch as httpdispatch
from channels._http.client.channel import open_http_client
from channels._http.client.conn import MAX_CONNECTIONS, RESERVED_CONNECTIONS
from channels._http.client.exchange import MAX_SESSION_RENEWALS
from channels._sockets.endpoint import parse_endpoint

TIMEOUT = 10

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
SESSION_NOT_FOUND = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Session not found"}}'


def call(request_id: Any, tool: str = "echo", **arguments: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


def modern(message: dict[str, Any]) -> dict[str, Any]:
    message["params"]["_meta"] = dict(MODERN_META)
    return message


def cancel(request_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}


@asynccontextmanager
async def client(url: str, **options: Any) -> AsyncIterator[MessageChannel]:
    scheme = url.partition(":")[0]
    async with open_http_client(
        parse_endpoint(url, scheme, kind="an HTTP address"), ConnectOptions(**options)
    ) as ch:
        yield ch


async def receive_until_end(channel: MessageChannel) -> list[dict[str, Any]]:
    messages = []
    while True:
        try:
            messages.append(await channel.receive())
        except trio.EndOfChannel:
            return messages


@attrs.define(eq=False)
class LegacyServer:
    """A legacy Streamable HTTP server in a few lines: sessions ``s1``, ``s2``... that it can forget."""

    on_call: Callable[[ServerExchange], Awaitable[None]] | None = None
    on_get: Callable[[ServerExchange], Awaitable[None]] | None = None
    sessions: int = 0
    valid: set[str] = attrs.field(factory=set)

    def forget(self) -> None:
        self.valid.clear()

    async def __call__(self, exchange: ServerExchange) -> None:
        session = exchange.headers.get("mcp-session-id")
        if exchange.method == "DELETE":
            self.valid.discard(session or "")
            await exchange.respond(200)
        elif exchange.method == "POST" and exchange.rpc_method == "initialize":
            self.sessions += 1
            session = f"s{self.sessions}"
            self.valid.add(session)
            version = exchange.message["params"]["protocolVersion"]
            await exchange.result(
                {"protocolVersion": version, "capabilities": {}}, headers=[("Mcp-Session-Id", session)]
            )
        elif session not in self.valid:
            await exchange.respond(404, SESSION_NOT_FOUND, content_type="application/json")
        elif exchange.method == "GET":
            await (self.on_get(exchange) if self.on_get else exchange.respond(405))
        elif "id" not in exchange.message or "method" not in exchange.message:
            await exchange.accepted()
        elif self.on_call is not None:
            await self.on_call(exchange)
        else:
            await exchange.result({"content": [{"type": "text", "text": "ok"}]})


async def open_session(channel: MessageChannel) -> None:
    await channel.send(INIT)
    assert (await channel.receive())["id"] == 0
    await channel.send(INITIALIZED)


# -- the legacy session ------------------------------------------------------------------------------


async def test_every_message_after_initialize_carries_the_session_id_and_the_negotiated_version() -> None:
    server = LegacyServer()
    with trio.fail_after(TIMEOUT):
        async with scripted_server(server) as http, client(http.url()) as channel:
            await open_session(channel)
            await channel.send(call(1))
            assert (await channel.receive())["id"] == 1
        initialize, initialized, tools_call = http.posts()
        assert "mcp-session-id" not in initialize.headers
        for request in (initialized, tools_call):
            assert request.headers["mcp-session-id"] == "s1"
            assert request.headers["mcp-protocol-version"] == "2025-11-25"
            assert request.headers["accept"] == "application/json, text/event-stream"
            assert request.headers["content-type"] == "application/json"


async def test_a_404_for_the_session_replays_the_clients_own_initialize_and_retries_the_request_unnoticed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "channels.http.client")
    server = LegacyServer()
    with trio.fail_after(TIMEOUT):
        async with scripted_server(server) as http, client(http.url()) as channel:
            await open_session(channel)
            server.forget()  # the server restarted
            await channel.send(call(1, text="after the restart"))
            reply = await channel.receive()
            assert reply["id"] == 1 and "result" in reply  # and nothing else: no second initialize reply
            with pytest.raises(trio.WouldBlock):
                channel.receive_nowait()
        initializes = http.posts("initialize")
        assert [json.loads(r.body) for r in initializes] == [INIT, INIT]
        calls = http.posts("tools/call")
        assert [r.headers["mcp-session-id"] for r in calls] == ["s1", "s2"]
        renewed = http.posts("notifications/initialized")[-1]
        assert renewed.headers["mcp-session-id"] == "s2"
        assert http.requests.index(renewed) < http.requests.index(calls[-1])  # initialized before the retry
        assert "initialising again" in caplog.text


async def test_a_session_lost_again_and_again_answers_the_request_with_an_error_after_bounded_renewals() -> (
    None
):
    server = LegacyServer()

    async def forget_every_session(exchange: ServerExchange) -> None:
        await exchange.respond(404, SESSION_NOT_FOUND, content_type="application/json")

    server.on_call = forget_every_session
    with trio.fail_after(TIMEOUT):
        async with scripted_server(server) as http, client(http.url()) as channel:
            await open_session(channel)
            await channel.send(call("x"))
            reply = await channel.receive()
        assert reply["id"] == "x"
        assert reply["error"]["code"] == -32000
        assert reply["error"]["data"]["reason"] == "session-lost"
        assert len(http.posts("tools/call")) == 1 + MAX_SESSION_RENEWALS
        assert len(http.posts("initialize")) == 1 + MAX_SESSION_RENEWALS


async def test_a_notification_that_gets_404_renews_the_session_and_is_posted_again() -> None:
    server = LegacyServer()
    with trio.fail_after(TIMEOUT):
        async with scripted_server(server) as http, client(http.url()) as channel:
            await open_session(channel)
            server.forget()
            await channel.send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
        posted = http.posts("notifications/roots/list_changed")
        assert [r.headers["mcp-session-id"] for r in posted] == ["s1", "s2"]


async def test_the_standalone_stream_opens_after_initialized_and_its_messages_are_received() -> None:
    async def stream(exchange: ServerExchange) -> None:
        await exchange.start_events()
        await exchange.event({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}, event_id="g1")
        await exchange.event({"jsonrpc": "2.0", "id": "srv-1", "method": "roots/list"}, event_id="g2")
        await exchange.wait_disconnect()

    server = LegacyServer(on_get=stream)
    with trio.fail_after(TIMEOUT):
        async with scripted_server(server) as http, client(http.url()) as channel:
            await open_session(channel)
            assert (await channel.receive())["method"] == "notifications/tools/list_changed"
            assert (await channel.receive())["method"] == "roots/list"
            await channel.send({"jsonrpc": "2.0", "id": "srv-1", "result": {"roots": []}})
        (get,) = http.gets()
        assert get.headers["accept"] == "text/event-stream"
        assert get.headers["mcp-session-id"] == "s1"
        reply = http.posts()[-1]
        assert reply.message == {"jsonrpc": "2.0", "id": "srv-1", "result": {"roots": []}}


async def test_a_dropped_standalone_stream_is_reopened_after_the_retry_delay_with_last_event_id() -> None:
    async def stream(exchange: ServerExchange) -> None:
        await exchange.start_events()
        if "last-event-id" not in exchange.headers:
            await exchange.event(None, event_id="g1", retry=10)  # priming, then the server drops it
            await exchange.cut_connection()
            return
        await exchange.event({"jsonrpc": "2.0", "method": "notifications/resumed"}, event_id="g2")
        await exchange.wait_disconnect()

    with trio.fail_after(TIMEOUT):
        async with scripted_server(LegacyServer(on_get=stream)) as http, client(http.url()) as channel:
            await open_session(channel)
            assert (await channel.receive())["method"] == "notifications/resumed"
        first, second = http.gets()
        assert "last-event-id" not in first.headers
        assert second.headers["last-event-id"] == "g1"


async def test_a_server_without_a_standalone_stream_405_is_asked_only_once() -> None:
    with trio.fail_after(TIMEOUT):
        async with scripted_server(LegacyServer()) as http, client(http.url()) as channel:
            await open_session(channel)
            await http.wait_for(lambda r: r.method == "GET")
            await channel.send(call(1))
            await channel.receive()
        assert len(http.gets()) == 1


async def test_a_request_stream_cut_before_the_reply_is_resumed_with_last_event_id_after_the_retry_delay() -> (
    None
):
    async def on_call(exchange: ServerExchange) -> None:
        await exchange.start_events()
        progress = {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": 1, "progress": 1},
        }
        await exchange.event(None, event_id="e0", retry=20)
        await exchange.event(progress, event_id="e1")
        await exchange.cut_connection()

    async def on_get(exchange: ServerExchange) -> None:
        assert exchange.headers["last-event-id"] == "e1"
        await exchange.start_events()
        await exchange.event({"jsonrpc": "2.0", "id": 7, "result": {"content": []}}, event_id="e2")
        await exchange.end()

    server = LegacyServer(on_call=on_call)
    with trio.fail_after(TIMEOUT):
        async with scripted_server(server) as http, client(http.url()) as channel:
            await channel.send(INIT)
            await channel.receive()
            server.on_get = on_get  # (no initialized sent: the only GET is the resumption)
            await channel.send(call(7))
            assert (await channel.receive())["method"] == "notifications/progress"
            assert await channel.receive() == {"jsonrpc": "2.0", "id": 7, "result": {"content": []}}
        (get,) = http.gets()
        assert get.headers["mcp-session-id"] == "s1"


async def test_a_stream_ended_gracefully_after_a_priming_event_is_resumed_by_get_only_after_retry_ms() -> (
    None
):
    # The conformance suite's client scenario "sse-retry" (SEP-1699), which this environment's
    # Node cannot run: priming event (id, retry: 500, no data), a clean end, the reply on the GET.
    closed_at: list[float] = []
    resumed_at: list[float] = []

    async def on_call(exchange: ServerExchange) -> None:
        await exchange.start_events()
        await exchange.event(None, event_id="event-1", retry=500)
        await exchange.end()
        closed_at.append(trio.current_time())

    async def on_get(exchange: ServerExchange) -> None:
        await exchange.start_events()
        if exchange.headers.get("last-event-id") == "event-1":
            resumed_at.append(trio.current_time())
            reply = {
                "jsonrpc": "2.0",
                "id": 4,
                "result": {"content": [{"type": "text", "text": "reconnected"}]},
            }
            await exchange.event(reply, event_id="event-2")
        await exchange.wait_disconnect()

    server = LegacyServer(on_call=on_call, on_get=on_get)
    with trio.fail_after(TIMEOUT):
        async with scripted_server(server) as http, client(http.url()) as channel:
            await open_session(channel)
            await channel.send(call(4))
            assert (await channel.receive())["result"]["content"][0]["text"] == "reconnected"
            resumed = await http.wait_for(lambda r: r.headers.get("last-event-id") == "event-1")
            assert resumed.method == "GET" and resumed.headers["mcp-session-id"] == "s1"
            assert (
                resumed_at[0] - closed_at[0] >= 0.45
            )  # the server's retry: 500 ms (with its 50 ms tolerance)


async def test_a_stream_cut_before_the_reply_without_event_ids_is_answered_with_an_error() -> None:
    async def on_call(exchange: ServerExchange) -> None:
        await exchange.start_events()
        await exchange.chunk(b": just a comment\n\n")
        await exchange.cut_connection()

    with trio.fail_after(TIMEOUT):
        async with scripted_server(LegacyServer(on_call=on_call)) as http, client(http.url()) as channel:
            await open_session(channel)
            await channel.send(call(3))
            reply = await channel.receive()
        assert reply["id"] == 3
        assert reply["error"]["code"] == -32000
        assert reply["error"]["data"]["reason"] in ("no-reply", "connection-failed")
        assert not http.gets() or all("last-event-id" not in r.headers for r in http.gets())


async def test_send_eof_waits_for_outstanding_replies_then_deletes_the_session_and_receive_ends() -> None:
    release = trio.Event()

    async def on_call(exchange: ServerExchange) -> None:
        await release.wait()
        await exchange.result({"late": True})

    server = LegacyServer(on_call=on_call)
    with trio.fail_after(TIMEOUT):
        async with scripted_server(server) as http, client(http.url()) as channel:
            await open_session(channel)
            await channel.send(call(1))
            await channel.send_eof()
            await http.wait_for(lambda r: r.rpc_method == "tools/call")
            await wait_all_tasks_blocked()
            assert not [r for r in http.requests if r.method == "DELETE"]
            release.set()
            assert await receive_until_end(channel) == [{"jsonrpc": "2.0", "id": 1, "result": {"late": True}}]
            with pytest.raises(trio.EndOfChannel):
                await channel.receive()
            with pytest.raises(trio.ClosedResourceError):
                await channel.send(call(2))
        (delete,) = [r for r in http.requests if r.method == "DELETE"]
        assert delete.headers["mcp-session-id"] == "s1"
        assert server.valid == set()


async def test_a_legacy_cancellation_is_posted_and_the_cancelled_request_gets_no_reply() -> None:
    async def on_call(exchange: ServerExchange) -> None:
        await exchange.start_events()
        await exchange.wait_disconnect()

    with trio.fail_after(TIMEOUT):
        async with scripted_server(LegacyServer(on_call=on_call)) as http, client(http.url()) as channel:
            await open_session(channel)
            await channel.send(call(5))
            await channel.send(cancel(5))
            await channel.send_eof()
            assert await receive_until_end(channel) == []
        (posted,) = http.posts("notifications/cancelled")
        assert posted.message["params"]["requestId"] == 5
        assert posted.headers["mcp-session-id"] == "s1"


async def test_cancelling_a_legacy_request_without_a_session_is_still_posted_and_the_request_abandoned() -> (
    None
):
    async def handler(exchange: ServerExchange) -> None:
        if exchange.rpc_method == "tools/call":
            await exchange.start_events()
            await exchange.wait_disconnect()
        else:
            await exchange.accepted()

    with trio.fail_after(TIMEOUT):
        async with scripted_server(handler) as http, client(http.url()) as channel:
            await channel.send(call(8))  # legacy (no _meta), and no initialize: a sessionless server
            await channel.send(cancel(8))
            await channel.send_eof()
            assert await receive_until_end(channel) == []
        (posted,) = http.posts("notifications/cancelled")
        assert "mcp-session-id" not in posted.headers


# -- modern requests ---------------------------------------------------------------------------------


async def test_a_modern_request_carries_the_routing_headers_and_no_session() -> None:
    async def handler(exchange: ServerExchange) -> None:
        await exchange.result({"resultType": "complete"})

    requests = [
        modern(call(1, "get_weather", city="Paris")),
        modern(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "resources/read",
                "params": {"uri": "file:///tmp/ça va.txt"},
            }
        ),
        modern({"jsonrpc": "2.0", "id": 3, "method": "prompts/get", "params": {"name": " padded "}}),
        modern({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {}}),
    ]
    with trio.fail_after(TIMEOUT):
        async with scripted_server(handler) as http, client(http.url()) as channel:
            for request in requests:
                await channel.send(request)
                await channel.receive()
    headers = [r.headers for r in http.posts()]
    assert [h["mcp-protocol-version"] for h in headers] == ["2026-07-28"] * 4
    assert [h["mcp-method"] for h in headers] == ["tools/call", "resources/read", "prompts/get", "tools/list"]
    assert [h.get("mcp-name") for h in headers] == [
        "get_weather",
        "=?base64?ZmlsZTovLy90bXAvw6dhIHZhLnR4dA==?=",  # not ASCII: base64 of the UTF-8
        "=?base64?IHBhZGRlZCA=?=",  # blanks at the ends would not survive: base64 too
        None,
    ]
    assert not any("mcp-session-id" in h for h in headers)


async def test_cancelling_a_modern_request_closes_its_stream_instead_of_posting_the_cancellation() -> None:
    disconnected = trio.Event()

    async def handler(exchange: ServerExchange) -> None:
        if exchange.message["params"]["name"] == "forever":
            await exchange.start_events()
            await exchange.wait_disconnect()
            disconnected.set()
        else:
            await exchange.result({"ok": True})

    with trio.fail_after(TIMEOUT):
        async with scripted_server(handler) as http, client(http.url()) as channel:
            await channel.send(modern(call(1, "forever")))
            await http.wait_for(lambda r: r.rpc_method == "tools/call")
            await channel.send(cancel(1))
            await disconnected.wait()  # the server saw its response stream close: that is the cancellation
            await channel.send(modern(call(2, "quick")))
            assert (await channel.receive())["id"] == 2
            await channel.send_eof()
            assert await receive_until_end(channel) == []  # and request 1 is owed nothing
        assert http.posts("notifications/cancelled") == []


# -- HTTP outcomes without a reply ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "code", "reason"),
    [
        (500, -32000, "http-error"),
        (502, -32000, "http-error"),
        (401, UNAUTHORIZED, "unauthorized"),
        (403, UNAUTHORIZED, "forbidden"),
        (413, -32600, "message-too-large"),
    ],
)
async def test_an_error_status_without_a_jsonrpc_body_becomes_an_error_reply_with_the_request_id(
    status: int, code: int, reason: str
) -> None:
    async def handler(exchange: ServerExchange) -> None:
        await exchange.respond(status, b"<html>oops</html>", content_type="text/html")

    with trio.fail_after(TIMEOUT):
        async with scripted_server(handler) as http, client(http.url()) as channel:
            for request_id in (1, "1"):
                await channel.send(modern(call(request_id)))
                reply = await channel.receive()
                assert reply["id"] == request_id and type(reply["id"]) is type(request_id)
                assert reply["error"]["code"] == code
                assert reply["error"]["data"] == {"reason": reason, "status": status}
                assert str(status) in reply["error"]["message"]


async def test_an_error_status_with_a_jsonrpc_error_body_becomes_that_error_with_the_request_id() -> None:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32020, "message": "Header mismatch"}}

    async def handler(exchange: ServerExchange) -> None:
        await exchange.reply(body, status=400)

    with trio.fail_after(TIMEOUT):
        async with scripted_server(handler) as http, client(http.url()) as channel:
            await channel.send(modern(call("a")))
            assert await channel.receive() == {**body, "id": "a"}


async def test_a_202_for_a_request_is_answered_with_an_error_instead_of_a_hang() -> None:
    async def handler(exchange: ServerExchange) -> None:
        await exchange.accepted()

    with trio.fail_after(TIMEOUT):
        async with scripted_server(handler) as http, client(http.url()) as channel:
            await channel.send(modern(call(1)))
            reply = await channel.receive()
        assert reply["error"]["data"]["reason"] == "no-reply" and reply["error"]["data"]["status"] == 202


async def test_a_server_that_goes_away_answers_each_request_with_an_error_and_the_channel_goes_on() -> None:
    async def handler(exchange: ServerExchange) -> None:
        await exchange.result({})

    with trio.fail_after(TIMEOUT):
        async with scripted_server(handler) as http, client(http.url()) as channel:
            await channel.send(modern(call(1)))
            assert "result" in await channel.receive()
            http.stop()  # the server is gone, its port closed
            for request_id in (2, 3):
                await channel.send(modern(call(request_id)))
                reply = await channel.receive()
                assert reply["id"] == request_id
                assert reply["error"]["code"] == -32000
                assert reply["error"]["data"]["reason"] == "connection-failed"
                assert "127.0.0.1" in reply["error"]["data"]["detail"]


# -- bodies, streams and limits ---------------------------------------------------------------------


async def test_a_chunked_json_body_trickled_one_byte_per_chunk_is_read_whole() -> None:
    async def trickle(exchange: ServerExchange) -> None:
        exchange.responded = True
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"text": "é ✓ \u2028"}}).encode()
        await exchange._send(h11.Response(status_code=200, headers=[("Content-Type", "application/json")]))
        for byte in body:
            await exchange.chunk(bytes([byte]))
        await exchange.end()

    with trio.fail_after(TIMEOUT):
        async with scripted_server(trickle) as http, client(http.url()) as channel:
            await channel.send(modern(call(1)))
            assert await channel.receive() == {"jsonrpc": "2.0", "id": 1, "result": {"text": "é ✓ \u2028"}}


async def test_events_split_anywhere_with_crlf_line_ends_and_comments_are_decoded() -> None:
    progress = {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "t", "progress": 1},
    }
    reply = {"jsonrpc": "2.0", "id": 1, "result": {}}
    wire = (
        b": keep-alive\r\n\r\nevent: message\r\ndata: " + json.dumps(progress).encode() + b"\r\n\r\n"
        b"data: " + json.dumps(reply).encode() + b"\r\n\r\n"
    )

    async def handler(exchange: ServerExchange) -> None:
        await exchange.start_events()
        for start in range(0, len(wire), 7):
            await exchange.chunk(wire[start : start + 7])
        await exchange.end()

    with trio.fail_after(TIMEOUT):
        async with scripted_server(handler) as http, client(http.url()) as channel:
            await channel.send(modern(call(1)))
            assert await channel.receive() == progress
            assert await channel.receive() == reply


async def test_an_event_over_max_message_bytes_answers_its_request_with_message_too_large() -> None:
    async def handler(exchange: ServerExchange) -> None:
        await exchange.start_events()
        await exchange.event({"jsonrpc": "2.0", "id": 9, "result": {"text": "x" * 5000}})
        await exchange.end()

    with trio.fail_after(TIMEOUT):
        async with scripted_server(handler) as http, client(http.url(), max_message_bytes=4096) as channel:
            await channel.send(modern(call(9)))
            with pytest.raises(MessageTooLarge) as caught:
                await channel.receive()
            assert caught.value.request_id == 9 and caught.value.limit == 4096
            await channel.send(modern(call(10)))  # and the channel goes on
            with pytest.raises(MessageTooLarge):
                await channel.receive()


async def test_a_json_reply_over_max_message_bytes_answers_its_request_with_message_too_large() -> None:
    async def handler(exchange: ServerExchange) -> None:
        await exchange.result({"text": "x" * 5000})

    with trio.fail_after(TIMEOUT):
        async with scripted_server(handler) as http, client(http.url(), max_message_bytes=4096) as channel:
            await channel.send(modern(call("big")))
            with pytest.raises(MessageTooLarge) as caught:
                await channel.receive()
            assert caught.value.request_id == "big"


async def test_an_invalid_message_on_a_stream_is_reported_and_the_request_still_gets_an_answer() -> None:
    async def handler(exchange: ServerExchange) -> None:
        await exchange.start_events()
        await exchange.chunk(b"data: {not json\n\n")
        await exchange.end()

    with trio.fail_after(TIMEOUT):
        async with scripted_server(handler) as http, client(http.url()) as channel:
            await channel.send(modern(call(1)))
            with pytest.raises(ProtocolError):
                await channel.receive()
            reply = await channel.receive()
            assert reply["id"] == 1 and reply["error"]["data"]["reason"] == "no-reply"


# -- connections -------------------------------------------------------------------------------------


async def test_a_slow_request_does_not_hold_up_others_which_run_on_other_connections() -> None:
    release = trio.Event()

    async def handler(exchange: ServerExchange) -> None:
        if exchange.message["params"]["name"] == "slow":
            await release.wait()
        await exchange.result({"tool": exchange.message["params"]["name"]})

    with trio.fail_after(TIMEOUT):
        async with scripted_server(handler) as http, client(http.url()) as channel:
            await channel.send(modern(call(1, "slow")))
            await channel.send(modern(call(2, "fast")))
            assert (await channel.receive())["id"] == 2
            release.set()
            assert (await channel.receive())["id"] == 1
        assert http.connections == 2


async def test_sequential_requests_reuse_one_kept_alive_connection() -> None:
    async def handler(exchange: ServerExchange) -> None:
        await exchange.result({})

    with trio.fail_after(TIMEOUT):
        async with scripted_server(handler) as http, client(http.url()) as channel:
            for request_id in range(5):
                await channel.send(modern(call(request_id)))
                await channel.receive()
        assert http.connections == 1


@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_a_server_that_closes_idle_connections_unannounced_costs_no_request(
    scheme: str, tls_files: Any
) -> None:
    async def handler(exchange: ServerExchange) -> None:
        await exchange.result({})

    context = None
    if scheme == "https":
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(tls_files.server_cert, tls_files.server_key)
    with trio.fail_after(TIMEOUT):
        async with (
            scripted_server(handler, ssl_context=context, close_after_each=True) as http,
            client(http.url(scheme), tls_ca=tls_files.ca) as channel,
        ):
            for request_id in range(5):
                await channel.send(modern(call(request_id)))
                reply = await channel.receive()
                assert "result" in reply, reply
        assert len(http.posts()) == 5


async def test_requests_held_open_never_take_the_connections_that_notifications_and_replies_need() -> None:
    release = trio.Event()

    async def handler(exchange: ServerExchange) -> None:
        if exchange.rpc_method == "tools/call":
            await exchange.start_events()
            await release.wait()
            await exchange.event({"jsonrpc": "2.0", "id": exchange.message["id"], "result": {}})
            await exchange.end()
        else:
            await exchange.accepted()

    held = MAX_CONNECTIONS - RESERVED_CONNECTIONS
    with trio.fail_after(TIMEOUT):
        async with scripted_server(handler) as http, client(http.url()) as channel:
            for request_id in range(held):
                await channel.send(modern(call(request_id)))
            await http.wait_for(lambda r: r.rpc_method == "tools/call" and r.message["id"] == held - 1)
            await channel.send(modern(call(held)))  # returns: the request waits for a connection ...
            await wait_all_tasks_blocked()
            assert len(http.posts("tools/call")) == held
            # ... and a notification and a reply to a server request still go out at once
            await channel.send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}})
            await channel.send({"jsonrpc": "2.0", "id": "srv", "result": {}})
            assert http.posts()[-1].message["id"] == "srv"
            release.set()
            replies = {(await channel.receive())["id"] for _ in range(held + 1)}  # the waiting one too
            assert replies == set(range(held + 1))
        assert http.max_open_connections <= MAX_CONNECTIONS


async def test_requests_beyond_the_queue_bound_are_answered_at_once_with_too_many_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(httpdispatch, "MAX_QUEUED_REQUESTS", 2)
    release = trio.Event()

    async def handler(exchange: ServerExchange) -> None:
        await release.wait()
        await exchange.result({})

    held = MAX_CONNECTIONS - RESERVED_CONNECTIONS
    with trio.fail_after(TIMEOUT):
        async with scripted_server(handler) as http, client(http.url()) as channel:
            for request_id in range(held + 3):
                await channel.send(modern(call(request_id)))
            refused = await channel.receive()
            assert refused["id"] == held + 2
            assert refused["error"]["code"] == -31002
            assert refused["error"]["data"] == {"reason": "too-many-requests", "limit": 2}
            release.set()
            answered = {(await channel.receive())["id"] for _ in range(held + 2)}
            assert answered == set(range(held + 2))


# -- credentials and reachability -------------------------------------------------------------------


async def test_the_bearer_token_goes_on_every_request_get_and_delete_included() -> None:
    async def stream(exchange: ServerExchange) -> None:
        await exchange.start_events()
        await exchange.wait_disconnect()

    server = LegacyServer(on_get=stream)
    with trio.fail_after(TIMEOUT):
        async with scripted_server(server) as http, client(http.url(), token="s3cret") as channel:
            await open_session(channel)
            await http.wait_for(lambda r: r.method == "GET")
            await channel.send(call(1))
            await channel.receive()
    assert {r.method for r in http.requests} == {"POST", "GET", "DELETE"}
    assert all(r.headers["authorization"] == "Bearer s3cret" for r in http.requests)


async def test_open_http_client_raises_connect_error_when_nothing_listens() -> None:
    with trio.fail_after(TIMEOUT):
        async with scripted_server(LegacyServer()) as http:
            url = http.url()
        with pytest.raises(ConnectError, match=r"127\.0\.0\.1"):
            async with client(url):
                pass


async def test_https_works_with_a_trusted_ca_and_an_untrusted_certificate_is_a_connect_error(
    tls_files: Any,
) -> None:
    import ssl

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls_files.server_cert, tls_files.server_key)

    async def handler(exchange: ServerExchange) -> None:
        await exchange.result({"secure": True})

    with trio.fail_after(TIMEOUT):
        async with scripted_server(handler, ssl_context=context) as http:
            async with client(http.url("https"), tls_ca=tls_files.ca) as channel:
                assert channel.peer.transport == "https"
                for request_id in range(3):
                    await channel.send(modern(call(request_id)))
                    assert (await channel.receive())["result"] == {"secure": True}
            assert http.connections == 1  # kept alive, the reachability check's connection included
            with pytest.raises(ConnectError):
                async with client(http.url("https"), tls_ca=tls_files.other_ca):
                    pass
