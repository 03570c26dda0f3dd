"""The HTTP edges the official SDKs' clients trip on: over-limit bodies and large slow replies.

    Python SDK Client ------\\
    TypeScript SDK Client ---+--Streamable HTTP--> mcp-bridge --stdio--> sdk_server.py
    mcp-bridge connect -----/

* A body over ``--max-message`` is read to its end and answered 413 with a JSON-RPC error naming
  the limit, on a connection that stays usable: each client gets that error for that call, and
  its next call works. (Refused while the client was still sending, httpx saw ``ReadError``,
  Node's fetch ``ECONNRESET``, ``connect`` no reply.)
* A reply goes out as one ``application/json`` body unless something must go before it or it
  takes longer than the keep-alive threshold (15 s): the Python SDK caps one server-sent event at
  1 MiB, so a 2 MiB result after 1.5 s and an 8 MiB echo failed as event streams.

The TypeScript SDK runs as ``tests/ts_client.mjs`` under the Node of tests/conformance/.node.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
import trio
from commands import connect
from mcp.shared.exceptions import MCPError
from sdkhttp import (
    LEGACY_VERSION,
    NODE,
    TIMEOUT,
    TS_CLIENT,
    http_bridge,
    http_client,
    node_tools_or_skip,
    texts,
    ts_calls,
    url_of,
)

from bridge import Limits

from conftest import call, request

MIB = 1024 * 1024
LIMIT = 256 * 1024  # the bridge's --max-message in the over-limit tests
OVER = 1024 * 1024  # the text sent: the body is larger than the limit and than a socket's buffers
FOLLOW_UP = 5  # seconds a small call after a large one may take: it used to hang 33 s
MODES = ["legacy", "2026-07-28"]  # the Python SDK client's mode=: both eras
SLOW_TIMEOUT = 60  # seconds for the 8 MiB echo: encoding and validating it on both sides
CLIENT_INFO = {"name": "connect-test", "version": "1"}


def assert_names_the_limit(error: Any, limit: int = LIMIT) -> None:
    """A JSON-RPC error object (the SDK's ``ErrorData``) for an over-limit body."""
    assert error.code == -32600, error
    assert str(limit) in error.message, error
    assert error.data == {"limit": limit, "reason": "message-too-large"}, error


# -- over-limit bodies ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_an_over_limit_body_reaches_the_python_sdk_client_as_an_error_naming_the_limit_and_its_next_call_works(
    mode: str,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            http_bridge("shared", limits=Limits(max_client_message=LIMIT)) as daemon,
            http_client(url_of(daemon), mode) as sdk,
        ):
            with pytest.raises(MCPError) as raised:
                await sdk.client.call_tool("echo", {"text": "x" * OVER})
            assert_names_the_limit(raised.value.error)
            with trio.fail_after(FOLLOW_UP):
                assert texts(await sdk.client.call_tool("echo", {"text": "next"})) == ["next"]


async def test_an_over_limit_body_reaches_the_typescript_sdk_client_as_an_error_naming_the_limit_and_its_next_call_works() -> (
    None
):
    node_tools_or_skip()
    with trio.fail_after(TIMEOUT):
        async with http_bridge(limits=Limits(max_client_message=LIMIT)) as daemon:
            over, after = await ts_calls(
                url_of(daemon),
                [
                    {"tool": "echo", "fill": {"text": OVER}},
                    {"tool": "echo", "arguments": {"text": "next"}},
                ],
            )
    # The SDK throws a StreamableHTTPError: the HTTP status as its code, the body in its message.
    assert over["error"]["code"] == 413, over
    body = json.loads(over["error"]["message"].partition("Error POSTing to endpoint: ")[2])
    assert_names_the_limit(_Error(**body["error"]))
    assert after["result"]["content"] == [{"type": "text", "text": "next"}], after


class _Error:
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        self.code, self.message, self.data = code, message, data

    def __repr__(self) -> str:
        return f"Error({self.code}, {self.message!r}, {self.data!r})"


async def test_mcp_bridge_connect_http_answers_an_over_limit_request_with_the_413_error_under_its_id() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with (
            http_bridge("shared", limits=Limits(max_client_message=LIMIT)) as daemon,
            connect(url_of(daemon)) as client,
        ):
            hello = {"protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO}
            await client.send(request(0, "initialize", hello))
            assert (await client.receive())["result"]["protocolVersion"] == LEGACY_VERSION
            await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            await client.send(call("big-1", "echo", text="x" * OVER))
            reply = await client.receive()
            assert reply["id"] == "big-1", reply
            assert_names_the_limit(_Error(**reply["error"]))
            assert (await client.call_echo(2, "next"))["result"]["content"][0]["text"] == "next"
            await client.close_stdin()
            assert await client.exit_code() == 0, client.stderr_text()


# -- large replies that take a while ----------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_a_2_mib_result_after_1_5_s_reaches_the_python_sdk_client_whole_and_a_follow_up_call_works_at_once(
    mode: str,
) -> None:
    size = 2 * 1024 * 1024
    with trio.fail_after(TIMEOUT):
        async with http_bridge("shared") as daemon, http_client(url_of(daemon), mode) as sdk:
            result = await sdk.client.call_tool("blob", {"size": size, "seconds": 1.5})
            assert texts(result) == ["x" * size]
            with trio.fail_after(FOLLOW_UP):
                assert texts(await sdk.client.call_tool("echo", {"text": "next"})) == ["next"]


@pytest.mark.parametrize("mode", MODES)
async def test_an_8_mib_echo_under_max_message_16_mib_reaches_the_python_sdk_client_whole_and_a_follow_up_call_works_at_once(
    mode: str,
) -> None:
    text = "y" * (8 * MIB)
    with trio.fail_after(SLOW_TIMEOUT):
        async with (
            # The SDK server's echo result carries the text twice (content, structuredContent).
            http_bridge(
                "shared", limits=Limits(max_client_message=16 * MIB, max_child_message=32 * MIB)
            ) as daemon,
            http_client(url_of(daemon), mode) as sdk,
        ):
            assert texts(await sdk.client.call_tool("echo", {"text": text})) == [text]
            with trio.fail_after(FOLLOW_UP):
                assert texts(await sdk.client.call_tool("echo", {"text": "next"})) == ["next"]


def test_the_typescript_sdk_test_client_is_a_module_node_can_load() -> None:
    node_tools_or_skip()
    done = subprocess.run([str(NODE), str(TS_CLIENT)], capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 2 and "usage: ts_client.mjs" in done.stderr, done  # it imported the SDK
