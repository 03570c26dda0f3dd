"""Three different servers on one shared listener, each used by both official SDKs' clients at once.

    Python SDK + TypeScript SDK --/servers/example/mcp---\\                     /-- bridge/example_server
    Python SDK + TypeScript SDK --/servers/modern/mcp----- mcp-bridge --config -- tests/sdk_server.py
    Python SDK + TypeScript SDK --/servers/everything/mcp/  (one port)          \\-- server-everything (Node)

``python -m bridge --config FILE`` with one ``[listeners.public]`` and three servers mounted on it,
every one in the default child mode (``auto``): the bundled example server and the Python SDK's
dual-era server are found to be of the modern era (a ``server/discover`` probe answered; one
shared child each), ``@modelcontextprotocol/server-everything`` (the TypeScript SDK's reference
server, installed by tests/conformance/install.sh) of the legacy era (a child per session). The
Python SDK's client speaks 2026-07-28 to the modern servers and 2025-11-25 to the legacy one; the
TypeScript SDK's client (tests/ts_client.mjs) speaks 2025-11-25 to all three. A fourth server, the
example server again, is mounted under the longest name a mount accepts (64 characters).

Then what must stay apart on a shared port: a session id of one server sent to another (404), and
targets that try to escape or confuse routing, answered by the real process with JSON statuses
whose bodies name no server.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx2
import trio
from mcp.client.streamable_http import streamable_http_client
from sdkhttp import LEGACY_VERSION, NODE, NODE_TOOLS, TESTS, node_tools_or_skip, sdk_client, texts, ts_calls

from conftest import EXAMPLE_SERVER, bridge_process
from rawhttp import POST_HEADERS, RawHttp

TIMEOUT = 120  # a bridge process, three kinds of children (one of them Node), six clients at once
CALLS = 5  # calls each client makes, one after the other, while the five others make theirs
MODERN_VERSION = "2026-07-28"
EVERYTHING = NODE_TOOLS / "everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
LONG_NAME = "n" * 64  # the longest server name a mount accepts: [A-Za-z0-9][A-Za-z0-9._-]{0,63}
SERVERS = {
    "example": [sys.executable, str(EXAMPLE_SERVER)],
    "modern": [sys.executable, str(TESTS / "sdk_server.py")],
    "everything": [str(NODE), str(EVERYTHING), "stdio"],
    LONG_NAME: [sys.executable, str(EXAMPLE_SERVER)],
}
ERAS = {"example": "modern", "modern": "modern", "everything": "legacy", LONG_NAME: "modern"}


def write_config(path: Path) -> None:
    """One shared listener on a free loopback port, every server of SERVERS mounted on it."""
    text = '[listeners.public]\nkind = "http"\naddress = "127.0.0.1:0"\n'
    for name, command in SERVERS.items():
        text += f'[servers.{name}]\ncommand = {json.dumps(command)}\n[[servers.{name}.listeners]]\nshared = "public"\n'
    path.write_text(text)


def port_of(addresses: list[str]) -> int:
    """The shared listener's port, from the mounts' ``listening on http://127.0.0.1:PORT/...``."""
    return int(addresses[0].split(":")[2].split("/")[0])


def echo_call(server: str, text: str) -> tuple[str, dict[str, Any], str]:
    """The echo tool of ``server``: its name, its arguments, the text it answers."""
    if server == "everything":
        return "echo", {"message": text}, f"Echo: {text}"
    return "echo", {"text": text}, text


def initialize(request_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "many-servers-sdks-test", "version": "1"},
        },
    }


async def python_client(url: str, server: str, results: dict[tuple[str, str], list[str]]) -> None:
    """The Python SDK's client in the server's era: its tools listed, then CALLS echoes."""
    mode = MODERN_VERSION if ERAS[server] == "modern" else "legacy"
    async with sdk_client(streamable_http_client(url), mode) as sdk:
        assert sdk.client.protocol_version == (MODERN_VERSION if mode == MODERN_VERSION else LEGACY_VERSION)
        assert "echo" in [tool.name for tool in (await sdk.client.list_tools()).tools]
        answers = []
        for i in range(CALLS):
            tool, arguments, _ = echo_call(server, f"python {server} {i}")
            answers += texts(await sdk.client.call_tool(tool, arguments))
        results[server, "python"] = answers


async def typescript_client(url: str, server: str, results: dict[tuple[str, str], list[str]]) -> None:
    """The TypeScript SDK's client (2025-11-25): CALLS echoes over one session."""
    calls = []
    for i in range(CALLS):
        tool, arguments, _ = echo_call(server, f"typescript {server} {i}")
        calls.append({"tool": tool, "arguments": arguments})
    records = await ts_calls(url, calls)
    assert all("result" in record for record in records), records
    results[server, "typescript"] = [
        block["text"]
        for record in records
        for block in record["result"]["content"]
        if block["type"] == "text"
    ]


