"""What a relay writes either way is the canonical encoding of the message it routed on.

A canonical line is forwarded as it arrived; anything else, and any message the relay changes (a
``tools/list`` reply filtered by scopes), is encoded afresh (docs/design.md §5.2). The client end
is read as raw bytes; the child is a real process (the example server, or a script that answers
each request with the exact line it read and writes its replies with spaces).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio
import trio.testing

from bridge import ChildSpec, Limits, Relay, ToolScopes, open_child
from bridge._relay.peeked import PeekedChannel
from bridge._relay.requests import RequestMetrics
from channels import PeerInfo, Principal, StreamChannel, decode, encode, receive_batch

from conftest import example_server

TIMEOUT = 20

# Answers each request with the line it read, as a string; its own lines are written with spaces.
RAW_ECHO = r"""
import json, sys
for line in sys.stdin.buffer:
    message = json.loads(line)
    if "id" in message and "method" in message:
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": {"raw": line.rstrip(b"\n").decode()}}
        sys.stdout.write(json.dumps(reply, ensure_ascii=True) + "\n")
        sys.stdout.flush()
"""

NOT_CANONICAL_REQUESTS = [
    b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
    b'{"jsonrpc":"2.0","id":2,"method":"caf\\u00e9","params":{"s":"\\/"}}',
    b'{"jsonrpc":"2.0","id":3,"method":"big","params":{"n":123456789012345678901234567890}}',
]


@asynccontextmanager
async def relayed(
    child: tuple[str, ...], peer: PeerInfo, policy: ToolScopes | None = None
) -> AsyncIterator[trio.testing.MemoryStream]:
    """The raw client end of a relay to a real child; the relay sees ``peer`` as its client."""
    left, right = trio.testing.memory_stream_pair()
    served = StreamChannel(right, peer=peer)
    async with open_child(ChildSpec(child, name="forwarded"), Limits()) as process:
        async with trio.open_nursery() as nursery:
            relay = Relay(served, process, Limits(), tool_scopes=policy or ToolScopes())

            async def run() -> None:
                await relay.run()
                await served.aclose()

            nursery.start_soon(run)
            yield left
            await left.aclose()


async def read_line(stream: trio.testing.MemoryStream, buffer: bytearray) -> bytes:
    while b"\n" not in buffer:
        buffer += await stream.receive_some()
    end = buffer.index(b"\n") + 1
    line = bytes(buffer[:end])
    del buffer[:end]
    return line


async def test_a_canonical_request_reaches_the_child_as_the_very_line_the_client_wrote() -> None:
    line = encode({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "é", "n": [1, 2.5]}})
    with trio.fail_after(TIMEOUT):
        async with relayed((sys.executable, "-c", RAW_ECHO), PeerInfo("memory")) as client:
            await client.send_all(line)
            reply = await read_line(client, bytearray())
            assert decode(reply.rstrip(b"\n"))["result"]["raw"].encode() + b"\n" == line


async def test_requests_with_spaces_escapes_or_big_integers_reach_the_child_canonical_and_replies_too() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with relayed((sys.executable, "-c", RAW_ECHO), PeerInfo("memory")) as client:
            buffer = bytearray()
            for request in NOT_CANONICAL_REQUESTS:
                await client.send_all(request + b"\n")
                reply = await read_line(client, buffer)
                # the child wrote its reply with spaces and \u escapes: the client gets it canonical
                assert reply == encode(decode(reply.rstrip(b"\n")))
                assert b" " not in reply.split(b'"raw"')[0]
                raw = decode(reply.rstrip(b"\n"))["result"]["raw"].encode()
                assert raw + b"\n" == encode(decode(request))  # the big integer exact, too


async def test_a_tools_list_reply_filtered_by_scopes_goes_out_encoded_afresh() -> None:
    principal = Principal("http://127.0.0.1:9000", "alice", "cli", frozenset({"mcp:read"}))
    peer = PeerInfo("http", "127.0.0.1:50000", credential=principal.label, principal=principal)
    policy = ToolScopes({"spawn_*": ["mcp:admin"]})
    with trio.fail_after(TIMEOUT):
        async with relayed(example_server(), peer, policy) as client:
            await client.send_all(b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n')
            reply = await read_line(client, bytearray())
            assert reply == encode(decode(reply.rstrip(b"\n")))
            assert b'"echo"' in reply
            assert b"spawn_grandchild" not in reply


async def test_a_metered_connection_forwards_canonical_lines_and_still_times_each_request() -> None:
    request = encode({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo"}})
    reply = {"jsonrpc": "2.0", "id": 3, "result": {}}
    left, right = trio.testing.memory_stream_pair()
    metrics = RequestMetrics()
    metered = metrics.channel(StreamChannel(right, peer=PeerInfo("memory")))
    with trio.fail_after(TIMEOUT):
        await left.send_all(request)
        items, lines = await metered.receive_batch_lines(64)
        assert items == [decode(request.rstrip(b"\n"))]
        assert lines == [request.rstrip(b"\n")]  # the wrapped channel's line, not the fallback's None
        assert sum(metrics.requests.values()) == 1
        await metered.send_lines([reply], [None])
        assert await read_line(left, bytearray()) == encode(reply)
        assert sum(sum(counts) for counts in metrics.bucket_counts.values()) == 1
        await metered.aclose()


async def test_a_peeked_connection_hands_out_its_read_ahead_first_then_the_lines_of_the_rest() -> None:
    first = encode({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
    second = encode({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    left, right = trio.testing.memory_stream_pair()
    inner = StreamChannel(right, peer=PeerInfo("memory"))
    with trio.fail_after(TIMEOUT):
        await left.send_all(first)
        peeked = PeekedChannel(inner, await receive_batch(inner, 64))
        await left.send_all(second)
        assert await peeked.receive_batch_lines(64) == ([decode(first.rstrip(b"\n"))], [None])
        assert await peeked.receive_batch_lines(64) == (
            [decode(second.rstrip(b"\n"))],
            [second.rstrip(b"\n")],
        )
        await peeked.aclose()
