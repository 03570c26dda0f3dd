"""HTTP/1.1 responses and server-sent events, parsed by hand for the benchmark's Streamable HTTP
client (streamable_http.py): :class:`ResponseParser` (status line, headers, ``Content-Length``,
``Transfer-Encoding: chunked`` with trailers skipped, or read-until-close bodies) and
:class:`EventStream` (``\\n``, ``\\r\\n`` or ``\\r`` line ends, multi-line ``data``).

Not h11: h11 costs about 50 µs per request/response pair here (building a request and parsing a
small response), several times what the rest of the client spends on a call, so it would have
made the client the bottleneck of every HTTP row; this parser costs a few µs. Only what a
benchmark client needs is implemented: no redirects, no authentication, no compression (none is
asked for), no resumption (``Last-Event-ID``).
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable

from wire import BenchError

MAX_HEAD_BYTES = 64 * 1024  # a longer status line + headers (or chunk-size line) is an error


# -- HTTP/1.1 responses -----------------------------------------------------------------------
LAST_CHUNK = b"\r\n0\r\n\r\n"  # a chunk's CRLF, the last (empty) chunk and no trailer
_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILER, _UNTIL_CLOSE, _IDLE = range(8)


class ResponseParser:
    """An incremental HTTP/1.1 response parser for one connection, one response at a time.

    ``feed`` bytes as they arrive; it calls ``on_head(status, reason)`` (during which
    :meth:`header` reads the response's headers), ``on_body(data)`` for each piece of the
    de-chunked body and ``on_end()`` when the response is complete. ``expect()`` arms it for the
    next response; bytes that arrive with no response expected are an error (nothing is pipelined).
    Headers are looked up, not split into a dict: a client needs five of them, and this is most of
    the parsing time of a small response.
    """

    def __init__(self, on_head: Callable, on_body: Callable, on_end: Callable) -> None:
        self._on_head, self._on_body, self._on_end = on_head, on_body, on_end
        self._state = _IDLE
        self._pending = bytearray()  # an incomplete head or chunk line
        self._remaining = 0  # body or chunk bytes still to come
        self.no_body = False  # the response to a HEAD request has none (unused by MCP, kept honest)
        self.keep_alive = True  # whether the connection may carry another request afterwards
        self._head_bytes = b""  # the last response head (status line and headers)
        self._head_lower = b""  # the same in lower case, to find header names in

    @property
    def idle(self) -> bool:
        return self._state == _IDLE

    @property
    def started(self) -> bool:
        """True once any byte of the expected response has arrived."""
        return self._state != _HEAD or bool(self._pending)

    def expect(self) -> None:
        self._state = _HEAD
        self._pending.clear()

    def feed(self, data: bytes) -> None:
        pos, size = 0, len(data)
        while pos < size:
            state = self._state
            if state == _LENGTH or state == _CHUNK_DATA:
                take = min(self._remaining, size - pos)
                self._on_body(data if take == size else data[pos : pos + take])
                pos += take
                self._remaining -= take
                if not self._remaining:
                    if state == _LENGTH:
                        self._finish()
                    else:
                        self._state = _CHUNK_END
            elif state == _UNTIL_CLOSE:
                self._on_body(data[pos:] if pos else data)
                pos = size
            elif state == _CHUNK_END and data.startswith(LAST_CHUNK, pos):  # the usual end
                pos += len(LAST_CHUNK)
                self._finish()
            elif state == _IDLE:
                raise BenchError(f"{size - pos} bytes from the server with no request in flight")
            else:  # a line-oriented state: the head, a chunk-size line, a chunk's CRLF, a trailer
                if self._pending:  # rare: a line split across reads
                    data = bytes(self._pending) + data[pos:]
                    self._pending.clear()
                    pos, size = 0, len(data)
                terminator = b"\r\n\r\n" if state == _HEAD else b"\r\n"
                end = data.find(terminator, pos)
                if end < 0:
                    if size - pos > MAX_HEAD_BYTES:
                        raise BenchError(f"HTTP head or chunk line longer than {MAX_HEAD_BYTES} bytes")
                    self._pending += data[pos:]
                    return
                line = data[pos:end]
                pos = end + len(terminator)
                self._line(state, line)

    def feed_eof(self) -> None:
        """The server closed the connection: ends a read-until-close body, else is an error."""
        if self._state == _UNTIL_CLOSE:
            self._finish()
        elif self._state != _IDLE:
            where = "in the middle of the response" if self.started else "before responding"
            raise BenchError(f"connection closed by the server {where}")

    def _line(self, state: int, line: bytes) -> None:
        if state == _HEAD:
            self._head(line)
        elif state == _CHUNK_SIZE:
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise BenchError(f"bad chunk-size line: {line[:40]!r}") from None
            if size:
                self._state, self._remaining = _CHUNK_DATA, size
            else:
                self._state = _TRAILER
        elif state == _CHUNK_END:
            if line:
                raise BenchError(f"chunk not followed by CRLF: {line[:40]!r}")
            self._state = _CHUNK_SIZE
        elif not line:  # _TRAILER: the empty line ends the message; trailer fields are skipped
            self._finish()

    def header(self, name: bytes) -> bytes | None:
        """The value of the last response's first header called ``name`` (lower case), or None."""
        lower = self._head_lower
        start = lower.find(b"\r\n" + name + b":")
        if start < 0:
            return None
        start += len(name) + 3
        end = lower.find(b"\r\n", start)
        return self._head_bytes[start : end if end >= 0 else len(lower)].strip()

    def _head(self, head: bytes) -> None:
        status_line, _, _ = head.partition(b"\r\n")
        version, _, rest = status_line.partition(b" ")
        code, _, reason = rest.partition(b" ")
        if not version.startswith(b"HTTP/1.") or not code.isdigit():
            raise BenchError(f"bad HTTP status line: {status_line[:80]!r}")
        status = int(code)
        if 100 <= status < 200:  # 100 Continue and the like: the real response follows
            return
        self._head_bytes, self._head_lower = head, head.lower()
        connection = (self.header(b"connection") or b"").lower()
        self.keep_alive = b"close" not in connection and (
            version != b"HTTP/1.0" or b"keep-alive" in connection
        )
        self._on_head(status, reason.decode(errors="replace"))
        length = self.header(b"content-length")
        if self.no_body or status in (204, 304):
            self._finish()
        elif b"chunked" in (self.header(b"transfer-encoding") or b"").lower():
            self._state = _CHUNK_SIZE
        elif length is not None:
            try:
                self._remaining = int(length)
            except ValueError:
                raise BenchError(f"bad Content-Length: {length[:40]!r}") from None
            if self._remaining:
                self._state = _LENGTH
            else:
                self._finish()
        else:
            self._state = _UNTIL_CLOSE
            self.keep_alive = False

    def _finish(self) -> None:
        self._state = _IDLE
        self._on_end()


# -- server-sent events -----------------------------------------------------------------------
class EventStream:
    """An incremental ``text/event-stream`` parser: ``feed`` returns the data of each complete
    ``message`` event (events of another type, events without data, and comments are dropped;
    ``id`` and ``retry`` are ignored)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._carriage_return = False  # the last piece ended with CR, which an LF may complete

    def feed(self, data: bytes) -> list[bytes]:
        if self._carriage_return or b"\r" in data:
            data = self._normalise(data)
        buffer = self._buffer
        if not buffer and data.endswith(b"\n\n") and data.find(b"\n\n") == len(data) - 2:
            payload = event_data(data[:-2])  # the usual case: exactly one whole event
            return [] if payload is None else [payload]
        start = max(0, len(buffer) - 1)
        buffer += data
        payloads = []
        while (end := buffer.find(b"\n\n", start)) >= 0:
            payload = event_data(bytes(buffer[:end]))
            del buffer[: end + 2]
            start = 0
            if payload is not None:
                payloads.append(payload)
        return payloads

    def _normalise(self, data: bytes) -> bytes:
        """CRLF and lone CR line ends become LF (an LF after a piece that ended with CR is that
        CR's, and dropped)."""
        if self._carriage_return and data.startswith(b"\n"):
            data = data[1:]
        self._carriage_return = data.endswith(b"\r")
        return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def event_data(block: bytes) -> bytes | None:
    """The data of one event (its lines, without the blank line), or None if it is not a message."""
    data = []
    kind = b"message"
    for line in block.split(b"\n"):
        if line.startswith(b"data"):
            if line.startswith(b"data: "):
                data.append(line[6:])
            elif line.startswith(b"data:"):
                data.append(line[5:])
            elif line == b"data":
                data.append(b"")
        elif line.startswith(b"event:"):
            kind = line[6:].removeprefix(b" ")
        # comments (":..."), id:, retry: and unknown fields are ignored
    if kind != b"message" or not data:
        return None
    return data[0] if len(data) == 1 else b"\n".join(data)


def is_response(payload: bytes) -> bool:
    """True unless the JSON-RPC message is a request or notification (has a ``method`` member).

    A response has no ``"method"`` key, and inside a JSON string a quote is always escaped, so a
    payload without the bytes ``"method"`` (and without ``\\u`` escapes, which could spell it) is
    a response without being parsed; anything else is parsed to be sure.
    """
    if b'"method"' not in payload and b"\\u" not in payload:
        return True
    try:
        message = json.loads(payload)
    except ValueError:
        return True  # not JSON: handed on, for the scenario to report
    return not (isinstance(message, dict) and "method" in message)


def one_line(text: str) -> str:
    """An error body for a one-line message: HTML tags and entities gone, whitespace collapsed."""
    if "<" in text:
        text = html.unescape(re.sub(r"<[^>]*>", " ", text))
    return " ".join(text.split())
