"""A channel whose first messages were read ahead, handed out again before the rest."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import final

import trio

from channels import CloseReason, JSONObject, MessageChannel, PeerInfo, ProtocolError


@final
class PeekedChannel(MessageChannel):
    """Wraps ``channel`` after ``items`` were received from it, and hands them out again first.

    ``items`` are messages, or the :class:`~channels.ProtocolError` of a bad one, in order; they
    come out of :meth:`receive` before anything else. Everything else is the wrapped channel's;
    closing this closes it.
    """

    def __init__(self, channel: MessageChannel, items: Iterable[JSONObject | ProtocolError]) -> None:
        self._channel = channel
        self._items = deque(items)

    @property
    def peer(self) -> PeerInfo:
        return self._channel.peer

    @property
    def send_timeout(self) -> float | None:
        return self._channel.send_timeout

    @send_timeout.setter
    def send_timeout(self, value: float | None) -> None:
        self._channel.send_timeout = value

    def _next_item(self) -> JSONObject:
        item = self._items.popleft()
        if isinstance(item, ProtocolError):
            raise item
        return item

    async def receive(self) -> JSONObject:
        if self._items:
            await trio.lowlevel.checkpoint()
            return self._next_item()
        return await self._channel.receive()

    def receive_nowait(self) -> JSONObject:
        if self._items:
            return self._next_item()
        return self._channel.receive_nowait()

    async def send(self, value: JSONObject) -> None:
        await self._channel.send(value)

    async def send_many(self, messages: Sequence[JSONObject]) -> None:
        await self._channel.send_many(messages)

    async def send_eof(self) -> None:
        await self._channel.send_eof()

    async def aclose(self) -> None:
        self._items.clear()
        await self._channel.aclose()

    async def aclose_with(self, reason: CloseReason, detail: str = "") -> None:
        self._items.clear()
        await self._channel.aclose_with(reason, detail)
