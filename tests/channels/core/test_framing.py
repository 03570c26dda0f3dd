"""The sans-IO LineFramer: chunking never matters, lines are bounded, and it resynchronises."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from channels import LineFramer, Oversized
from channels._core.framing import LARGE_LINE_BYTES, OVERSIZED_PREFIX_BYTES

Items = list[bytes | bytearray | Oversized]


def feed_in_chunks(max_line_bytes: int, chunks: list[bytes]) -> tuple[Items, int]:
    """Every item, and what close() reports, for the input cut into ``chunks``."""
    framer = LineFramer(max_line_bytes)
    items: Items = []
    for chunk in chunks:
        items.extend(framer.feed(chunk))
        assert framer.buffered <= max_line_bytes + 1  # memory stays bounded between feeds
    return items, framer.close()


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(cut, len(data)) for cut in cuts})
    return [data[start:end] for start, end in zip([0, *points], [*points, len(data)], strict=True)]


def byte_by_byte(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


# Inputs rich in what matters to the framer: newlines, carriage returns and short lines near the
# limit; plus arbitrary bytes.
framed_bytes = st.one_of(
    st.lists(st.sampled_from([b"a", b"bc", b"\r", b"\n", b"\r\n", b"\xff", b"{}"])).map(b"".join),
    st.binary(),
)


@given(
    data=framed_bytes,
    cuts=st.lists(st.integers(min_value=0, max_value=300)),
    max_line_bytes=st.integers(min_value=1, max_value=12),
)
def test_any_chunking_yields_the_same_lines_as_one_shot_and_byte_at_a_time(
    data: bytes, cuts: list[int], max_line_bytes: int
) -> None:
    one_shot, dropped = feed_in_chunks(max_line_bytes, [data])
    for chunks in (split_at(data, cuts), byte_by_byte(data)):
        items, dropped_here = feed_in_chunks(max_line_bytes, chunks)
        assert items == one_shot  # over-long lines' prefixes included
        assert dropped_here == dropped


@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b""))),
    cuts=st.lists(st.integers(min_value=0, max_value=2000)),
)
def test_with_a_limit_above_the_prefix_size_chunking_changes_nothing_at_all(
    lines: list[bytes], cuts: list[int]
) -> None:
    max_line_bytes = OVERSIZED_PREFIX_BYTES
    data = b"".join(line * 40 + b"\n" for line in lines)  # some of them over-long
    one_shot = feed_in_chunks(max_line_bytes, [data])
    assert feed_in_chunks(max_line_bytes, split_at(data, cuts)) == one_shot
    assert feed_in_chunks(max_line_bytes, byte_by_byte(data)) == one_shot


LARGE_LIMIT = 3 * LARGE_LINE_BYTES


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(
        st.integers(min_value=LARGE_LINE_BYTES - 2, max_value=LARGE_LIMIT + 2), min_size=1, max_size=3
    ),
    endings=st.lists(st.sampled_from([b"\n", b"\r\n", b"\r\r\n"]), min_size=3, max_size=3),
    cuts=st.lists(st.integers(min_value=0, max_value=4 * LARGE_LIMIT), max_size=40),
    tail=st.integers(min_value=0, max_value=LARGE_LIMIT + 2),
)
def test_large_lines_gathered_from_chunks_come_out_as_they_would_from_one_shot(
    sizes: list[int], endings: list[bytes], cuts: list[int], tail: int
) -> None:
    # Lines around LARGE_LINE_BYTES and the limit, each byte telling where it came from, so that
    # a chunk joined in the wrong order or twice shows.
    data = (
        b"".join(
            bytes((index + offset) % 251 for offset in range(size)).replace(b"\n", b"n") + ending
            for index, (size, ending) in enumerate(zip(sizes, endings, strict=False))
        )
        + b"p" * tail
    )
    one_shot = feed_in_chunks(LARGE_LIMIT, [data])
    assert feed_in_chunks(LARGE_LIMIT, split_at(data, cuts)) == one_shot
    assert feed_in_chunks(LARGE_LIMIT, split_at(data, list(range(0, len(data), 4096)))) == one_shot


def test_a_large_line_from_several_chunks_is_handed_over_in_the_bytearray_it_grew_in() -> None:
    framer = LineFramer(LARGE_LIMIT)
    line = bytes(range(256)).replace(b"\n", b"n") * (LARGE_LINE_BYTES // 128)
    assert framer.feed(line[:LARGE_LINE_BYTES]) == []
    [item] = framer.feed(line[LARGE_LINE_BYTES:] + b"\r\nnext")
    assert type(item) is bytearray and item == line  # the "\r" removed in place
    assert framer.feed(b"\n") == [b"next"] and item == line  # the framer has let go of it
    assert framer.buffered == 0


def test_a_large_partial_last_line_is_returned_whole_by_take_partial() -> None:
    framer = LineFramer(LARGE_LIMIT)
    pieces = [bytes([65 + i]) * 40_000 for i in range(4)]  # past LARGE_LINE_BYTES after two
    for piece in pieces:
        assert framer.feed(piece) == []
    assert framer.buffered == 160_000
    assert framer.take_partial() == b"".join(pieces)
    assert framer.buffered == 0
    assert framer.feed(b"next\n") == [b"next"]


def test_an_oversized_lines_prefix_does_not_depend_on_chunking() -> None:
    data = b"abcdefghij\n"
    assert feed_in_chunks(3, [data]) == feed_in_chunks(3, byte_by_byte(data))
    assert feed_in_chunks(3, [data])[0] == [Oversized(b"abc")]


@given(data=st.binary(), max_line_bytes=st.integers(min_value=1, max_value=64))
def test_feed_never_raises_for_any_input(data: bytes, max_line_bytes: int) -> None:
    framer = LineFramer(max_line_bytes)
    items = framer.feed(data) + framer.feed(data)
    assert all(isinstance(item, (bytes, Oversized)) for item in items)
    framer.close()


def test_a_trailing_carriage_return_is_removed_once() -> None:
    items, _ = feed_in_chunks(100, [b"crlf\r\nlf\nboth\r\r\n"])
    assert items == [b"crlf", b"lf", b"both\r"]


def test_empty_lines_are_skipped() -> None:
    items, _ = feed_in_chunks(100, [b"\n\r\n\na\n\n\r\nb\n"])
    assert items == [b"a", b"b"]


LIMIT = 8


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"x" * (LIMIT - 1), b"x" * (LIMIT - 1)),
        (b"x" * LIMIT, b"x" * LIMIT),
        (b"x" * (LIMIT + 1), None),
        (b"x" * (LIMIT - 1) + b"\r", b"x" * (LIMIT - 1)),
        (b"x" * LIMIT + b"\r", b"x" * LIMIT),  # the \r does not count towards the limit
        (b"x" * (LIMIT + 1) + b"\r", None),
    ],
)
@pytest.mark.parametrize("chunking", ["one-shot", "byte-at-a-time"])
def test_the_limit_is_exact_and_the_next_line_is_delivered_after_an_over_long_one(
    line: bytes, expected: bytes | None, chunking: str
) -> None:
    data = b"before\n" + line + b"\nafter\n"
    chunks = [data] if chunking == "one-shot" else byte_by_byte(data)
    items, dropped = feed_in_chunks(LIMIT, chunks)
    middle = items[1]
    if expected is None:
        assert isinstance(middle, Oversized)
        assert middle.prefix == b"x" * LIMIT  # min(OVERSIZED_PREFIX_BYTES, limit) bytes
    else:
        assert middle == expected
    assert items[0] == b"before" and items[2] == b"after" and len(items) == 3
    assert dropped == 0


def test_an_over_long_line_is_reported_as_soon_as_the_limit_is_crossed_and_only_once() -> None:
    framer = LineFramer(LIMIT)
    assert framer.feed(b"x" * (LIMIT + 1)) == []  # could still end in \r\n
    assert framer.feed(b"x") == [Oversized(b"x" * LIMIT)]
    assert framer.feed(b"y" * 10_000) == []  # discarded, not buffered
    assert framer.buffered == 0
    assert framer.feed(b"tail of the long line\nnext\n") == [b"next"]


def test_the_prefix_of_a_huge_line_is_bounded() -> None:
    framer = LineFramer(4 * OVERSIZED_PREFIX_BYTES)
    (item,) = framer.feed(b"z" * (5 * OVERSIZED_PREFIX_BYTES))
    assert isinstance(item, Oversized)
    assert item.prefix == b"z" * OVERSIZED_PREFIX_BYTES


def test_a_partial_last_line_is_dropped_at_close_and_counted() -> None:
    framer = LineFramer(100)
    assert framer.feed(b'{"complete":1}\n{"cut off') == [b'{"complete":1}']
    assert framer.buffered == len(b'{"cut off')
    assert framer.close() == len(b'{"cut off')
    assert framer.buffered == 0


def test_close_after_a_clean_end_drops_nothing() -> None:
    framer = LineFramer(100)
    framer.feed(b"line\n")
    assert framer.close() == 0


def test_a_limit_below_one_byte_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        LineFramer(0)


def framed_by_the_rules(data: bytes, max_line_bytes: int) -> Items:
    """The module's rules applied line by line: the reference for a chunk of whole lines."""
    items: Items = []
    for line in data.split(b"\n")[:-1]:
        line = line.removesuffix(b"\r")
        if len(line) > max_line_bytes:
            items.append(Oversized(line[: min(OVERSIZED_PREFIX_BYTES, max_line_bytes)]))
        elif line:
            items.append(line)
    return items


@given(
    lines=st.lists(st.sampled_from([b"", b"a", b"{}", b"abcdef", b"ab\r", b"\r", b"x" * 13])),
    max_line_bytes=st.integers(min_value=1, max_value=12),
)
def test_a_chunk_of_whole_lines_gives_what_the_rules_give_line_by_line(
    lines: list[bytes], max_line_bytes: int
) -> None:
    data = b"".join(line + b"\n" for line in lines)
    assert LineFramer(max_line_bytes).feed(data) == framed_by_the_rules(data, max_line_bytes)
