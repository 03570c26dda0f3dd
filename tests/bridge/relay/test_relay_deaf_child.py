"""Requests that time out while their child reads nothing are still answered, each exactly once.

Real child process (a small ``python -c`` server that reads one request and then nothing more)
and a real Unix socket pair. The client fills the child's stdin pipe, so that every write to the
child blocks, as it does with a deaf or wedged server. The request timeout is passed with trio's
MockClock (flowing at the real rate, jumped once the pipe is full), so that it comes exactly then.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any

import trio
import trio.testing

from bridge import ChildSpec, Limits, Relay, open_child
from channels import StreamChannel

from conftest import poll, request

TIMEOUT = 20

# The request timeout, in virtual seconds: never reached while the test sets up (the clock flows
# at the real rate); the clock is jumped past it once the child's stdin is full.
REQUEST_TIMEOUT = 3600
# What the client writes after its request: more than the child's stdin pipe (64 KiB on Linux),
# the child's own read buffer and the socket buffers between the client and the relay (about
# 200 KiB each way on Linux) can hold, so that the relay's writes to the child block; and no more
# than the relay reads after the end (1 MiB, bridge/_relay/unread.py), so that the client is not
# reset while it still writes.
FILLER_MESSAGES = 16
FILLER_BYTES = 64 * 1024
READ_SIZE = 65536
# Requests that time out together: the second must not wait for the first one's cancellation.
REQUESTS = 2

# Reads one line, says so, then reads nothing more.
DEAF_CHILD = r"""
import sys, time
sys.stdin.buffer.readline()
sys.stdout.write('{"jsonrpc": "2.0", "method": "notifications/message", '
                 '"params": {"level": "info", "data": "deaf from now on"}}\n')
sys.stdout.flush()
time.sleep(600)
"""


async def read_to_end(stream: trio.SocketStream) -> list[dict[str, Any]]:
    data = bytearray()
    while chunk := await stream.receive_some(READ_SIZE):
        data += chunk
    return [json.loads(line) for line in bytes(data).splitlines()]


async def test_requests_that_time_out_while_their_child_reads_nothing_get_their_timeout_error_once_each(
    mock_clock: trio.testing.MockClock,
) -> None:
    mock_clock.rate = 1
    limits = Limits(request_timeout=REQUEST_TIMEOUT)
    spec = ChildSpec(argv=(sys.executable, "-c", DEAF_CHILD), name="deaf")
    client_socket, bridge_socket = trio.socket.socketpair()
    client = trio.SocketStream(client_socket)
    channel = StreamChannel(trio.SocketStream(bridge_socket))
    filler = {
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "info", "data": "x" * FILLER_BYTES},
    }
    async with open_child(spec, limits) as child, trio.open_nursery() as nursery:
        relay = Relay(channel, child, limits)

        async def serve() -> None:  # what the daemon does: relay, then close the client
            await relay.run()
            await channel.aclose()

        with trio.fail_after(TIMEOUT):
            nursery.start_soon(serve)
            payload = [request(n, "tools/call", {"name": "slow"}) for n in range(REQUESTS)]
            await client.send_all(b"".join(json.dumps(message).encode() + b"\n" for message in payload))
            first = await client.receive_some(READ_SIZE)
            assert b"deaf from now on" in first
            nursery.start_soon(
                client.send_all, b"".join(json.dumps(filler).encode() + b"\n" for _ in range(FILLER_MESSAGES))
            )
            await trio.testing.wait_all_tasks_blocked()  # the child's stdin is full
        mock_clock.jump(REQUEST_TIMEOUT)  # outside fail_after, whose deadline would pass too
        with trio.fail_after(TIMEOUT):
            await poll(lambda: len(relay._ledger._deadlines) < REQUESTS)  # the timeout has fired
            await trio.testing.wait_all_tasks_blocked()
            relay.stopping.set()  # the connection ends while the child still reads nothing
            replies = await read_to_end(client)
            await client.aclose()
    counts = Counter(reply.get("id") for reply in replies)
    assert counts == dict.fromkeys(range(REQUESTS), 1), f"replies: {replies}"
    for reply in replies:  # each at its timeout, not held up by the cancellation the child never reads
        assert reply["error"]["code"] == -32001
        assert reply["error"]["data"]["reason"] == "request-timeout"
