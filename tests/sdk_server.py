"""A stdio MCP server built with the official ``mcp`` SDK (2.x), for the end-to-end tests.

It is an independent implementation of the server side: the tests put it behind the bridge
and check that an SDK client reaches it unchanged. ``MCPServer.run("stdio")`` serves both
protocol eras on one stdio connection (the SDK's ``serve_dual_era_loop``): a client that opens
with ``initialize`` gets the legacy handshake era, a client whose first request carries the
2026-07-28 ``_meta`` envelope gets the modern stateless era.

Tools: ``echo`` (``text`` → the same text) and ``add`` (``a`` + ``b``).

Run as a script (``python tests/sdk_server.py``); it needs the ``mcp`` package, not the bridge.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer(name="mcp-bridge-sdk-test-server", version="1.0.0")


@server.tool(description="Return the given text unchanged.")
def echo(text: str) -> str:
    return text


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


if __name__ == "__main__":
    server.run("stdio")
