"""A channel kind of your own: Linux abstract Unix sockets, ``abstract:NAME``.

An abstract socket has a name but no file: nothing to clean up, nothing to chmod (so only use it
where every local user may connect). One class and one registration make ``abstract:NAME`` work
everywhere an address is accepted: ``--listen``, ``connect``, ``ServeConfig``, ``channels.connect``.

    python examples/custom_channel.py

serves the example server on ``abstract:mcp-bridge-example``, connects to it and calls a tool.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Self

import attrs
import trio

import channels
from bridge import ChildSpec, ServeConfig, open_bridge

EXAMPLE_SERVER = Path(__file__).resolve().parent.parent / "bridge" / "example_server"


@channels.register_address_kind
@attrs.frozen
class AbstractAddress(channels.Address):
    """``abstract:NAME``: a Linux abstract-namespace Unix socket."""

    scheme = "abstract"
    name: str

    @classmethod
    def parse(cls, text: str) -> Self:
        name = text.removeprefix("abstract:")
        if not name or len(name.encode()) > 107:
            raise channels.AddressError(f"{text!r}: expected abstract:NAME (1 to 107 bytes)")
        return cls(name)

    def __str__(self) -> str:
        return f"abstract:{self.name}"

    async def listen(self, options: channels.ListenOptions) -> list[channels.MessageListener]:
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            await sock.bind("\0" + self.name)
            sock.listen()
        except OSError as exc:
            sock.close()
            raise channels.ListenError(f"{self}: {exc.strerror}") from None
        return [channels.StreamListener(trio.SocketListener(sock), str(self), options, transport="abstract")]

    @asynccontextmanager
    async def connect(self, options: channels.ConnectOptions) -> AsyncIterator[channels.MessageChannel]:
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            await sock.connect("\0" + self.name)
        except OSError as exc:
            sock.close()
            raise channels.ConnectError(f"{self}: {exc.strerror}") from None
        channel = channels.StreamChannel(
            trio.SocketStream(sock),
            max_message_bytes=options.max_message_bytes,
            peer=channels.PeerInfo("abstract", self.name),
        )
        async with channel:
            yield channel


async def main() -> None:
    config = ServeConfig(
        listen=["abstract:mcp-bridge-example"],
        child=ChildSpec(argv=[sys.executable, str(EXAMPLE_SERVER)]),
        child_mode="per-connection",
    )
    async with open_bridge(config), channels.connect("abstract:mcp-bridge-example") as channel:
        await channel.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "no file needed"}},
            }
        )
        reply = await channel.receive()
        print("echo:", reply["result"]["content"][0]["text"])


if __name__ == "__main__":
    trio.run(main)
