"""Per-tool scopes end to end: real OAuth tokens, the bridge process, two clients on ONE shared child.

    SDK client, token scope "mcp:tools"           --\
                                                     >-- mcp-bridge --child shared --> example_server
    SDK client, token scope "mcp:tools mcp:admin" --/    --oauth-issuer (oidc-provider)
                                                         --oauth-scope mcp:tools
                                                         --tool-scope add=mcp:admin

The tokens are issued by oidc-provider (:mod:`oidc`) for the bridge's own URI; the bridge is
``python -m bridge`` with its command-line options; the clients are the official SDK's (legacy
sessions, and the 2026-07-28 era's one POST per request) or, over WebSocket, for which the SDK has
no client, trio-websocket speaking JSON-RPC. The guarded tool is the example server's ``add``; its
``stats`` tool counts the calls the child received by name, so a test can tell that a refused call
never reached it, and that both clients were served by the same process.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
import trio
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import TextContent
from oidc import AuthorizationServer, authorization_server
from trio_websocket import WebSocketConnection, open_websocket_url

from conftest import REPO, BridgeProcess, bridge_process
from rawhttp import RawHttp, post

TIMEOUT = 60  # the provider, the bridge and its child start; a handful of calls per client
EXAMPLE = str(REPO / "bridge" / "example_server")
SCOPE = "mcp:tools"  # every request needs it (--oauth-scope)
ADMIN = "mcp:admin"  # the guarded tool needs it too (--tool-scope)
GUARDED = "add"
TOOLS = {"add", "ask_client", "blob", "echo", "notify", "progress", "sleep", "spawn_grandchild", "stats"}
LEGACY_VERSION = "2025-11-25"
INSUFFICIENT_SCOPE = -31005
SESSION_NOT_FOUND = -32001  # the body of the 404 for an unknown session (channels/_http/server/endpoint.py)


@asynccontextmanager
async def scoped_bridge(issuer: AuthorizationServer, *listen: str) -> AsyncIterator[BridgeProcess]:
    """The bridge process on ``listen`` with OAuth, ``add`` guarded by mcp:admin, one shared child."""
    argv = [arg for address in listen for arg in ("--listen", address)]
    argv += ["--child", "shared", "--oauth-issuer", issuer.issuer, "--oauth-scope", SCOPE]
    argv += ["--tool-scope", f"{GUARDED}={ADMIN}", "--", sys.executable, EXAMPLE]
    async with bridge_process(*argv, listeners=len(listen)) as bridge:
        yield bridge


@asynccontextmanager
async def sdk_client(url: str, token: str, mode: str) -> AsyncIterator[Client]:
    """An official SDK client at ``url`` presenting ``token`` on every request."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


def text_of(result: Any) -> str:
    assert not result.is_error, result
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


async def calls_seen_by_the_child(client: Client) -> dict[str, int]:
    return json.loads(text_of(await client.call_tool("stats", {})))["calls"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_two_sdk_clients_with_different_scopes_on_one_shared_child_see_and_call_only_what_their_tokens_allow(
    mode: str,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            authorization_server() as issuer,
            scoped_bridge(issuer, "http://127.0.0.1:0/mcp") as bridge,
        ):
            url = bridge.addresses[0]
            plain_token = await issuer.token(url, [SCOPE])
            admin_token = await issuer.token(url, [SCOPE, ADMIN])
            async with (
                sdk_client(url, plain_token, mode) as plain,
                sdk_client(url, admin_token, mode) as admin,
            ):
                listed: dict[str, set[str]] = {}
                cache_scopes: set[str | None] = set()

                async def list_tools(name: str, client: Client) -> None:
                    result = await client.list_tools()
                    listed[name] = {tool.name for tool in result.tools}
                    cache_scopes.add(getattr(result, "cache_scope", None))

                async with trio.open_nursery() as nursery:  # both at once, through the one child
                    nursery.start_soon(list_tools, "plain", plain)
                    nursery.start_soon(list_tools, "admin", admin)
                assert listed == {"plain": TOOLS - {GUARDED}, "admin": TOOLS}
                if mode != "legacy":  # the child says "public"; the list depends on the token
                    assert cache_scopes == {"private"}

                with pytest.raises(MCPError) as refused:
                    await plain.call_tool(GUARDED, {"a": 2, "b": 3})
                assert refused.value.code == INSUFFICIENT_SCOPE
                assert refused.value.error.data["scope"] == ADMIN
                assert refused.value.error.data["tool"] == GUARDED
                assert GUARDED not in await calls_seen_by_the_child(admin)  # never reached the child

                assert text_of(await admin.call_tool(GUARDED, {"a": 2, "b": 3})) == "5"
                # The same process counted the privileged call and both clients' stats calls.
                assert await calls_seen_by_the_child(plain) == {"stats": 2, GUARDED: 1}
    log = bridge.log()
    assert f"tools/call of '{GUARDED}' refused: needs scope {ADMIN}" in log
    assert "Traceback" not in log


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


async def test_a_legacy_session_answers_a_token_with_other_scopes_with_404_and_a_refreshed_token_goes_on() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with (
            authorization_server() as issuer,
            scoped_bridge(issuer, "http://127.0.0.1:0/mcp") as bridge,
        ):
            url = bridge.addresses[0]
            port = port_of(url)
            opening = await issuer.token(url, [SCOPE])
            refreshed = await issuer.token(url, [SCOPE])  # another token, the same principal
            stepped_up = await issuer.token(url, [SCOPE, ADMIN])  # the same client, more scopes
            assert len({opening, refreshed, stepped_up}) == 3

            def bearer(token: str, session: str | None = None) -> list[tuple[str, str]]:
                headers = [("authorization", f"Bearer {token}")]
                return [*headers, ("mcp-session-id", session)] if session else headers

            hello = {
                "protocolVersion": LEGACY_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            }
            opened = await post(
                port, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}, bearer(opening)
            )
            assert opened.status == 200, opened
            session = opened.header("mcp-session-id")
            assert session
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await post(port, initialized, bearer(opening, session))).status == 202

            calling = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": GUARDED, "arguments": {"a": 2, "b": 3}},
            }
            other = await post(port, calling, bearer(stepped_up, session))
            assert other.status == 404, other  # as for an unknown session: the id is no key
            assert other.json()["error"]["data"]["reason"] == "unknown-session" and other.json()["id"] == 2

            listing = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}
            same = await post(port, listing, bearer(refreshed, session))
            assert same.status == 200, same  # the session lives on, for the principal that opened it
            assert {tool["name"] for tool in same.messages()[0]["result"]["tools"]} == TOOLS - {GUARDED}

            # What a client does with the token of more scopes: a new session (initialize again).
            async with sdk_client(url, stepped_up, "legacy") as admin:
                assert text_of(await admin.call_tool(GUARDED, {"a": 2, "b": 3})) == "5"
    log = bridge.log()
    # The operator sees why the client lost its session: one line, the session's id cut short.
    assert log.count(f"session {session[:8]} refused: it was opened with another credential") == 1
    assert session not in log and "Traceback" not in log


