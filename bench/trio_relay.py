"""The least a trio relay can do: bytes from a Unix socket to a child's stdin and back.

No framing, no JSON, no bookkeeping, no limits: it is not a bridge, it is the benchmark's reference
for what trio's own scheduling costs per hop on this machine, so that the bridge's figures can be
read as "trio's floor plus the bridge's work". Usage (the benchmark runs it)::

    python bench/trio_relay.py PATH -- COMMAND [ARGS...]
"""

from __future__ import annotations

import subprocess
import sys

import trio

RECEIVE_SIZE = 65536  # as the bridge reads


async def relay(source: trio.abc.ReceiveStream, sink: trio.abc.SendStream) -> None:
    try:
        while data := await source.receive_some(RECEIVE_SIZE):
            await sink.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    await sink.aclose()  # EOF onwards: the child exits on stdin EOF, the client sees the end


async def main(path: str, command: list[str]) -> None:
    async def handle(stream: trio.SocketStream) -> None:
        process = await trio.lowlevel.open_process(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(relay, stream, process.stdin)
                nursery.start_soon(relay, process.stdout, stream)
        finally:
            with trio.CancelScope(shield=True):
                process.kill()
                await process.wait()

    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await sock.bind(path)
    sock.listen(128)
    print(f"listening on {path}", file=sys.stderr, flush=True)
    await trio.serve_listeners(handle, [trio.SocketListener(sock)])


if __name__ == "__main__":
    split = sys.argv.index("--")
    trio.run(main, sys.argv[1], sys.argv[split + 1 :])
