"""Reading MCP messages from an HTTP event stream, and where to resume it from."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs

from ..sse import Event, EventDecoder
from .conn import HttpConnection

DEFAULT_RECONNECT_DELAY = 1.0
"""Seconds before reconnecting an event stream when the server named no ``retry:`` delay (the SSE
standard leaves it to the client; browsers wait a few seconds)."""
MAX_RECONNECT_DELAY = 30.0
"""The longest wait between reconnection attempts of the standalone stream, which doubles from
:data:`DEFAULT_RECONNECT_DELAY` while the server stays unreachable."""


@attrs.define
class StreamPosition:
    """Where an event stream got to, for resuming it: the last event id and the ``retry:`` delay."""

    last_event_id: str | None = None
    retry: float | None = None

    def update(self, event: Event) -> None:
        if event.event_id is not None:
            self.last_event_id = event.event_id
        if event.retry is not None:
            self.retry = event.retry / 1000


async def read_stream(
    conn: HttpConnection,
    max_event_bytes: int,
    position: StreamPosition,
    take: Callable[[str], Awaitable[bool]],
) -> None:
    """Feed an event stream's messages to ``take`` until it returns True or the stream ends.

    Priming events (an id and no data) and events of other types only move ``position``.

    Raises:
        ValueError: an event over ``max_event_bytes``, or not UTF-8 (the stream is unusable).
        HttpFailure: the connection failed.
    """
    decoder = EventDecoder(max_event_bytes)
    while chunk := await conn.receive_data():
        stop = False
        for event in decoder.feed(chunk):
            position.update(event)
            if event.data and event.event == "message" and not stop:
                stop = await take(event.data)
        if stop:
            return


def reconnect_delay(position: StreamPosition, failures: int) -> float:
    """The server's ``retry:`` delay, or ours, doubled for each consecutive failure."""
    base = position.retry if position.retry is not None else DEFAULT_RECONNECT_DELAY
    return min(base * 2 ** max(0, failures - 1), max(base, MAX_RECONNECT_DELAY)) if failures else base
