"""Taking what a channel already holds in one step gives what receiving it one by one gives."""

from __future__ import annotations

import trio
import trio.testing

from channels import MessageChannel, ProtocolError, StreamChannel

LINES = [
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
    b"not json",
    b'{"jsonrpc":"2.0","id":2,"result":{}}',
    b'{"jsonrpc":"1.0","id":3,"method":"ping"}',
    b"x" * 300,  # over the channel's limit below
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
] * 3


def described(items: list[object]) -> list[object]:
    return [(type(item), str(item)) if isinstance(item, ProtocolError) else item for item in items]


async def taken(take_in_one_step: bool, max_count: int) -> list[list[object]]:
    """The batches a channel fed LINES hands out: the first item received, the rest taken."""
    ours, theirs = trio.testing.memory_stream_pair()
    channel = StreamChannel(ours, max_message_bytes=200)
    await theirs.send_all(b"".join(line + b"\n" for line in LINES))
    await theirs.send_eof()
    batches: list[list[object]] = []
    while True:
        items: list[object] = []
        try:
            items.append(await channel.receive())
        except ProtocolError as exc:
            items.append(exc)
        except trio.EndOfChannel:
            return batches
        if take_in_one_step:
            channel.take_buffered(items, max_count)  # type: ignore[arg-type]
        else:
            MessageChannel.take_buffered(channel, items, max_count)  # type: ignore[arg-type]
        batches.append(described(items))


async def test_taking_buffered_messages_in_one_step_gives_what_receive_nowait_gives_one_by_one() -> None:
    with trio.fail_after(5):
        for max_count in (1, 4, 64):
            assert await taken(True, max_count) == await taken(False, max_count)


async def test_a_batch_keeps_each_bad_lines_start_for_the_log_and_the_size_of_the_last_line() -> None:
    with trio.fail_after(5):
        ours, theirs = trio.testing.memory_stream_pair()
        channel = StreamChannel(ours, max_message_bytes=200)
        await theirs.send_all(b"".join(line + b"\n" for line in LINES[:6]))
        items, lines = await channel.receive_batch_lines(64)
        assert [type(item).__name__ for item in items] == [
            "dict",
            "ParseError",
            "dict",
            "InvalidMessage",
            "MessageTooLarge",
            "dict",
        ]
        assert [item.excerpt for item in items if isinstance(item, ProtocolError)] == [
            b"not json",
            LINES[3],
            b"",  # an over-long line is not kept
        ]
        assert lines == [LINES[0], None, LINES[2], None, None, LINES[5]]
        assert channel.last_message_bytes == len(LINES[5])


async def test_a_line_that_arrives_alone_is_decoded_and_kept_for_the_log_as_one_in_a_batch() -> None:
    with trio.fail_after(5):
        ours, theirs = trio.testing.memory_stream_pair()
        channel = StreamChannel(ours, max_message_bytes=200)
        received = []
        for line in (LINES[0], b"not json", LINES[3]):
            await theirs.send_all(line + b"\n")
            items, lines = await channel.receive_batch_lines(64)
            assert len(items) == len(lines) == 1 and channel.last_message_bytes == len(line)
            item = items[0]
            received.append((type(item).__name__, getattr(item, "excerpt", None), lines[0]))
        assert received == [
            ("dict", None, LINES[0]),
            ("ParseError", b"not json", None),
            ("InvalidMessage", LINES[3], None),
        ]
