"""``--tap FILE``: a JSON Lines record of every message between the bridge and its clients.

For debugging a misbehaving server or client: each line is ``{"time": ..., "direction": "in" |
"out", "client": "unix /run/mcp.sock pid=123 uid=1000 gid=1000 #4", "message": {...}}``, where
``in`` is a message the client sent (as decoded, before the bridge routed it) and ``out`` one it
was sent (the child's replies and notifications, and the bridge's own errors). Off by default; the
file is written synchronously, line by line, so use it for debugging, not in production.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from typing import IO, final

import attrs

from channels import JSONObject, MessageChannel

from .wrapped import WrappedChannel

logger = logging.getLogger("bridge.tap")


@attrs.define(eq=False)
class Tap:
    """Where tapped messages go.

    Args:
        file: a text file opened for writing; the tap writes and flushes it, the caller closes it.
    """

    file: IO[str]
    _connections: int = attrs.field(init=False, default=0)
    broken: bool = attrs.field(init=False, default=False)
    """A write failed: nothing more is recorded."""

    def channel(self, channel: MessageChannel) -> TappedChannel:
        """``channel``, recording what crosses it (one more connection number)."""
        self._connections += 1
        return TappedChannel(channel, self, f"{channel.peer} #{self._connections}")

    def record(self, direction: str, client: str, messages: Sequence[JSONObject]) -> None:
        """Write one line per message.

        A failed write (a full disk...) turns the tap off, with one error logged: debugging
        output must never cost a client its connection.
        """
        if self.broken:
            return
        now = time.time()
        try:
            for message in messages:
                line = {"time": now, "direction": direction, "client": client, "message": message}
                self.file.write(json.dumps(line, ensure_ascii=False, default=repr) + "\n")
            self.file.flush()
        except OSError as exc:
            self.broken = True
            logger.error("--tap: writing failed (%s); the tap is off from now on", exc)


@final
class TappedChannel(WrappedChannel):
    """Wraps a channel (and owns it from then on); records every message received and sent."""

    def __init__(self, channel: MessageChannel, tap: Tap, client: str) -> None:
        super().__init__(channel)
        self._tap = tap
        self._client = client

    async def receive(self) -> JSONObject:
        """Receive from the wrapped channel and record it (``in``)."""
        message = await self._channel.receive()
        self._tap.record("in", self._client, [message])
        return message

    def receive_nowait(self) -> JSONObject:
        """Take a buffered message from the wrapped channel and record it (``in``)."""
        message = self._channel.receive_nowait()
        self._tap.record("in", self._client, [message])
        return message

    async def send(self, value: JSONObject) -> None:
        """Record the message (``out``) and send it on the wrapped channel."""
        self._tap.record("out", self._client, [value])
        await self._channel.send(value)

    async def send_many(self, messages: Sequence[JSONObject]) -> None:
        """Record the messages (``out``) and send them on the wrapped channel."""
        self._tap.record("out", self._client, messages)
        await self._channel.send_many(messages)