async def test_an_sdk_client_that_steps_up_its_token_mid_session_gets_session_not_found_and_a_modern_one_does_not() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with (
            authorization_server() as issuer,
            scoped_bridge(issuer, "http://127.0.0.1:0/mcp") as bridge,
        ):
            url = bridge.addresses[0]
            plain_token = await issuer.token(url, [SCOPE])
            admin_token = await issuer.token(url, [SCOPE, ADMIN])
            for mode in ("legacy", "2026-07-28"):
                async with (
                    httpx2.AsyncClient(headers={"Authorization": f"Bearer {plain_token}"}) as http,
                    Client(streamable_http_client(url, http_client=http), mode=mode) as client,
                ):
                    assert GUARDED not in {tool.name for tool in (await client.list_tools()).tools}
                    http.headers["Authorization"] = f"Bearer {admin_token}"  # the step-up
                    if mode == "legacy":  # the session belongs to the first token's principal
                        with pytest.raises(MCPError) as lost:
                            await client.call_tool(GUARDED, {"a": 2, "b": 3})
                        assert lost.value.code == SESSION_NOT_FOUND
                        assert lost.value.error.data["reason"] == "unknown-session"
                    else:  # no session: each request is checked with its own token
                        assert text_of(await client.call_tool(GUARDED, {"a": 2, "b": 3})) == "5"
    assert "Traceback" not in bridge.log()


class WsClient:
    """JSON-RPC over a WebSocket connection (the ``mcp`` subprotocol), one request at a time."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws
        self.next_id = 0

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        await self.ws.send_message(
            json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        )
        while True:  # notifications may come first
            message = json.loads(await self.ws.get_message())
            if message.get("id") == self.next_id:
                return message  # type: ignore[no-any-return]

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return await self.request("tools/call", {"name": tool, "arguments": arguments})


@asynccontextmanager
async def ws_client(url: str, token: str) -> AsyncIterator[WsClient]:
    """An initialized legacy MCP client over WebSocket, presenting ``token`` on the upgrade."""
    headers = [(b"Authorization", f"Bearer {token}".encode())]
    async with open_websocket_url(url, subprotocols=["mcp"], extra_headers=headers) as ws:
        client = WsClient(ws)
        hello = {
            "protocolVersion": LEGACY_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "ws", "version": "1"},
        }
        assert "result" in await client.request("initialize", hello)
        await ws.send_message(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        yield client


async def test_websocket_clients_with_different_scopes_on_one_shared_child_see_and_call_only_what_their_tokens_allow() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as issuer, scoped_bridge(issuer, "ws://127.0.0.1:0/mcp") as bridge:
            url = bridge.addresses[0]
            plain_token = await issuer.token(url, [SCOPE])
            admin_token = await issuer.token(url, [SCOPE, ADMIN])
            async with ws_client(url, plain_token) as plain, ws_client(url, admin_token) as admin:
                for client, expected in ((plain, TOOLS - {GUARDED}), (admin, TOOLS)):
                    reply = await client.request("tools/list", {})
                    assert {tool["name"] for tool in reply["result"]["tools"]} == expected

                refused = await plain.call(GUARDED, a=2, b=3)
                assert refused["error"]["code"] == INSUFFICIENT_SCOPE
                assert refused["error"]["data"]["scope"] == ADMIN

                def calls(reply: dict[str, Any]) -> dict[str, int]:
                    return json.loads(reply["result"]["content"][0]["text"])["calls"]  # type: ignore[no-any-return]

                assert GUARDED not in calls(await admin.call("stats"))
                assert (await admin.call(GUARDED, a=2, b=3))["result"]["content"][0]["text"] == "5"
                assert calls(await plain.call("stats")) == {"stats": 2, GUARDED: 1}
    assert "Traceback" not in bridge.log()


async def test_the_protected_resource_metadata_lists_the_required_scope_and_those_of_the_tool_rules() -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            authorization_server() as issuer,
            scoped_bridge(issuer, "http://127.0.0.1:0/mcp") as bridge,
        ):
            url = bridge.addresses[0]
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            http = await RawHttp.open(port)
            try:
                response = await http.request("GET", "/.well-known/oauth-protected-resource/mcp")
            finally:
                await http.aclose()
    assert response.status == 200, response
    document = response.json()
    assert document["resource"] == url and document["authorization_servers"] == [issuer.issuer]
    assert sorted(document["scopes_supported"]) == [ADMIN, SCOPE]
