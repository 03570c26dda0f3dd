"""The legacy handshake the bridge owns in shared mode: the first client's ``initialize``, cached.

The first client's ``initialize`` goes to the child; its result is cached and every later
client's ``initialize`` is answered from it (the protocol version the first client negotiated
applies to all). Only the first ``notifications/initialized`` reaches the child. After a restart
the cached ``initialize`` (and ``initialized``) is replayed to the new child before any client
message, so that legacy clients need not notice.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import trio

from channels import JSONObject

from .._child.process import ChildProcess
from .._errors import CONNECTION_CLOSED, error_response
from .router import ClientKey

logger = logging.getLogger("bridge.shared")

# A later client's initialize waits this long for the first one's handshake to finish.
HANDSHAKE_TIMEOUT = 30.0
# The id of the handshake the bridge replays to a restarted child (never a wire id: those are ints).
REPLAY_ID = "mcp-bridge-handshake"


@attrs.define(eq=False)
class Handshake:
    """The legacy handshake the bridge owns: the first client's, cached for everyone.

    Admission fills it in (``wire_id``, ``params``, ``initialized_sent``); the child's reader
    reports the child's answers to it (:meth:`answered`, :meth:`replay_answered`).

    Args:
        name: the child's name, for the log.
        deliver: queues a message for a client.
    """

    name: str
    _deliver: Callable[[ClientKey, JSONObject, int], None]
    wire_id: int | None = attrs.field(init=False, default=None)  # the first initialize, while at the child
    params: Any = attrs.field(init=False, default=None)
    result: Any = attrs.field(init=False, default=None)
    initialized_sent: bool = attrs.field(init=False, default=False)
    done: trio.Event = attrs.field(init=False, factory=trio.Event)
    _replayed: trio.Event = attrs.field(init=False, factory=trio.Event)
    _replay_reply: JSONObject | None = attrs.field(init=False, default=None)

    @property
    def taken(self) -> bool:
        """Whether the first client's ``initialize`` is at the child or answered.

        A later one is then answered from it (:meth:`answer`).
        """
        return self.result is not None or self.wire_id is not None

    def answered(self, message: JSONObject) -> None:
        """The child answered the first client's ``initialize`` (``wire_id``) with ``message``."""
        self._settle(message.get("result"))

    def child_gone(self) -> None:
        """The child went: a first ``initialize`` still at it failed with it.

        The later ones waiting for it (:meth:`answer`) are answered with an error now, not after
        :data:`HANDSHAKE_TIMEOUT`.
        """
        if self.wire_id is not None:
            self._settle(None)

    def _settle(self, result: Any) -> None:
        self.result = result
        self.wire_id = None
        self.done.set()
        if self.result is None:  # it failed: the next initialize tries again
            self.params = None
            self.initialized_sent = False
            self.done = trio.Event()

    def replay_answered(self, message: JSONObject) -> None:
        """The child answered the replayed ``initialize`` (id :data:`REPLAY_ID`) with ``message``."""
        self._replay_reply = message
        self._replayed.set()

    async def answer(self, client_key: ClientKey, request_id: Any) -> None:
        """Answer a later client's ``initialize`` from the cache (waiting, bounded, for the first)."""
        with trio.move_on_after(HANDSHAKE_TIMEOUT):
            await self.done.wait()
        if self.result is None:
            self._deliver(
                client_key,
                error_response(
                    request_id,
                    CONNECTION_CLOSED,
                    "Connection closed",
                    "handshake-failed",
                    detail="the first client's initialize did not succeed",
                ),
                256,
            )
        else:
            self._deliver(client_key, {"jsonrpc": "2.0", "id": request_id, "result": self.result}, 256)

    async def replay(
        self,
        child: ChildProcess,
        read_child: Callable[[ChildProcess], Awaitable[None]],
        send_to_child: Callable[[Sequence[JSONObject]], Awaitable[bool]],
    ) -> bool:
        """Send the cached initialize to a restarted child and wait for its result (bounded).

        ``read_child`` reads ``child`` meanwhile (it reports the reply to :meth:`replay_answered`);
        ``send_to_child`` writes to it. False if it did not answer in time or answered with an
        error.
        """
        self._replayed = trio.Event()
        self._replay_reply = None
        replay = {"jsonrpc": "2.0", "id": REPLAY_ID, "method": "initialize", "params": self.params}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        with trio.move_on_after(HANDSHAKE_TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(read_child, child)  # until the reply
                await send_to_child([replay])
                await self._replayed.wait()
                nursery.cancel_scope.cancel()
            if self._replay_reply is None or "error" in self._replay_reply:
                logger.error(
                    "[%s] the restarted child refused the replayed handshake: %s",
                    self.name,
                    self._replay_reply,
                )
                return False
            await send_to_child([initialized])
            return True
        return False
