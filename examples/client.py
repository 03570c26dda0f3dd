"""Connect to a bridge and exchange messages with its server.

    python examples/client.py unix:/tmp/example.sock

Prints the server's name, then the result of calling its ``echo`` tool. Works with any address
kind the bridge listens on (``tcp:``, ``tls:``, ``ws://``...; pass ``ConnectOptions`` for tokens
and certificates).
"""

from __future__ import annotations

import sys

import trio

import channels


async def main(address: str) -> None:
    async with channels.connect(address) as channel:
        await channel.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "example-client", "version": "1.0"},
                },
            }
        )
        initialized = await channel.receive()
        print("server:", initialized["result"]["serverInfo"]["name"])
        await channel.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await channel.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "hello"}},
            }
        )
        reply = await channel.receive()
        print("echo:", reply["result"]["content"][0]["text"])


if __name__ == "__main__":
    trio.run(main, sys.argv[1] if len(sys.argv) > 1 else "unix:/tmp/example.sock")
