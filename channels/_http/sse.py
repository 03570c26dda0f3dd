"""Server-sent events (the WHATWG HTML "server-sent events" format), both directions (sans-IO).

MCP's HTTP transports put one JSON-RPC message in each event's ``data``. Encoding never splits a
message over several ``data:`` lines, since compact JSON has no newline; decoding follows the
standard's parsing rules (any of CRLF, LF or CR ends a line, a leading space after the colon is
dropped, several ``data:`` lines join with a newline, comments start with ``:``).
"""

from __future__ import annotations

import attrs

# A comment line: clients ignore it; it keeps proxies and NAT tables from closing an idle stream.
KEEPALIVE = b": keep-alive\n\n"


def encode_event(
    data: bytes, *, event_id: str | None = None, event: str | None = None, retry: int | None = None
) -> bytes:
    """One event: optional ``retry:``, ``event:`` and ``id:`` lines, a ``data:`` line, a blank line.

    Args:
        data: the payload, one line (compact JSON, or empty for a priming event).
        event_id: the event's id (what a client sends back as ``Last-Event-ID``).
        event: the event type (``"endpoint"``, ``"message"``); absent means ``message``.
        retry: milliseconds a client waits before reconnecting, or ``None``.

    Raises:
        ValueError: ``data``, ``event_id`` or ``event`` contains a line break.
    """
    parts = [] if retry is None else [b"retry: %d" % retry]
    if event is not None:
        parts.append(b"event: " + _field(event.encode()))
    if event_id is not None:
        parts.append(b"id: " + _field(event_id.encode()))
    parts.append(b"data: " + _field(data))
    return b"\n".join(parts) + b"\n\n"


def _field(value: bytes) -> bytes:
    if b"\n" in value or b"\r" in value:
        raise ValueError("an SSE field cannot contain a line break")
    return value


@attrs.frozen
class Event:
    """One decoded event.

    Attributes:
        data: the data lines joined with newlines (empty for a priming event, which is returned
            too, unlike a browser's EventSource, so that a client sees its id).
        event: the event type, ``"message"`` if none was given.
        event_id: the last event id seen on the stream so far (the standard's rule), or ``None``.
        retry: a reconnection delay in milliseconds sent with this event, or ``None``.
    """

    data: str
    event: str = "message"
    event_id: str | None = None
    retry: int | None = None


class EventDecoder:
    """Bytes of an event stream in, :class:`Event` objects out.

    Args:
        max_event_bytes: the longest event accepted (its lines together); a longer one raises
            :class:`ValueError`, since a stream with no limit lets a server exhaust memory.
    """

    def __init__(self, max_event_bytes: int) -> None:
        self._max = max_event_bytes
        self._buffer = bytearray()
        self._data: list[str] = []
        self._size = 0
        self._event = ""
        self._last_id: str | None = None
        self._retry: int | None = None
        self._pending_cr = False

    @property
    def last_event_id(self) -> str | None:
        """The last event id the stream set (for ``Last-Event-ID`` when reconnecting)."""
        return self._last_id

    def feed(self, chunk: bytes) -> list[Event]:
        """Take the next bytes; return the events they complete.

        Raises:
            ValueError: an event is longer than ``max_event_bytes``, or not UTF-8.
        """
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._pending_cr = False
        self._buffer += chunk
        events: list[Event] = []
        start = 0
        buffer = self._buffer
        while True:
            end = _line_end(buffer, start)
            if end < 0:
                break
            line = bytes(buffer[start:end])
            start = end + 1
            if buffer[end] == 0x0D:  # CR: a following LF belongs to it
                if start < len(buffer):
                    if buffer[start] == 0x0A:
                        start += 1
                else:
                    self._pending_cr = True
            event = self._line(line)
            if event is not None:
                events.append(event)
        del buffer[:start]
        if self._size + len(buffer) > self._max:
            raise ValueError(f"an SSE event longer than {self._max} bytes")
        return events

    def _line(self, raw: bytes) -> Event | None:
        try:
            line = raw.decode()
        except UnicodeDecodeError:
            raise ValueError("an SSE line that is not UTF-8") from None
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._size += len(raw)
            if self._size > self._max:
                raise ValueError(f"an SSE event longer than {self._max} bytes")
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._last_id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch(self) -> Event | None:
        data, event, retry = self._data, self._event, self._retry
        self._data, self._event, self._retry, self._size = [], "", None, 0
        if not data:
            return Event("", "message", self._last_id, retry) if retry is not None else None
        return Event("\n".join(data), event or "message", self._last_id, retry)


def _line_end(buffer: bytearray, start: int) -> int:
    newline = buffer.find(b"\n", start)
    carriage = buffer.find(b"\r", start, newline if newline >= 0 else len(buffer))
    return carriage if carriage >= 0 else newline
