"""A channel that passes everything to another one: the base of the bridge's channel wrappers."""

from __future__ import annotations

from collections.abc import Sequence

from channels import CloseReason, JSONObject, MessageChannel, PeerInfo


class WrappedChannel(MessageChannel):
    """Delegates every operation to ``channel``, which it owns from then on.

    Closing this closes it. Subclasses override what they observe or change: receiving, sending.
    """

    def __init__(self, channel: MessageChannel) -> None:
        self._channel = channel

    @property
    def peer(self) -> PeerInfo:
        """The wrapped channel's peer."""
        return self._channel.peer

    @property
    def bytes_received(self) -> int:  # type: ignore[override]
        """The wrapped channel's count of bytes read."""
        return self._channel.bytes_received

    @property
    def bytes_sent(self) -> int:  # type: ignore[override]
        """The wrapped channel's count of bytes written."""
        return self._channel.bytes_sent

    @property
    def idle_timeout(self) -> float | None:  # type: ignore[override]
        """The wrapped channel's idle timeout."""
        return self._channel.idle_timeout

    @property
    def one_request(self) -> bool:  # type: ignore[override]
        """Whether the wrapped channel carries a single request."""
        return self._channel.one_request

    @property
    def send_timeout(self) -> float | None:
        """The wrapped channel's send timeout (setting it sets theirs)."""
        return self._channel.send_timeout

    @send_timeout.setter
    def send_timeout(self, value: float | None) -> None:
        self._channel.send_timeout = value

    async def receive(self) -> JSONObject:
        """Receive from the wrapped channel."""
        return await self._channel.receive()

    def receive_nowait(self) -> JSONObject:
        """Take a message the wrapped channel already holds."""
        return self._channel.receive_nowait()

    async def send(self, value: JSONObject) -> None:
        """Send on the wrapped channel."""
        await self._channel.send(value)

    async def send_many(self, messages: Sequence[JSONObject]) -> None:
        """Send several on the wrapped channel."""
        await self._channel.send_many(messages)

    async def send_eof(self) -> None:
        """Half-close the wrapped channel."""
        await self._channel.send_eof()

    async def aclose(self) -> None:
        """Close the wrapped channel."""
        await self._channel.aclose()

    async def aclose_with(self, reason: CloseReason, detail: str = "") -> None:
        """Close the wrapped channel, telling the peer why where it can."""
        await self._channel.aclose_with(reason, detail)
