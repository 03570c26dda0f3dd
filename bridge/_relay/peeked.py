"""A channel whose first messages were read ahead, handed out again before the rest."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import final

import trio

from channels import CloseReason, JSONObject, MessageChannel, ProtocolError

from .wrapped import WrappedChannel


@final
class PeekedChannel(WrappedChannel):
    """Wraps ``channel`` after ``items`` were received from it, and hands them out again first.

    ``items`` are messages, or the :class:`~channels.ProtocolError` of a bad one, in order; they
    come out of :meth:`receive` before anything else. Everything else is the wrapped channel's;
    closing this closes it.
    """

    def __init__(self, channel: MessageChannel, items: Iterable[JSONObject | ProtocolError]) -> None:
        super().__init__(channel)
        self._items = deque(items)

    def _next_item(self) -> JSONObject:
        item = self._items.popleft()
        if isinstance(item, ProtocolError):
            raise item
        return item

    async def receive(self) -> JSONObject:
        """The read-ahead items first, then the wrapped channel's messages."""
        if self._items:
            await trio.lowlevel.checkpoint()
            return self._next_item()
        return await self._channel.receive()

    def receive_nowait(self) -> JSONObject:
        """The read-ahead items first, then what the wrapped channel holds."""
        if self._items:
            return self._next_item()
        return self._channel.receive_nowait()

    async def receive_batch_lines(
        self, max_count: int
    ) -> tuple[list[JSONObject | ProtocolError], list[bytes | None]]:
        """The read-ahead items first (without lines), then the wrapped channel's batches and lines."""
        if self._items:
            return await super().receive_batch_lines(max_count)
        return await self._channel.receive_batch_lines(max_count)

    async def send_lines(self, messages: Sequence[JSONObject], lines: Sequence[bytes | None]) -> None:
        """Send on the wrapped channel, with the lines."""
        await self._channel.send_lines(messages, lines)

    async def aclose(self) -> None:
        """Forget the read-ahead items and close the wrapped channel."""
        self._items.clear()
        await self._channel.aclose()

    async def aclose_with(self, reason: CloseReason, detail: str = "") -> None:
        """Forget the read-ahead items and close the wrapped channel, saying why."""
        self._items.clear()
        await self._channel.aclose_with(reason, detail)
