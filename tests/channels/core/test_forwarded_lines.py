"""A canonical line is forwarded as it arrived, and that is always its canonical encoding.

:func:`~channels._core.jsonrpc.decode_line` hands back a line only when it is byte for byte what
:func:`~channels.encode` writes for the decoded message; :meth:`StreamChannel.send_lines
<channels.StreamChannel.send_lines>` writes such a line instead of encoding the message again, and
encodes (and checks) every message given without one (docs/design.md §5.2).
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st
from test_jsonrpc_canonical import LINES, WRITERS, messages, written

from channels import ProtocolError, StreamChannel, decode, encode, receive_batch
from channels._core.jsonrpc import decode_line, encode_lines

TIMEOUT = 10

NOT_CANONICAL = [
    b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}',  # spaces
    b'{"jsonrpc":"2.0","id":2,"method":"caf\\u00e9"}',  # an escape orjson does not write
    b'{"jsonrpc":"2.0","id":3,"method":"p\\/ing"}',
    b'{"jsonrpc":"2.0","id":4,"result":{"big":123456789012345678901234567890}}',  # over 64 bits
    b'{"jsonrpc":"2.0","id":5,"result":{"v":1E2,"w":1.10}}',
    b'{"jsonrpc":"2.0","id":6,"id":7,"method":"ping"}',  # a duplicate key
]


def forwarded_or_encoded(line: bytes) -> bytes:
    """What a relay writes for ``line``: the line itself if decode_line gives it back, else the encoding."""
    message, canonical = decode_line(line)
    return encode_lines([message], [canonical])


@pytest.mark.parametrize("line", LINES, ids=lambda line: repr(line[:50]))
def test_a_line_given_back_by_decode_line_is_exactly_the_encoding_of_its_message(line: bytes) -> None:
    try:
        message, canonical = decode_line(line)
    except ProtocolError as exc:
        with pytest.raises(type(exc)):
            decode(line)
        return
    assert message == decode(line)
    if canonical is not None:
        assert canonical is line
        assert encode(message) == line + b"\n"
    assert forwarded_or_encoded(line) == encode(message)


@given(messages, st.sampled_from(WRITERS))
def test_what_goes_out_for_any_message_however_written_is_its_canonical_encoding(
    message: dict[str, Any], how: str
) -> None:
    line = written(message, how)
    try:
        decoded = decode(line)
    except ProtocolError:
        return
    assert forwarded_or_encoded(line) == encode(decoded)


@pytest.mark.parametrize("line", NOT_CANONICAL, ids=lambda line: repr(line[:50]))
def test_a_line_with_spaces_escapes_or_big_integers_is_not_forwarded_but_encoded(line: bytes) -> None:
    message, canonical = decode_line(line)
    assert canonical is None
    assert forwarded_or_encoded(line) == encode(message)


def test_a_message_without_a_line_is_checked_before_anything_is_encoded() -> None:
    good = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    with pytest.raises(ValueError, match="not a JSON-RPC message"):
        encode_lines([decode(good), {"id": 2}], [good, None])
    with pytest.raises(ValueError, match="1 lines for 2 messages"):
        encode_lines([decode(good), decode(good)], [good])


def test_a_batch_of_forwarded_lines_is_written_as_those_lines_each_ended_by_a_newline() -> None:
    lines = [encode({"jsonrpc": "2.0", "id": n, "method": "ping"}, newline=False) for n in range(3)]
    assert encode_lines([decode(line) for line in lines], lines) == b"".join(line + b"\n" for line in lines)
    assert encode_lines([], []) == b""


async def test_a_stream_channel_forwards_canonical_lines_as_they_came_and_writes_the_rest_canonically() -> (
    None
):
    canonical = [
        encode({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"n": n}}) for n in range(3)
    ]
    wire = [
        canonical[0],
        *[line + b"\n" for line in NOT_CANONICAL],
        canonical[1],
        b"not json\n",
        canonical[2],
    ]
    with trio.fail_after(TIMEOUT):
        source, inbound = trio.testing.memory_stream_pair()
        outbound, sink = trio.testing.memory_stream_pair()
        receiver, sender = StreamChannel(inbound), StreamChannel(outbound)
        await source.send_all(b"".join(wire))
        items: list[Any] = []
        lines: list[bytes | None] = []
        while len(items) < len(wire):
            batch, batch_lines = await receiver.receive_batch_lines(64)
            items += batch
            lines += batch_lines
        assert [line is not None for line in lines] == [
            True,
            *[False] * len(NOT_CANONICAL),
            True,
            False,
            True,
        ]
        assert isinstance(items[-2], ProtocolError)
        del items[-2], lines[-2]
        await sender.send_lines(items, lines)
        await sender.aclose()
        written = b""
        while chunk := await sink.receive_some():
            written += chunk
        assert written == b"".join(encode(message) for message in items)
        assert written.split(b"\n")[0] + b"\n" == canonical[0]


async def test_a_batch_with_its_lines_holds_what_receive_batch_gives() -> None:
    wire = b"".join([*(line + b"\n" for line in LINES), *(line + b"\n" for line in NOT_CANONICAL)])

    async def received(with_lines: bool) -> list[Any]:
        source, inbound = trio.testing.memory_stream_pair()
        channel = StreamChannel(inbound, max_message_bytes=1 << 20)
        await source.send_all(wire)
        await source.send_eof()
        got: list[Any] = []
        while True:
            try:
                batch = (
                    (await channel.receive_batch_lines(64))[0]
                    if with_lines
                    else await receive_batch(channel, 64)
                )
            except trio.EndOfChannel:
                return [repr(item) if isinstance(item, ProtocolError) else item for item in got]
            got += batch

    with trio.fail_after(TIMEOUT):
        assert await received(with_lines=True) == await received(with_lines=False)
