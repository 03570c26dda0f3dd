"""The Streamable HTTP client channel (``open_http_client``) against the official SDK's server.

The server is ``tests/sdk_http_server.py``: the ``mcp`` SDK's own Streamable HTTP transport (legacy
sessions with resumability, and 2026-07-28 single-exchange POSTs), run as a process on a listening
socket the test owns, so it can be killed and restarted on the same port. Also here: the
:class:`~channels.MessageChannel` contract as it applies to a client-only channel, the sans-IO
header and error helpers, and ``mcp-bridge connect`` end to end with an SDK stdio client.
``tests/channels/http/test_httpclient_faults.py`` injects precise faults with a scripted server.
"""

from __future__ import annotations

import json
import logging
import socket
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from scripted_http import ServerExchange, scripted_server
from trio.testing import wait_all_tasks_blocked

from channels import ConnectOptions, MessageChannel
from channels._http.client.channel import open_http_client
from channels._http.client.stream import StreamPosition, reconnect_delay
from channels._mcp.client import modern_headers, status_reply
from channels._mcp.headers import claimed_version
from channels._mcp.params import ToolHeaders, param_headers
from channels._sockets.endpoint import parse_endpoint

REPO = Path(__file__).resolve().parents[3]  # tests/channels/http/ -> the repository
SDK_HTTP_SERVER = str(REPO / "tests" / "sdk_http_server.py")
CONNECT = ["-m", "bridge", "connect"]  # the real command, run from the repository root

