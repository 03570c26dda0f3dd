"""A channel made in this process (not accepted from a socket), as an :class:`Incoming`.

The HTTP listener hands the bridge each session, request or SSE stream this way, and the bridge's
connection handler wraps a 2026-07-28 exchange it cannot serve in the POST's own task the same way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import final

import attrs

from .channel import MessageChannel, PeerInfo
from .listener import Incoming


@final
@attrs.define(eq=False)
class VirtualIncoming(Incoming):
    """A channel already established, for the bridge to serve.

    The bridge owns it as any :class:`Incoming`; :meth:`establish` yields the channel at once (its
    maker already did the checks) and closes it when the block ends.
    """

    channel: MessageChannel

    @property
    def peer(self) -> PeerInfo:
        return self.channel.peer

    @asynccontextmanager
    async def establish(self) -> AsyncIterator[MessageChannel]:
        try:
            yield self.channel
        finally:
            await self.channel.aclose()

    async def aclose(self) -> None:
        await self.channel.aclose()
