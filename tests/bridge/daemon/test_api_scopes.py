"""Per-tool scopes through the embedding API, in every child mode, over a Unix socket and HTTP.

Neither listener here authenticates with OAuth, so no caller holds a scope: the guarded tool is
hidden from every ``tools/list`` and every call of it is refused (secure by default). Callers
with scopes are tested on the relay and the shared child themselves (tests/bridge/relay,
tests/bridge/shared).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge import ChildSpec, ServeConfig, open_bridge

from conftest import LineClient, example_server, request, result_text
from rawhttp import post

TIMEOUT = 20
MODERN = "2026-07-28"


def modern(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    return request(request_id, method, {**(params or {}), "_meta": meta})


def modern_headers(message: dict[str, Any]) -> list[tuple[str, str]]:
    headers = [("mcp-protocol-version", MODERN), ("mcp-method", message["method"])]
    name = message["params"].get("name")
    return [*headers, ("mcp-name", name)] if name is not None else headers


@pytest.mark.parametrize("child_mode", ["per-connection", "shared", "auto"])
async def test_without_an_oauth_token_a_guarded_tool_is_hidden_and_refused_on_every_listener(
    sock_dir: Path, child_mode: str
) -> None:
    config = ServeConfig(
        listen=[f"unix:{sock_dir}/s.sock", "http://127.0.0.1:0/mcp"],
        child=ChildSpec(argv=example_server()),
        child_mode=child_mode,
        tool_scopes={"spawn_*": ["mcp:admin"]},
    )
    assert config.tool_scopes.scopes_supported == ("mcp:admin",)
    with trio.fail_after(TIMEOUT):
        async with open_bridge(config) as bridge:
            unix, http = bridge.addresses
            client = await LineClient.open(unix)
            await client.send(request(1, "tools/list"))
            names = [tool["name"] for tool in (await client.receive())["result"]["tools"]]
            assert "echo" in names and "spawn_grandchild" not in names
            refusal = await client.call(2, "spawn_grandchild")
            assert refusal["error"]["code"] == -31005
            assert refusal["error"]["data"]["scope"] == "mcp:admin"
            seen = json.loads(result_text(await client.call(3, "stats")))
            assert seen["calls"] == {"stats": 1}  # the child never got the refused call

            port = int(http.rsplit(":", 1)[1].split("/")[0])
            listing = modern(4, "tools/list")
            listed = (await post(port, listing, modern_headers(listing))).messages()[0]
            assert "spawn_grandchild" not in [tool["name"] for tool in listed["result"]["tools"]]
            calling = modern(5, "tools/call", {"name": "spawn_grandchild", "arguments": {}})
            response = await post(port, calling, modern_headers(calling))
            assert response.status == 200  # a JSON-RPC error of a tool call, as the SDKs send them
            assert response.messages()[0]["error"]["data"]["reason"] == "insufficient-scope"