TIMEOUT = 30  # seconds per SDK test: one or two interpreter start-ups (uvicorn, the SDK) and some calls

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "mcp-bridge-test", "version": "1"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def call(request_id: Any, tool: str, meta: dict[str, Any] | None = None, **arguments: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def modern_call(request_id: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    return call(request_id, tool, dict(MODERN_META), **arguments)


def text_of(reply: dict[str, Any]) -> str:
    assert "result" in reply, reply
    return reply["result"]["content"][0]["text"]  # type: ignore[no-any-return]


@asynccontextmanager
async def client(url: str, **options: Any) -> AsyncIterator[MessageChannel]:
    async with open_http_client(
        parse_endpoint(url, "http", kind="an HTTP address"), ConnectOptions(**options)
    ) as ch:
        yield ch


async def open_session(channel: MessageChannel) -> dict[str, Any]:
    await channel.send(INIT)
    reply = await channel.receive()
    assert reply["id"] == 0 and reply["result"]["protocolVersion"] == "2025-11-25", reply
    await channel.send(INITIALIZED)
    return reply


# -- the SDK server as a process -------------------------------------------------------------------


@attrs.define(eq=False)
class SdkHttpServer:
    """The SDK server on a socket this test owns; ``restart`` kills it and starts a fresh one."""

    listener: socket.socket
    flags: tuple[str, ...]
    process: trio.Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}/mcp"

    async def start(self) -> None:
        fd = self.listener.fileno()
        self.process = await trio.lowlevel.open_process(
            [sys.executable, SDK_HTTP_SERVER, "--fd", str(fd), *self.flags], pass_fds=[fd], cwd=REPO
        )

    async def stop(self) -> None:
        if self.process is not None:
            with trio.CancelScope(shield=True):
                self.process.kill()
                await self.process.wait()
            self.process = None

    async def restart(self) -> None:
        await self.stop()
        await self.start()


@asynccontextmanager
async def sdk_http_server(*flags: str) -> AsyncIterator[SdkHttpServer]:
    """An SDK Streamable HTTP server on 127.0.0.1 (a free port); killed and reaped on exit.

    The socket is listening before the process starts: early requests wait in its backlog.
    """
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    server = SdkHttpServer(listener, flags)
    try:
        await server.start()
        yield server
    finally:
        await server.stop()
        listener.close()


# -- the legacy era with the SDK server ---------------------------------------------------------


async def test_a_legacy_session_with_the_sdk_server_calls_a_tool_and_its_progress_arrives_before_the_reply() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with sdk_http_server() as server, client(server.url) as channel:
            await open_session(channel)
            await channel.send(call(1, "slow", {"progressToken": "p"}, steps=3))
            progress = [await channel.receive() for _ in range(3)]
            assert [m["params"]["progress"] for m in progress] == [1, 2, 3]
            assert all(m["method"] == "notifications/progress" for m in progress)
            assert text_of(await channel.receive()) == "done"
            await channel.send(call("two", "add", a=2, b=40))
            reply = await channel.receive()
            assert reply["id"] == "two" and text_of(reply) == "42"


async def test_the_sdk_servers_elicitation_request_is_answered_through_the_channel() -> None:
    with trio.fail_after(TIMEOUT):
        async with sdk_http_server() as server, client(server.url) as channel:
            await open_session(channel)
            await channel.send(call(1, "ask", question="Ready?"))
            question = await channel.receive()
            assert question["method"] == "elicitation/create"
            assert question["params"]["message"] == "Ready?"
            answer = {"action": "accept", "content": {"answer": "yes, über ✓"}}
            await channel.send({"jsonrpc": "2.0", "id": question["id"], "result": answer})
            assert text_of(await channel.receive()) == "you said yes, über ✓"


async def test_a_notification_unrelated_to_any_request_arrives_on_the_sdk_servers_standalone_stream() -> None:
    with trio.fail_after(TIMEOUT):
        async with sdk_http_server() as server, client(server.url) as channel:
            await open_session(channel)
            # The standalone stream opens in the background after `initialized`; ask until it is up
            # (a notification sent while no stream is open is dropped by the server).
            received: list[dict[str, Any]] = []
            request_id = 0
            while not any(m.get("method") == "notifications/tools/list_changed" for m in received):
                request_id += 1
                await channel.send(call(request_id, "announce"))
                while not any(m.get("id") == request_id for m in received):
                    received.append(await channel.receive())


async def test_an_sdk_tool_that_closes_its_stream_midway_is_followed_to_its_reply_with_last_event_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, "channels.http.client")
    with trio.fail_after(TIMEOUT):
        async with sdk_http_server() as server, client(server.url) as channel:
            await open_session(channel)
            await channel.send(call(5, "interrupted", {"progressToken": "q"}, steps=3))
            progress = [await channel.receive() for _ in range(3)]
            assert [m["params"]["progress"] for m in progress] == [1, 2, 3]
            reply = await channel.receive()
            assert reply["id"] == 5 and text_of(reply) == "resumed"
    assert "resuming the stream of request 5" in caplog.text


async def test_a_restarted_sdk_server_is_reinitialised_and_the_request_that_got_404_succeeds_unnoticed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "channels.http.client")
    with trio.fail_after(TIMEOUT):
        async with sdk_http_server() as server, client(server.url) as channel:
            await open_session(channel)
            await channel.send(call(1, "echo", text="before"))
            assert text_of(await channel.receive()) == "before"
            await server.restart()  # every session is gone
            await channel.send(call(2, "echo", text="after"))
            reply = await channel.receive()
            assert reply["id"] == 2 and text_of(reply) == "after"
            await channel.send(call(3, "add", a=1, b=2))
            assert text_of(await channel.receive()) == "3"
    assert "initialising again" in caplog.text


async def test_the_sdk_servers_json_response_mode_is_read_as_json_bodies() -> None:
    with trio.fail_after(TIMEOUT):
        async with sdk_http_server("--json-response") as server, client(server.url) as channel:
            await open_session(channel)
            await channel.send(call(1, "echo", text="plain JSON"))
            assert text_of(await channel.receive()) == "plain JSON"


