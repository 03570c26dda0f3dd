"""Serve an MCP server over a Unix socket from your own trio program.

    python examples/serve_unix.py /tmp/example.sock

The bridge runs for as long as the ``async with`` block. Leaving the block, or cancelling it, stops
the bridge gracefully: requests in flight finish, the child is stopped in MCP order. Here the block
ends on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import trio

from bridge import ChildSpec, ServeConfig, open_bridge

EXAMPLE_SERVER = Path(__file__).resolve().parent.parent / "bridge" / "example_server"


async def main(socket_path: str) -> None:
    config = ServeConfig(
        listen=[f"unix:{socket_path}"],
        child=ChildSpec(argv=[sys.executable, str(EXAMPLE_SERVER)], name="example"),
        child_mode="per-connection",
    )
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_bridge(config) as bridge:
            print("serving on", *bridge.addresses, flush=True)
            async for _ in signals:  # your program's own work would go here
                break


if __name__ == "__main__":
    trio.run(main, sys.argv[1] if len(sys.argv) > 1 else "/tmp/example.sock")
