"""Lines decoded many at once give what each gives alone (channels/_core/lines.py, docs/design.md §5.2).

:func:`~channels._core.lines.decode_lines` checks a batch's canonical lines with one
``orjson.dumps``; whatever the batch, each line's message (or error) and whether it may be
forwarded as it is are what :func:`~channels._core.jsonrpc.decode_line` says for it alone.
"""

from __future__ import annotations

import weakref
from collections import deque
from typing import Any

import pytest
from garbage import cycle_collector_off
from hypothesis import given
from hypothesis import strategies as st
from test_jsonrpc_canonical import LINES, WRITERS, messages, nested, outcome, written

from channels import MessageTooLarge, ParseError, ProtocolError
from channels._core.framing import LARGE_LINE_BYTES, Oversized
from channels._core.jsonrpc import decode_line
from channels._core.lines import LOG_EXCERPT_BYTES, decode_lines, take_lines

# Lines that parse alone, and whose joins could read as other objects if a batch were parsed whole.
PIECES = [
    b'{"jsonrpc":"2.0","id":1,"result":{"a":[{}]}}',
    b'{"jsonrpc":"2.0","id":2,"result":{}}',
    b'{"jsonrpc":"2.0","id":3,"result":"],["}',
    b'{"jsonrpc":"2.0","id":4,"result":"}"}',
    b'{"jsonrpc":"2.0","id":5,"result":{}} ',
    b' {"jsonrpc":"2.0","id":6,"result":{}}',
    b'{"jsonrpc":"2.0","id":7,"result":{}},{}',
    b'{"jsonrpc":"2.0","id":8,"result":[1',
    b"2]}",
    b"{}",
    b"[]",
    b"1",
    b"null",
    nested(254),
    nested(253),
]


def alone(line: bytes) -> tuple[Any, bytes | None]:
    """What decode_line says for ``line``: its outcome, and the line if it may be forwarded."""
    try:
        message, kept = decode_line(line)
    except ProtocolError:
        return outcome(decode_line, line), None
    return ("value", repr(message)), kept


def together(lines: list[bytes]) -> list[tuple[Any, bytes | None]]:
    items, kept = decode_lines(lines)
    assert len(items) == len(kept) == len(lines)
    return [
        (
            ("error", type(item), str(item), item.request_id, type(item.request_id))
            if isinstance(item, ProtocolError)
            else ("value", repr(item)),
            line,
        )
        for item, line in zip(items, kept, strict=True)
    ]


@given(st.lists(st.sampled_from(PIECES + LINES), max_size=12))
def test_a_batch_of_lines_decodes_as_each_line_alone(lines: list[bytes]) -> None:
    assert together(lines) == [alone(line) for line in lines]


@given(st.lists(st.tuples(messages, st.sampled_from(WRITERS)), max_size=8))
def test_a_batch_of_messages_however_written_decodes_as_each_alone(
    written_as: list[tuple[dict[str, Any], str]],
) -> None:
    lines = [written(message, how) for message, how in written_as]
    assert together(lines) == [alone(line) for line in lines]


@pytest.mark.parametrize(
    "lines",
    [
        [b'{"jsonrpc":"2.0","id":1,"result":{"a":[{}', b"{}]},{}", b'{"jsonrpc":"2.0","id":2,"result":{}}'],
        [b'{"jsonrpc":"2.0","id":1,"result":"x', b'y"}', b'{"jsonrpc":"2.0","id":2,"result":{}}'],
        [b'{"jsonrpc":"2.0","id":1,"result":{}}', b'{"jsonrpc": "2.0","id":2,"result":{}}'],
    ],
)
def test_lines_that_would_join_into_other_objects_are_never_forwarded_as_they_are(lines: list[bytes]) -> None:
    assert together(lines) == [alone(line) for line in lines]
    assert decode_lines(lines)[1][1] is None


def test_taken_lines_keep_their_errors_excerpts_and_an_over_long_line_becomes_message_too_large() -> None:
    bad = b"x" * (LOG_EXCERPT_BYTES + 10)
    good = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    pending: deque[bytes | Oversized] = deque([good, bad, Oversized(b'{"jsonrpc":"2.0","id":9,'), good])
    items, lines, last = take_lines(pending, 3, 100)
    assert [type(item) for item in items[1:]] == [type(items[1]), MessageTooLarge]
    assert isinstance(items[1], ProtocolError) and items[1].excerpt == bad[:LOG_EXCERPT_BYTES]
    assert isinstance(items[2], MessageTooLarge) and items[2].request_id == 9 and items[2].limit == 100
    assert lines == [good, None, None] and last == len(bad) and list(pending) == [good]
    items, lines, last = take_lines(pending, 3, 100)
    assert lines == [good] and last == len(good) and not pending
    bads = [bad, good]
    items, lines, last = take_lines(deque(bads), 64, 100)
    assert isinstance(items[0], ProtocolError) and items[0].excerpt == bad[:LOG_EXCERPT_BYTES]
    assert take_lines(deque(), 64, 100) == ([], [], None)


def test_a_large_line_handed_over_as_a_bytearray_is_decoded_and_never_forwarded_as_it_is() -> None:
    good = bytearray(b'{"jsonrpc":"2.0","id":1,"result":"%s"}' % (b"x" * LARGE_LINE_BYTES))
    bad = bytearray(b"x" * LARGE_LINE_BYTES)
    items, lines, last = take_lines(deque([good, bad]), 64, 4 * LARGE_LINE_BYTES)
    assert items[0] == {"jsonrpc": "2.0", "id": 1, "result": "x" * LARGE_LINE_BYTES}
    assert isinstance(items[1], ProtocolError) and items[1].excerpt == b"x" * LOG_EXCERPT_BYTES
    assert type(items[1].excerpt) is bytes and lines == [None, None] and last == LARGE_LINE_BYTES


class Lines(list[bytes]):
    """A batch's lines that can be weakly referred to (a plain list cannot)."""


def test_a_batch_with_bad_lines_leaves_no_reference_cycle_behind() -> None:
    with cycle_collector_off():  # only reference counts may free the batch
        lines = Lines([b"{not json", nested(100_000), b'{"jsonrpc":"2.0","id":1,"method":"ping"}'])
        items, _ = decode_lines(lines)
        assert [type(item) for item in items] == [ParseError, ParseError, dict]
        assert str(items[1]) == "JSON nested too deeply"
        freed = weakref.ref(lines)
        del lines  # the frame that caught the errors held it: a cycle through their tracebacks
        assert freed() is None