async def test_send_eof_ends_the_sdk_session_with_delete_and_then_the_channel_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, "channels.http.client")
    with trio.fail_after(TIMEOUT):
        async with sdk_http_server() as server, client(server.url) as channel:
            await open_session(channel)
            await channel.send(call(1, "echo", text="last"))
            await channel.send_eof()
            assert text_of(await channel.receive()) == "last"
            with pytest.raises(trio.EndOfChannel):
                await channel.receive()
    assert "session ended: HTTP 200" in caplog.text


# -- the 2026-07-28 era with the SDK server -------------------------------------------------------


async def test_a_modern_request_reaches_the_sdk_server_with_the_routing_headers_and_no_session() -> None:
    with trio.fail_after(TIMEOUT):
        async with sdk_http_server() as server, client(server.url) as channel:
            await channel.send(modern_call("m1", "headers"))
            reply = await channel.receive()
            assert reply["id"] == "m1" and reply["result"]["resultType"] == "complete"
            assert json.loads(text_of(reply)) == {
                "mcp-protocol-version": "2026-07-28",
                "mcp-method": "tools/call",
                "mcp-name": "headers",
            }


async def test_arguments_annotated_x_mcp_header_in_a_listing_are_mirrored_in_mcp_param_headers() -> None:
    listing = {"jsonrpc": "2.0", "id": "list", "method": "tools/list", "params": {"_meta": dict(MODERN_META)}}
    with trio.fail_after(TIMEOUT):
        async with sdk_http_server() as server, client(server.url) as channel:
            await channel.send(listing)
            tools = {tool["name"]: tool for tool in (await channel.receive())["result"]["tools"]}
            assert tools["route"]["inputSchema"]["properties"]["region"]["x-mcp-header"] == "Region"
            await channel.send(modern_call(1, "route", region="eu-west ü", priority=3))
            reply = await channel.receive()
    assert json.loads(text_of(reply)) == {
        "mcp-param-region": "=?base64?ZXUtd2VzdCDDvA==?=",  # not ASCII: base64 of the UTF-8
        "mcp-param-priority": "3",
    }


async def test_a_call_to_an_annotated_tool_before_any_listing_gets_no_mcp_param_headers_and_is_refused() -> (
    None
):
    # The channel learns annotations only from listings it carries (as the SDK clients do).
    with trio.fail_after(TIMEOUT):
        async with sdk_http_server() as server, client(server.url) as channel:
            await channel.send(modern_call(1, "route", region="eu", priority=1))
            reply = await channel.receive()
    assert reply["id"] == 1 and reply["error"]["code"] == -32020  # HeaderMismatch, with HTTP 400


async def test_modern_progress_from_the_sdk_server_arrives_before_the_reply() -> None:
    meta = {**MODERN_META, "progressToken": 7}
    with trio.fail_after(TIMEOUT):
        async with sdk_http_server() as server, client(server.url) as channel:
            await channel.send(call(1, "slow", meta, steps=2))
            first, second = await channel.receive(), await channel.receive()
            assert [first["params"]["progress"], second["params"]["progress"]] == [1, 2]
            assert text_of(await channel.receive()) == "done"


async def test_a_non_ascii_resource_uri_goes_in_base64_and_the_sdk_server_finds_the_headers_consistent() -> (
    None
):
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "resources/read",
        "params": {"uri": "file:///tmp/café menu.txt", "_meta": dict(MODERN_META)},
    }
    with trio.fail_after(TIMEOUT):
        async with sdk_http_server() as server, client(server.url) as channel:
            await channel.send(request)
            reply = await channel.receive()
    assert reply["id"] == 1
    assert reply["error"]["code"] != -32020  # no header mismatch: the base64 Mcp-Name decoded to the uri
    assert reply["error"]["code"] == -32602  # the resource does not exist (2026-07-28's code for it)


