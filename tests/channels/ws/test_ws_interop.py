"""Interoperability: an independent WebSocket implementation (trio-websocket, on wsproto) talks
MCP through the bridge's ``ws://`` and ``wss://`` listeners."""

from __future__ import annotations

import json
import ssl

import trio
from trio_websocket import open_websocket_url

from conftest import TlsFiles, call, example_server, request, result_text, running_bridge

TIMEOUT = 20


async def _session(url: str, ssl_context: ssl.SSLContext | None = None) -> list[dict]:
    async with open_websocket_url(url, ssl_context=ssl_context, subprotocols=["mcp"]) as ws:
        assert ws.subprotocol == "mcp"
        await ws.send_message(
            json.dumps(
                request(
                    "init:1",
                    "initialize",
                    {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "interop", "version": "1"},
                    },
                )
            )
        )
        replies = [json.loads(await ws.get_message())]
        await ws.send_message(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        await ws.send_message(json.dumps(call("abc:1", "echo", text="x" * 100_000)))
        await ws.send_message(json.dumps(call(42, "echo", text="small")))
        replies += [json.loads(await ws.get_message()) for _ in range(2)]
        return replies


async def test_an_independent_websocket_client_runs_an_mcp_session_with_ids_intact() -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), ["ws://127.0.0.1:0/mcp"]) as daemon:
            replies = await _session(daemon.addresses[0])
    assert [reply["id"] for reply in replies] == ["init:1", "abc:1", 42]
    assert result_text(replies[1]) == "x" * 100_000 and result_text(replies[2]) == "small"


async def test_an_independent_websocket_client_runs_an_mcp_session_over_tls(tls_files: TlsFiles) -> None:
    context = ssl.create_default_context(cafile=tls_files.ca)
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(), ["wss://127.0.0.1:0/mcp"], listen_options=tls_files.listen_options()
        ) as daemon:
            replies = await _session(daemon.addresses[0], context)
    assert [reply["id"] for reply in replies] == ["init:1", "abc:1", 42]
