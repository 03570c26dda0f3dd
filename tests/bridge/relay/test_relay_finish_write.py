"""A write to the client in progress is finished: when the child exits, and before any other write.

Real child process and a real TCP socket on loopback, with small socket buffers. The child answers
the first request with a reply far larger than the buffers between the bridge and the client, then
reads nothing; the client reads nothing until the child has been killed and the relay has ended
the connection, so the relay is provably in the middle of writing that reply when the child dies.
Cutting that write would leave part of a line on the wire, after which nothing may be written:
the requests in flight would go unanswered and the client would see a clean end. The relay must
let the write finish (within the send timeout), then answer every request still in flight.

The same child and socket show that what the bridge has to write meanwhile (a refusal, a timeout's
error) waits for the write in progress, and is neither dropped nor doubled with the child's reply;
and that a request cancelled while its reply is being written, whose id the client then reuses,
does not take the new request's reply with it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from bridge import ChildProcess, ChildSpec, Limits, Relay, open_child
from channels import JSONObject, StreamChannel

from conftest import poll, request

TIMEOUT = 20

# The size of the first request's reply: far more than the socket buffers between the bridge and
# the client can hold (SOCKET_BUFFER on each side, which Linux doubles: 16 KiB in all, plus what
# loopback has in flight), so its write cannot complete while the client reads nothing.
REPLY_BYTES = 1024 * 1024
SOCKET_BUFFER = 4096
# Requests after the first, which the child never reads: in flight when it dies.
IN_FLIGHT = 20
READ_SIZE = 65536

# A child that answers the first request with a large result and then reads nothing more.
BIG_REPLY_CHILD = r"""
import json, sys, time
first = json.loads(sys.stdin.buffer.readline())
reply = {"jsonrpc": "2.0", "id": first["id"], "result": {"text": "x" * int(sys.argv[1])}}
sys.stdout.buffer.write(json.dumps(reply).encode() + b"\n")
sys.stdout.buffer.flush()
time.sleep(600)
"""

# A child that answers the first request with a large result, then every later request with a
# small one naming its method (notifications get nothing).
BIG_THEN_SMALL_CHILD = r"""
import json, sys
first = json.loads(sys.stdin.buffer.readline())
reply = {"jsonrpc": "2.0", "id": first["id"], "result": {"text": "x" * int(sys.argv[1])}}
sys.stdout.buffer.write(json.dumps(reply).encode() + b"\n")
sys.stdout.buffer.flush()
for line in sys.stdin.buffer:
    message = json.loads(line)
    if "id" in message:
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": {"method": message["method"]}}
        sys.stdout.buffer.write(json.dumps(reply).encode() + b"\n")
        sys.stdout.buffer.flush()
"""


class WatchedChannel(StreamChannel):
    """The bridge's end of the client connection; says when the relay starts writing the big reply."""

    def __init__(self, stream: trio.SocketStream) -> None:
        super().__init__(stream)
        self.big_reply_writing = trio.Event()

    def _watch(self, messages: Sequence[JSONObject]) -> None:
        if any(message.get("id") == 0 and "result" in message for message in messages):
            self.big_reply_writing.set()

    async def send_many(self, messages: Sequence[JSONObject]) -> None:
        self._watch(messages)
        await super().send_many(messages)

    async def send_lines(self, messages: Sequence[JSONObject], lines: Sequence[bytes | None]) -> None:
        self._watch(messages)
        await super().send_lines(messages, lines)


async def connected_pair() -> tuple[trio.SocketStream, trio.SocketStream]:
    """A client socket and the bridge's end of it, both with small buffers."""
    (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
    async with listener:
        port = listener.socket.getsockname()[1]
        sock = trio.socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)
        await sock.connect(("127.0.0.1", port))
        server = await listener.accept()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER)
    return trio.SocketStream(sock), server


def encode(*messages: JSONObject) -> bytes:
    """The messages as the client writes them: a line each."""
    return b"".join(json.dumps(message).encode() + b"\n" for message in messages)


@asynccontextmanager
async def relaying(
    child: str, limits: Limits
) -> AsyncIterator[tuple[trio.SocketStream, WatchedChannel, Relay, ChildProcess]]:
    """A relay between a client socket and a child running ``child`` (given REPLY_BYTES), as the
    daemon runs one: the relay, then closing the client's channel. Yields the client's end (the
    caller closes it), the bridge's, the relay and the child (stopped on the way out)."""
    with trio.fail_after(TIMEOUT):
        client, server = await connected_pair()
    channel = WatchedChannel(server)
    spec = ChildSpec(argv=(sys.executable, "-c", child, str(REPLY_BYTES)), name="big")
    async with open_child(spec, limits) as process, trio.open_nursery() as nursery:
        relay = Relay(channel, process, limits)

        async def serve() -> None:
            await relay.run()
            await channel.aclose()

        nursery.start_soon(serve)
        yield client, channel, relay, process


async def read_to_end(stream: trio.SocketStream) -> tuple[list[dict[str, Any]], bytes]:
    """Every complete line until the end of the stream, and what followed the last newline."""
    data = bytearray()
    while chunk := await stream.receive_some(READ_SIZE):
        data += chunk
    *lines, rest = bytes(data).split(b"\n")
    return [json.loads(line) for line in lines], rest


