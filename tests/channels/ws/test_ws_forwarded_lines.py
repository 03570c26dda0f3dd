"""A WebSocket channel hands out and writes text frame payloads as lines (docs/design.md §5.2).

A text frame whose payload is byte for byte its message's canonical encoding reaches the child as
that very payload; anything else reaches it canonical. A reply line the relay routes on unchanged
is a text frame's payload as is; a message the bridge builds or changes is encoded afresh. Real
sockets on loopback, the trio-websocket client, and real children (a script that answers each
request with the exact line it read, and writes its replies canonical).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio_websocket

from channels import ListenOptions, MessageChannel, ProtocolError, decode, encode, parse_address

from conftest import running_bridge

TIMEOUT = 20

# Answers each request with the line it read, as a string; writes its replies as compact JSON
# with UTF-8 as is: the canonical encoding, which the relay routes on unchanged.
RAW_ECHO = r"""
import json, sys
for line in sys.stdin.buffer:
    message = json.loads(line)
    if "id" in message and "method" in message:
        result = {"raw": line.rstrip(b"\n").decode(), "note": "café ☕"}
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        sys.stdout.write(json.dumps(reply, ensure_ascii=False, separators=(",", ":")) + "\n")
        sys.stdout.flush()
"""

CANONICAL = encode(
    {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "é ☕", "n": [1, 2.5, -3e-7]}},
    newline=False,
)
NOT_CANONICAL = [
    b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
    b'{"jsonrpc":"2.0","id":2,"method":"caf\\u00e9","params":{"s":"\\/"}}',
    b'{"jsonrpc":"2.0","id":3,"method":"big","params":{"n":123456789012345678901234567890}}',
]
# Over jsonrpc.CANONICAL_LINE_LIMIT (64 KiB) and not ASCII: kept as text, strictly parsed, no line.
LONG_NOT_ASCII = encode({"jsonrpc": "2.0", "method": "note", "params": {"s": "é" * 40_000}}, newline=False)


@asynccontextmanager
async def connected() -> AsyncIterator[tuple[trio_websocket.WebSocketConnection, MessageChannel]]:
    """``(client, server)``: a trio-websocket client and the listener's channel for it; the server
    side closes first on exit."""
    listeners = await parse_address("ws://127.0.0.1:0/mcp").listen(ListenOptions())
    send, receive = trio.open_memory_channel[MessageChannel](1)

    async def serve_one(incoming: object) -> None:
        async with incoming.establish() as channel:  # type: ignore[attr-defined]
            await send.send(channel)
            await trio.sleep_forever()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, serve_one, listeners)
            async with trio_websocket.open_websocket_url(listeners[0].address) as client:
                server = await receive.receive()
                yield client, server
                await server.aclose()  # the closing handshake, which the client answers
            nursery.cancel_scope.cancel()
    finally:
        for listener in listeners:
            await trio.aclose_forcefully(listener)


async def raw_echo_call(payload: bytes) -> dict[str, object]:
    """Send ``payload`` as a text frame through the bridge to RAW_ECHO; the reply, whose frame
    must be byte for byte the canonical encoding of what the child wrote."""
    async with running_bridge((sys.executable, "-c", RAW_ECHO), ["ws://127.0.0.1:0/mcp"]) as daemon:
        async with trio_websocket.open_websocket_url(daemon.addresses[0]) as client:
            await client.send_message(payload.decode())
            frame = (await client.get_message()).encode()
    reply = decode(frame)
    assert frame == encode(reply, newline=False)
    return reply


async def test_a_canonical_text_frame_reaches_the_child_byte_for_byte() -> None:
    with trio.fail_after(TIMEOUT):
        reply = await raw_echo_call(CANONICAL)
        assert reply["result"]["raw"].encode() == CANONICAL  # type: ignore[index]


@pytest.mark.parametrize("payload", NOT_CANONICAL)
async def test_a_non_canonical_text_frame_with_spaces_escapes_or_big_integers_reaches_the_child_canonical(
    payload: bytes,
) -> None:
    with trio.fail_after(TIMEOUT):
        reply = await raw_echo_call(payload)
        assert reply["result"]["raw"].encode() == encode(decode(payload), newline=False)  # type: ignore[index]


async def _frames_through(frames: list[bytes]) -> tuple[list[object], list[bytes | None]]:
    """Send ``frames`` as text frames; the items and lines the server's channel hands out for them."""
    async with connected() as (client, server):
        for frame in frames:
            await client.send_message(frame.decode())
        items: list[object] = []
        lines: list[bytes | None] = []
        while len(items) < len(frames):
            more_items, more_lines = await server.receive_batch_lines(64)
            items += more_items
            lines += more_lines
    return items, lines


async def test_a_canonical_text_frame_is_handed_out_with_its_payload_as_its_line_and_others_without() -> None:
    frames = [CANONICAL, *NOT_CANONICAL, LONG_NOT_ASCII, b'{"jsonrpc":"2.0","id":9}']
    with trio.fail_after(TIMEOUT):
        items, lines = await _frames_through(frames)
    assert items[:-1] == [decode(frame) for frame in frames[:-1]]
    assert isinstance(items[-1], ProtocolError)  # a bad message is an item, as in receive_batch
    assert lines == [CANONICAL, None, None, None, None, None]


async def test_frames_read_together_are_decoded_as_each_alone() -> None:
    second = CANONICAL.replace(b'"id":7', b'"id":8')
    frames = [CANONICAL, second, NOT_CANONICAL[0], second, b'{"jsonrpc":"2.0","id":9}', CANONICAL]
    with trio.fail_after(TIMEOUT):
        items, lines = await _frames_through(frames)
    assert items[:4] == [decode(frame) for frame in frames[:4]] and items[5] == decode(CANONICAL)
    assert isinstance(items[4], ProtocolError)
    assert lines == [CANONICAL, second, None, second, None, CANONICAL]


async def test_a_reply_line_becomes_a_text_frames_payload_as_is_and_a_changed_reply_is_encoded_afresh() -> (
    None
):
    line = encode({"jsonrpc": "2.0", "id": 1, "result": {"s": "é"}}, newline=False)
    changed = {"jsonrpc": "2.0", "id": 2, "result": {"s": "é", "filtered": True}}
    # The line is written unchecked and not encoded: its message here could not even be encoded.
    unencodable = {"jsonrpc": "2.0", "id": 1, "result": {"s": {"é"}}}
    with trio.fail_after(TIMEOUT):
        async with connected() as (client, server):
            await server.send_lines([unencodable, changed], [line, None])
            assert (await client.get_message()).encode() == line
            assert (await client.get_message()).encode() == encode(changed, newline=False)


async def test_a_changed_reply_that_is_not_a_message_is_refused_and_nothing_of_the_batch_is_written() -> None:
    line = encode({"jsonrpc": "2.0", "id": 1, "result": {}}, newline=False)
    with trio.fail_after(TIMEOUT):
        async with connected() as (client, server):
            with pytest.raises(ValueError, match="not a JSON-RPC message"):
                await server.send_lines([decode(line), {"jsonrpc": "2.0"}], [line, None])
            with pytest.raises(ValueError, match="2 lines for 1 messages"):
                await server.send_lines([decode(line)], [line, None])
            await server.send_lines([{"jsonrpc": "2.0", "id": 2, "result": {}}], [None])
            assert json.loads(await client.get_message())["id"] == 2  # the first frame to arrive