async def test_one_shared_listener_serves_three_kinds_of_server_to_the_python_and_typescript_sdk_clients_at_once(
    tmp_path: Path,
) -> None:
    node_tools_or_skip(EVERYTHING)
    config = tmp_path / "servers.toml"
    write_config(config)
    with trio.fail_after(TIMEOUT):
        async with bridge_process("--config", str(config), listeners=len(SERVERS)) as bridge:
            port = port_of(bridge.addresses)
            async with httpx2.AsyncClient() as http:
                listing = (await http.get(f"http://127.0.0.1:{port}/servers")).json()["servers"]
            assert {entry["name"]: (entry["era"], entry["state"]) for entry in listing} == {
                name: (era, "serving") for name, era in ERAS.items()
            }
            results: dict[tuple[str, str], list[str]] = {}
            async with trio.open_nursery() as nursery:
                for server in ("example", "modern", "everything"):
                    url = f"http://127.0.0.1:{port}/servers/{server}/mcp"
                    nursery.start_soon(python_client, url, server, results)
                    nursery.start_soon(typescript_client, url, server, results)
    assert results == {
        (server, sdk): [echo_call(server, f"{sdk} {server} {i}")[2] for i in range(CALLS)]
        for server in ("example", "modern", "everything")
        for sdk in ("python", "typescript")
    }
    assert "Traceback" not in bridge.log(), bridge.log()


async def test_a_session_id_of_one_server_is_unknown_to_the_others_on_the_same_port(tmp_path: Path) -> None:
    node_tools_or_skip(EVERYTHING)
    config = tmp_path / "servers.toml"
    write_config(config)
    with trio.fail_after(TIMEOUT):
        async with bridge_process("--config", str(config), listeners=len(SERVERS)) as bridge:
            port = port_of(bridge.addresses)
            client = await RawHttp.open(port)
            try:
                sessions = {}
                for server in ("example", "modern", "everything"):
                    opened = await client.request(
                        "POST", f"/servers/{server}/mcp", POST_HEADERS, initialize()
                    )
                    assert opened.status == 200, opened
                    sessions[server] = opened.header("mcp-session-id")
                    assert sessions[server]
                for owner, session in sessions.items():
                    for server in sessions:
                        headers = [
                            *POST_HEADERS,
                            ("mcp-session-id", session),
                            ("mcp-protocol-version", LEGACY_VERSION),
                        ]
                        listed = await client.request(
                            "POST",
                            f"/servers/{server}/mcp",
                            headers,
                            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                        )
                        if server == owner:
                            assert listed.status == 200, listed
                            assert "echo" in [
                                tool["name"] for tool in listed.messages()[0]["result"]["tools"]
                            ]
                        else:
                            assert listed.status == 404, (owner, server, listed)
                            assert listed.header("content-type") == "application/json"
                            assert owner not in listed.body.decode()
            finally:
                await client.aclose()


LONG_TARGET_BYTES = 4096  # over the 2 KiB bound on a request target (HttpHost's)
CONFUSING = [  # (target, status): every one answered with a JSON body that names no server
    ("/servers/../x", 400),
    ("/servers/../servers/example/mcp", 400),
    ("/servers/./example/mcp", 400),
    ("/servers/example/mcp/..", 400),
    ("/servers/example%2Fmcp", 400),
    ("/servers%2fexample/mcp", 400),
    ("/servers/%2E%2E/example/mcp", 400),
    ("/servers/example/mcp/", 404),
    ("/servers/example/", 404),
    ("/Servers/example/mcp", 404),
    ("/servers/Example/mcp", 404),
    ("/servers/example/MCP", 404),
    ("/servers/everything-else/mcp", 404),
    (f"/servers/{LONG_NAME}n/mcp", 404),  # one character over the longest name
    ("/servers/" + "n" * LONG_TARGET_BYTES + "/mcp", 414),
]


async def answer(port: int, target: str) -> tuple[int, str | None, str]:
    """An initialize POSTed to ``target`` on a connection of its own: status, type and body."""
    client = await RawHttp.open(port)
    try:
        response = await client.request("POST", target, POST_HEADERS, initialize())
    finally:
        await client.aclose()
    return response.status, response.header("content-type"), response.body.decode()


async def test_targets_that_try_to_escape_or_confuse_routing_get_json_statuses_that_name_no_server(
    tmp_path: Path,
) -> None:
    config = tmp_path / "servers.toml"
    config.write_text(
        '[listeners.public]\nkind = "http"\naddress = "127.0.0.1:0"\n'
        + "".join(
            f'[servers.{name}]\ncommand = {json.dumps(SERVERS[name])}\nchild = "shared"\n'
            f'[[servers.{name}.listeners]]\nshared = "public"\n'
            for name in ("example", LONG_NAME)
        )
    )
    with trio.fail_after(TIMEOUT):
        async with bridge_process("--config", str(config), listeners=2) as bridge:
            port = port_of(bridge.addresses)
            answers = {target: await answer(port, target) for target, _ in CONFUSING}
            served = {name: await answer(port, f"/servers/{name}/mcp") for name in ("example", LONG_NAME)}
    wrong = {
        target[:80]: (status, kind, body[:200])
        for (target, expected), (status, kind, body) in zip(CONFUSING, answers.values(), strict=True)
        if status != expected
        or kind != "application/json"
        or json.loads(body)["error"]["code"] != -32000
        or "example" in body
        or "nnnnnnnn" in body
    }
    assert not wrong, wrong
    assert {name: status for name, (status, _, _) in served.items()} == {"example": 200, LONG_NAME: 200}
    assert "Traceback" not in bridge.log(), bridge.log()