async def test_modern_errors_the_sdk_server_sends_with_an_http_status_become_replies_with_the_request_id() -> (
    None
):
    unknown = {
        "jsonrpc": "2.0",
        "id": "u",
        "method": "no/such/method",
        "params": {"_meta": dict(MODERN_META)},
    }
    future = call(
        9,
        "echo",
        {**MODERN_META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"},
        text="from the future",
    )
    with trio.fail_after(TIMEOUT):
        async with sdk_http_server() as server, client(server.url) as channel:
            await channel.send(unknown)
            reply = await channel.receive()
            assert reply["id"] == "u" and reply["error"]["code"] == -32601  # sent with HTTP 404
            await channel.send(future)
            reply = await channel.receive()
            assert reply["id"] == 9 and reply["error"]["code"] == -32022  # sent with HTTP 400
            assert "2026-07-28" in reply["error"]["data"]["supported"]


async def test_cancelling_a_modern_request_at_the_sdk_server_leaves_no_reply_and_the_channel_goes_on() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with sdk_http_server() as server, client(server.url) as channel:
            await channel.send(modern_call(1, "wait_forever"))
            await channel.send(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
            )
            await channel.send(modern_call(2, "echo", text="still here"))
            assert text_of(await channel.receive()) == "still here"
            await channel.send_eof()
            with pytest.raises(trio.EndOfChannel):
                await channel.receive()


# -- mcp-bridge connect, end to end -------------------------------------------------------------


@asynccontextmanager
async def sdk_stdio_client(url: str, mode: str) -> AsyncIterator[Client]:
    """The SDK's ``Client`` over its stdio transport, running ``mcp-bridge connect URL``."""
    params = StdioServerParameters(command=sys.executable, args=[*CONNECT, url], cwd=REPO)
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
        try:
            async with Client(stdio_client(params, errlog=errlog), mode=mode) as sdk_client:
                yield sdk_client
        finally:
            errlog.seek(0)
            print(f"mcp-bridge connect's stderr:\n{errlog.read()}", file=sys.stderr)


@pytest.mark.parametrize(("mode", "version"), [("legacy", "2025-11-25"), ("2026-07-28", "2026-07-28")])
async def test_an_sdk_stdio_client_uses_the_sdk_http_server_through_mcp_bridge_connect(
    mode: str, version: str
) -> None:
    with trio.fail_after(TIMEOUT):
        async with sdk_http_server() as server, sdk_stdio_client(server.url, mode) as sdk:
            assert sdk.protocol_version == version
            tools = await sdk.list_tools()
            assert {"echo", "add", "slow"} <= {tool.name for tool in tools.tools}
            added = await sdk.call_tool("add", {"a": 2, "b": 40})
            assert added.structured_content == {"result": 42}
            echoed = await sdk.call_tool("echo", {"text": "line one\nline two, é ✓"})
            assert echoed.structured_content == {"result": "line one\nline two, é ✓"}


async def test_an_sdk_stdio_client_does_not_notice_the_http_server_restarting_behind_mcp_bridge_connect() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with sdk_http_server() as server, sdk_stdio_client(server.url, "legacy") as sdk:
            before = await sdk.call_tool("echo", {"text": "before"})
            assert before.structured_content == {"result": "before"}
            await server.restart()
            after = await sdk.call_tool("echo", {"text": "after"})
            assert after.structured_content == {"result": "after"}


async def test_mcp_bridge_connect_over_http_answers_its_stdin_then_exits_0_and_69_when_nothing_listens() -> (
    None
):
    async def handler(exchange: ServerExchange) -> None:
        if exchange.rpc_method == "tools/call":
            await exchange.result({"content": [{"type": "text", "text": "hi"}]})
        else:
            await exchange.respond(200 if exchange.method == "DELETE" else 405)

    request = json.dumps(modern_call(1, "echo")).encode() + b"\n"
    with trio.fail_after(TIMEOUT):
        async with scripted_server(handler) as http:
            done = await trio.run_process(
                [sys.executable, *CONNECT, http.url()],
                stdin=request,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                cwd=REPO,
            )
            url = http.url()
        assert done.returncode == 0, done.stderr.decode()
        (line,) = done.stdout.splitlines()
        assert json.loads(line)["result"]["content"][0]["text"] == "hi"
        refused = await trio.run_process(
            [sys.executable, *CONNECT, url],
            stdin=b"",
            capture_stderr=True,
            check=False,
            cwd=REPO,
        )
        assert refused.returncode == 69
        assert b"cannot connect" in refused.stderr


# -- the MessageChannel contract, as it applies to a client-only channel -----------------------


async def answer_everything(exchange: ServerExchange) -> None:
    if exchange.method == "POST" and "id" in exchange.message and "method" in exchange.message:
        await exchange.result({"ok": True})
    else:
        await exchange.accepted()


async def test_send_refuses_what_is_not_a_jsonrpc_message_and_posts_nothing() -> None:
    bad = [
        {"hello": "world"},
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": True, "method": "ping"},
        [{"jsonrpc": "2.0", "id": 1, "method": "ping"}],
        {"jsonrpc": "2.0", "id": 1, "result": {"x": "\ud800"}},
    ]
    with trio.fail_after(TIMEOUT):
        async with scripted_server(answer_everything) as http, client(http.url()) as channel:
            for message in bad:
                with pytest.raises(ValueError):
                    await channel.send(message)  # type: ignore[arg-type]
            assert http.requests == []


async def test_a_closed_channel_refuses_every_operation_and_closing_again_is_harmless() -> None:
    with trio.fail_after(TIMEOUT):
        async with scripted_server(answer_everything) as http, client(http.url()) as channel:
            await channel.aclose()
            with pytest.raises(trio.ClosedResourceError):
                await channel.send(modern_call(1, "echo"))
            with pytest.raises(trio.ClosedResourceError):
                await channel.receive()
            with pytest.raises(trio.ClosedResourceError):
                channel.receive_nowait()
            with pytest.raises(trio.ClosedResourceError):
                await channel.send_eof()
            await channel.aclose()
            assert http.requests == []


async def test_a_cancelled_aclose_still_closes_and_still_ends_the_session() -> None:
    with trio.fail_after(TIMEOUT):
        async with scripted_server(answer_everything) as http, client(http.url()) as channel:
            await channel.send(INIT)
            await http.wait_for(lambda r: r.rpc_method == "initialize")
            with trio.CancelScope() as scope:
                scope.cancel()
                await channel.aclose()
            with pytest.raises(trio.ClosedResourceError):
                await channel.receive()


async def test_aclose_wakes_a_blocked_receive_and_concurrent_receives_are_busy() -> None:
    with trio.fail_after(TIMEOUT):
        async with scripted_server(answer_everything) as http, client(http.url()) as channel:

            async def receive_expecting_closed() -> None:
                with pytest.raises(trio.ClosedResourceError):
                    await channel.receive()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(receive_expecting_closed)
                await wait_all_tasks_blocked()
                with pytest.raises(trio.BusyResourceError):
                    await channel.receive()
                with pytest.raises(trio.BusyResourceError):
                    channel.receive_nowait()
                await channel.aclose()


async def test_a_cancelled_receive_loses_no_reply() -> None:
    with trio.fail_after(TIMEOUT):
        async with scripted_server(answer_everything) as http, client(http.url()) as channel:
            with trio.CancelScope() as scope:
                scope.cancel()
                with pytest.raises(trio.Cancelled):
                    await channel.receive()
            await channel.send(modern_call(1, "echo"))
            assert (await channel.receive())["result"] == {"ok": True}
            assert channel.peer.transport == "http" and channel.peer.address == f"127.0.0.1:{http.port}"


# -- the sans-IO helpers ----------------------------------------------------------------------------


def test_the_era_of_a_request_is_its_meta_protocol_version() -> None:
    assert claimed_version(modern_call(1, "x")) == "2026-07-28"
    assert claimed_version(call(1, "x")) is None
    assert claimed_version({"jsonrpc": "2.0", "id": 1, "method": "ping"}) is None
    assert claimed_version({"jsonrpc": "2.0", "id": 1, "method": "x", "params": [1]}) is None
    assert claimed_version(call(1, "x", {"io.modelcontextprotocol/protocolVersion": 7})) is None


def test_mcp_name_comes_from_the_tool_or_prompt_name_or_the_resource_uri() -> None:
    def name(method: str, **params: Any) -> str | None:
        headers = dict(
            modern_headers({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, "2026-07-28")
        )
        assert headers["MCP-Protocol-Version"] == "2026-07-28" and headers["Mcp-Method"] == method
        return headers.get("Mcp-Name")

    assert name("tools/call", name="echo") == "echo"
    assert name("prompts/get", name="greet") == "greet"
    assert name("resources/read", uri="file:///a") == "file:///a"
    assert name("tasks/get", taskId="t-1") == "t-1"  # the tasks extension (SEP-2663)
    assert name("tools/list") is None
    assert name("tools/call", name=42) is None
    assert name("tools/call", name="") == "=?base64??="  # an empty value would read as no header


def test_an_error_status_keeps_the_bodys_jsonrpc_error_but_not_a_result() -> None:
    error = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"Method not found"}}'
    assert status_reply(3, 404, "Not Found", error, "application/json")["error"]["code"] == -32601
    assert status_reply(3, 404, "Not Found", error, "application/json")["id"] == 3
    result = b'{"jsonrpc":"2.0","id":3,"result":{}}'
    assert status_reply(3, 500, "", result, "application/json")["error"]["data"]["reason"] == "http-error"
    assert status_reply(3, 500, "", error, "text/plain")["error"]["data"]["status"] == 500