async def test_a_reply_being_written_when_the_child_dies_is_finished_and_every_request_in_flight_answered() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with relaying(BIG_REPLY_CHILD, Limits()) as (client, channel, relay, child):
            payload = [
                request(n, "tools/call", {"name": "echo", "arguments": {}}) for n in range(1 + IN_FLIGHT)
            ]
            await client.send_all(encode(*payload))
            await channel.big_reply_writing.wait()
            os.kill(child.pid, signal.SIGKILL)
            await poll(lambda: relay.ending is not None)
            # Let the relay act on its ending before the client reads a byte.
            await trio.testing.wait_all_tasks_blocked()
            replies, rest = await read_to_end(client)
            await client.aclose()
    assert rest == b"", f"the connection ended in the middle of a line ({len(rest)} bytes)"
    counts = Counter(reply["id"] for reply in replies)
    assert sorted(counts) == list(range(1 + IN_FLIGHT)), f"{1 + IN_FLIGHT - len(counts)} requests unanswered"
    assert set(counts.values()) == {1}
    first, *others = replies
    assert first["id"] == 0
    assert len(first["result"]["text"]) == REPLY_BYTES
    for reply in others:
        assert reply["error"]["data"]["reason"] == "child-exited"


async def read_first_line_then_to_end(stream: trio.SocketStream) -> list[dict[str, Any]]:
    """Every line until the end of the stream; once the first is whole, let the relay write what
    it has to, then send EOF."""
    data = bytearray()
    while b"\n" not in data:
        chunk = await stream.receive_some(READ_SIZE)
        assert chunk, "the connection ended before a whole line"
        data += chunk
    await trio.testing.wait_all_tasks_blocked()  # whatever the relay writes next is written
    await stream.send_eof()
    while chunk := await stream.receive_some(READ_SIZE):
        data += chunk
    assert data.endswith(b"\n"), "the connection ended in the middle of a line"
    return [json.loads(line) for line in bytes(data).splitlines()]


async def test_a_refusal_due_while_a_reply_is_being_written_is_written_after_it() -> None:
    # The child's reply to request 0 is being written (the client reads nothing yet) when request
    # 1 comes, over the in-flight limit: its refusal must wait for the write, not be dropped.
    with trio.fail_after(TIMEOUT):
        async with relaying(BIG_REPLY_CHILD, Limits(max_in_flight=1)) as (client, channel, _, _):
            await client.send_all(encode(request(0, "tools/call", {"name": "big"})))
            await channel.big_reply_writing.wait()
            await client.send_all(encode(request(1, "tools/call", {"name": "more"})))
            await trio.testing.wait_all_tasks_blocked()  # the relay has read request 1 and refused it
            first, *others = await read_first_line_then_to_end(client)
            await client.aclose()
    assert first["id"] == 0 and len(first["result"]["text"]) == REPLY_BYTES
    assert [(reply["id"], reply["error"]["code"]) for reply in others] == [(1, -31002)]


async def test_a_reply_being_written_when_its_request_times_out_is_its_only_reply(
    mock_clock: trio.testing.MockClock,
) -> None:
    # The clock flows at the real rate, and is jumped past the request timeout while the reply to
    # request 0 is being written (the client reads nothing yet): the timeout must see that request
    # 0 is being answered, and neither answer it again nor cancel it at the child; request 1,
    # which the child never read, gets -32001 once the write is done.
    mock_clock.rate = 1
    request_timeout = 3600  # virtual seconds: reached only by the jump
    # The write to a client that reads nothing must outlast the jump.
    limits = Limits(request_timeout=request_timeout, send_timeout=2 * request_timeout)
    payload = [request(n, "tools/call", {"name": "big"}) for n in range(2)]
    async with relaying(BIG_REPLY_CHILD, limits) as (client, channel, relay, _):
        with trio.fail_after(TIMEOUT):
            await client.send_all(encode(*payload))
            await channel.big_reply_writing.wait()
            await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(request_timeout)  # outside fail_after, whose deadline would pass too
        with trio.fail_after(TIMEOUT):
            await poll(lambda: len(relay._ledger._deadlines) < len(payload))  # the timeout fired
            await trio.testing.wait_all_tasks_blocked()
            reply, *others = await read_first_line_then_to_end(client)
            await client.aclose()
    assert reply["id"] == 0 and len(reply["result"]["text"]) == REPLY_BYTES
    assert [(other["id"], other["error"]["code"]) for other in others] == [(1, -32001)]


async def test_a_request_reusing_the_id_of_one_cancelled_while_its_reply_was_written_gets_its_own_reply() -> (
    None
):
    # The child's reply to request 0 is being written (the client reads nothing yet) when the
    # client cancels request 0 and sends a new request with the same id: the reply being written
    # must not close the new request, whose own reply must follow it.
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 0}}
    with trio.fail_after(TIMEOUT):
        async with relaying(BIG_THEN_SMALL_CHILD, Limits()) as (client, channel, relay, _):
            await client.send_all(encode(request(0, "tools/call", {"name": "big"})))
            await channel.big_reply_writing.wait()
            await client.send_all(encode(cancel, request(0, "tools/list")))
            in_flight = relay._ledger.in_flight
            # The relay has read both: 0 is in flight again, and not the request being written.
            await poll(lambda: 0 in in_flight and not in_flight.is_being_written(0))
            replies = await read_first_line_then_to_end(client)
            await client.aclose()
    first, *others = replies
    assert first["id"] == 0 and len(first["result"]["text"]) == REPLY_BYTES
    assert others == [{"jsonrpc": "2.0", "id": 0, "result": {"method": "tools/list"}}]
