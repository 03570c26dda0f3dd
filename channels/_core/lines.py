"""The lines a byte stream brought, decoded many at once: the receiving side of a stream channel. Sans-IO.

:func:`take_lines` takes what :class:`~channels._core.framing.LineFramer` cut from the buffer of
:class:`~channels.StreamChannel` and gives each line's message, or the error that line raises, as
:func:`~channels._core.jsonrpc.decode_line` would, with the line where it may be forwarded as it
is. The usual batch (short, canonical lines) is decoded in one loop, with one ``orjson.dumps``
for the whole batch (:func:`decode_lines`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import orjson

from .errors import MessageTooLarge, ProtocolError
from .framing import Oversized
from .jsonrpc import (
    CANONICAL_LINE_LIMIT,
    JSONObject,
    all_valid,
    decode_line,
    decode_strict,
    sniff_leading_id,
    validate,
)

# How much of a rejected line is kept on its ProtocolError for logs.
LOG_EXCERPT_BYTES = 200
# What a batch of short lines orjson parsed as objects holds, or one without an over-long line.
_OBJECTS_ONLY = {dict}
_BYTES_ONLY = {bytes}


def take_lines(
    pending: deque[bytes | bytearray | Oversized], max_count: int, max_line_bytes: int
) -> tuple[list[JSONObject | ProtocolError], list[bytes | None], int | None]:
    """Take up to ``max_count`` items from ``pending``: their messages or errors, lines, last size.

    An :class:`Oversized` item becomes :class:`~channels.MessageTooLarge` (over ``max_line_bytes``,
    with the request id read from its first bytes if it can be); a bad line's error keeps its first
    bytes for the log (``excerpt``). The third item is the size of the last line taken that was
    not over-long (``None`` if there was none), for ``last_message_bytes``.
    """
    if len(pending) <= max_count:
        taken = [*pending]
        pending.clear()
    else:
        taken = [pending.popleft() for _ in range(max_count)]
    if {*map(type, taken)} != _BYTES_ONLY:  # none, or an over-long or large line: one at a time
        return _take_one_by_one(taken, max_line_bytes)
    items, lines = decode_lines(taken)  # type: ignore[arg-type]  # bytes only, as checked
    if None in lines:  # a bad line among them, or one not forwarded as it is
        for item, line in zip(items, taken, strict=True):
            if isinstance(item, ProtocolError):
                item.excerpt = line[:LOG_EXCERPT_BYTES]  # type: ignore[index,assignment]  # bytes, as checked
    return items, lines, len(taken[-1])  # type: ignore[arg-type]  # bytes, as checked


def _take_one_by_one(
    taken: list[bytes | bytearray | Oversized], max_line_bytes: int
) -> tuple[list[JSONObject | ProtocolError], list[bytes | None], int | None]:
    items: list[JSONObject | ProtocolError] = []
    lines: list[bytes | None] = []
    last = None
    for item in taken:
        if isinstance(item, Oversized):
            items.append(
                MessageTooLarge(
                    f"message larger than {max_line_bytes} bytes",
                    limit=max_line_bytes,
                    prefix=item.prefix,
                    request_id=sniff_leading_id(item.prefix),
                )
            )
            lines.append(None)
            continue
        last = len(item)
        message: JSONObject | ProtocolError
        try:
            message, line = decode_line(item)
        except ProtocolError as exc:
            exc.excerpt = bytes(item[:LOG_EXCERPT_BYTES])
            message, line = exc, None
        items.append(message)
        lines.append(line)
    return items, lines, last


def decode_lines(lines: Sequence[bytes]) -> tuple[list[JSONObject | ProtocolError], list[bytes | None]]:
    """:func:`~channels._core.jsonrpc.decode_line` of each line: its message or error, and its line.

    The canonical check is made once for the batch when orjson parsed every line as an object and
    writes the first back as it is (a writer that is not canonical is found at once): it writes
    the others back as one array, compared with their lines joined as one (about half the
    instructions of a ``dumps`` per line). Equal, each object is written back as exactly its own
    line, since an object ends at the brace that closes its first whatever follows: a line that
    began with its object's encoding and went on would hold a second value, which orjson refused
    when it parsed the line alone; a line shorter than that encoding would make the encoding hold
    a second value, which ``dumps`` never writes. Otherwise each line is checked alone. A batch
    whose messages all have the usual shapes is validated in one call (:func:`all_valid`).
    """
    parsed: list[Any] = []
    for line in lines:
        try:
            parsed.append(orjson.loads(line) if len(line) < CANONICAL_LINE_LIMIT else None)
        except orjson.JSONDecodeError:
            parsed.append(None)
    batch = (
        len(parsed) > 1
        and {*map(type, parsed)} == _OBJECTS_ONLY
        and _writes_back(parsed[0], lines[0])
        and _writes_back(parsed[1:], b"[" + b",".join(lines[1:]) + b"]")
    )
    if batch and all_valid(parsed):  # the usual batch: no loop in Python per message
        return parsed, list(lines)
    items: list[JSONObject | ProtocolError] = []
    kept: list[bytes | None] = []
    for message, line in zip(parsed, lines, strict=True):
        try:
            if batch or (type(message) is dict and _writes_back(message, line)):
                validate(message)
                items.append(message)
                kept.append(line)
                continue
            items.append(decode_strict(line))
        except ProtocolError as exc:
            items.append(exc.detached())
        kept.append(None)
    return items, kept


def _writes_back(value: Any, line: bytes) -> bool:
    """Whether orjson writes ``value`` (which it parsed from ``line``) back as exactly ``line``."""
    try:
        return orjson.dumps(value) == line
    except orjson.JSONEncodeError:  # nesting over 254 levels (one more in a batch than alone)
        return False