def test_reconnect_delays_follow_the_servers_retry_and_back_off_to_a_bound() -> None:
    assert reconnect_delay(StreamPosition(), 0) == 1.0
    assert reconnect_delay(StreamPosition(retry=0.05), 0) == 0.05
    assert [reconnect_delay(StreamPosition(), n) for n in (1, 2, 3)] == [1.0, 2.0, 4.0]
    assert reconnect_delay(StreamPosition(), 20) == 30.0


def test_mcp_param_values_are_rendered_like_the_sdks_and_absent_ones_are_left_out() -> None:
    declared = {"Flag": ("flag",), "Count": ("count",), "Ratio": ("ratio",), "Name": ("name",), "Gone": ("gone",),
                "Deep": ("deep", "x")}  # fmt: skip
    arguments = {
        "flag": False,
        "count": 12,
        "ratio": 0.5,
        "name": " spaced ",
        "gone": None,
        "deep": "not a dict",
    }
    assert param_headers(declared, arguments) == [
        ("Mcp-Param-Flag", "false"),
        ("Mcp-Param-Count", "12"),
        ("Mcp-Param-Ratio", "0.5"),
        ("Mcp-Param-Name", "=?base64?IHNwYWNlZCA=?="),
    ]


def test_a_listing_teaches_the_annotations_of_its_valid_tools_and_forgets_those_made_invalid() -> None:
    tools = ToolHeaders()
    region = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}
    tools.learn({"tools": [{"name": "route", "inputSchema": region}]})
    assert tools.headers_for({"name": "route", "arguments": {"region": "eu"}}) == [("Mcp-Param-Region", "eu")]
    # A type that is a list is not one of string, integer or boolean: the schema is invalid (and
    # reading it does not raise), so the tool is listed again without headers.
    nullable = {
        "type": "object",
        "properties": {"region": {"type": ["string", "null"], "x-mcp-header": "Region"}},
    }
    tools.learn({"tools": [{"name": "route", "inputSchema": nullable}]})
    assert tools.headers_for({"name": "route", "arguments": {"region": "eu"}}) == []
