r"""Newline framing, sans-IO: bytes in, complete lines out.

This is the stdio wire format of MCP (one message per ``\n``-terminated line) and, unchanged, of every
byte-stream channel. The framer knows nothing about JSON; it only cuts lines and bounds memory.

Rules:

* A line is the bytes before a ``\n``. One trailing ``\r`` is removed (CRLF senders are tolerated).
  Empty lines (after that) are skipped: they carry no message and many writers emit them.
* A line longer than ``max_line_bytes`` (not counting the terminator) is *over-long*. The framer
  reports it once, as an :class:`Oversized` item, as soon as the limit is crossed (not when the line
  finally ends, so a peer cannot make us wait for 50 MB), then discards bytes up to and including the
  next ``\n`` and resynchronises there. Memory stays below ``max_line_bytes`` plus one input chunk.
* At end of input a partial last line is dropped (the writer died mid-message; python-sdk does the
  same); :meth:`LineFramer.close` says how many bytes were dropped.
* Any chunking of the input yields the same items as feeding it at once or byte by byte. Nothing
  else is promised, and no exception escapes :meth:`LineFramer.feed` for any input.

The item list alternates freely between lines and :class:`Oversized`; callers dispatch on type. A line
is ``bytes``, except a large one (:data:`LARGE_LINE_BYTES` or more) that arrived in several chunks:
that one is the ``bytearray`` it was gathered in, handed over rather than copied out. Work is
O(bytes fed): each byte is scanned for a newline once, and a partial line's buffer grows
geometrically (in place where ``realloc`` can, as it can for a mapped block: ``mremap``).
"""

from __future__ import annotations

import attrs

# How many leading bytes of an over-long line are kept: enough to read `"jsonrpc":"2.0","id":...`
# back out of a reply that was too large, so that its request can still be answered.
OVERSIZED_PREFIX_BYTES = 1024
# From this many bytes on, a partial line is handed over as the bytearray it grew in when its newline
# comes, not copied out into ``bytes``. Keeping the chunks and joining them once cost a 16 MiB line
# the chunks' memory and the join's, both fresh (4,096 page faults each, about 2.5 µs a fault
# here); a chunk copied into the bytearray is freed at once and its memory reused by the next read
# (`bench/passes.py bridge-unix --calls 3 --echo 16`: 40.9k page faults per echo, now 33.2k).
# Lines this long are never forwarded as they came (channels/_core/jsonrpc.py CANONICAL_LINE_LIMIT,
# the same 64 KiB): their consumers only decode them. 64 KiB is one read (channels/_core/fdio.py
# RECEIVE_SIZE): a line that fits in two reads never gets here.
LARGE_LINE_BYTES = 64 * 1024
CR = ord("\r")  # a line's last byte, before its "\n", that _emit strips


@attrs.frozen
class Oversized:
    """A line that exceeded the limit; it has been (or is being) discarded.

    Attributes:
        prefix: its first bytes: ``min(OVERSIZED_PREFIX_BYTES, max_line_bytes)`` of them, the same
            whatever the chunking (that many are always known when the limit is crossed).
    """

    prefix: bytes


class LineFramer:
    r"""Cuts a byte stream into lines, with a hard maximum line length.

    Sans-IO and synchronous: it owns no resource and needs no closing beyond :meth:`close` at
    end of input.

    Args:
        max_line_bytes: the longest line accepted, in bytes, excluding the ``\n``.

    Raises:
        ValueError: ``max_line_bytes`` is less than 1.
    """

    __slots__ = ("_buffer", "_discarding", "_prefix_bytes", "max_line_bytes")

    def __init__(self, max_line_bytes: int) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be at least 1")
        self.max_line_bytes = max_line_bytes
        self._prefix_bytes = min(OVERSIZED_PREFIX_BYTES, max_line_bytes)
        # The partial line. Its capacity may run an eighth over its length (bytearray's growth):
        # address space, never touched, so memory stays within max_line_bytes plus one chunk.
        self._buffer = bytearray()
        self._discarding = False

    def feed(self, data: bytes | bytearray) -> list[bytes | bytearray | Oversized]:
        """Add input; return every item it completes (possibly none).

        Returns:
            Complete lines (without their terminator: ``bytes``, or for a large one gathered from
            several chunks, ``bytearray``) and :class:`Oversized` markers, in input order. Never
            raises, whatever the input.
        """
        if isinstance(data, bytearray):
            data = bytes(data)  # (trio's sockets and pipes return bytes: no copy there)
        if not self._buffer and not self._discarding:
            end = data.find(b"\n")
            if end == len(data) - 1 and 0 < end <= self.max_line_bytes and data[end - 1] != CR:
                return [data[:end]]  # one whole line alone: what a read gets from a call at a time
        items: list[bytes | bytearray | Oversized] = []
        if self._discarding:
            end = data.find(b"\n")
            if end < 0:
                return items
            self._discarding = False
            data = data[end + 1 :]
        if self._buffer:
            end = data.find(b"\n")
            if end < 0:
                self._extend_partial(data, items)
                return items
            line: bytes | bytearray
            if len(self._buffer) >= LARGE_LINE_BYTES:
                line = self._buffer  # handed over whole (LARGE_LINE_BYTES)
                line += memoryview(data)[:end]
                self._buffer = bytearray()
            else:
                self._buffer += data[:end]
                line = bytes(self._buffer)
                self._buffer.clear()
            self._emit(line, items)
            data = data[end + 1 :]
        lines = data.split(b"\n")
        tail = lines.pop()
        limit = self.max_line_bytes
        if lines and b"\r" not in data and b"" not in lines and len(max(lines, key=len)) <= limit:
            items += lines  # the usual chunk: whole lines, none empty, none over-long, no CRLF
        else:
            for line in lines:
                self._emit(line, items)
        if tail:
            self._extend_partial(tail, items)
        return items

    def close(self) -> int:
        """Signal end of input; return how many bytes of a partial last line were dropped."""
        return len(self.take_partial())

    def take_partial(self) -> bytes:
        r"""End of input: return the partial last line (without ``\r``) and forget it.

        For consumers that want it anyway, such as a log of a child's stderr (its last words often
        lack a newline). A line being discarded as over-long is not returned.
        """
        partial = bytes(self._buffer).removesuffix(b"\r")
        self._buffer.clear()
        self._discarding = False
        return partial

    @property
    def buffered(self) -> int:
        """Bytes held for an incomplete line."""
        return len(self._buffer)

    def _emit(self, line: bytes | bytearray, items: list[bytes | bytearray | Oversized]) -> None:
        if line.endswith(b"\r"):
            if type(line) is bytearray:
                del line[-1]  # in place: the line is ours
            else:
                line = line[:-1]
        if len(line) > self.max_line_bytes:
            items.append(Oversized(bytes(line[: self._prefix_bytes])))
        elif line:
            items.append(line)

    def _extend_partial(self, data: bytes, items: list[bytes | bytearray | Oversized]) -> None:
        # A partial line may legitimately hold max_line_bytes plus a trailing "\r" that the next
        # chunk's "\n" would strip; only one byte past that can be declared over-long for sure.
        if len(self._buffer) + len(data) > self.max_line_bytes + 1:
            prefix = bytes(self._buffer[: self._prefix_bytes])
            if len(prefix) < self._prefix_bytes:
                prefix += data[: self._prefix_bytes - len(prefix)]
            self._buffer.clear()
            self._discarding = True
            items.append(Oversized(prefix))
        else:
            self._buffer += data
