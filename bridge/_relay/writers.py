"""The relay's two writers, one per end (client and child), each under a lock; and ``BATCH``.

There is no queue between the relay's pumps and the client: each pump writes its batch itself
through the one :class:`ClientWriter` of the connection (the child's replies and the bridge's own
errors share the connection). Writes to the child (client messages, cancellations of requests that
timed out) share the one :class:`ChildWriter`.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import trio

from channels import HandoffLock, JSONObject, MessageChannel, SendTimeout

from .ending import CLIENT_GONE, Ending

# Most messages moved per read or write: one system call carries a whole pipelined burst, while a
# flood of small messages still yields to other connections regularly.
BATCH = 64


@attrs.define(eq=False)
class ClientWriter:
    """Writes to the client, one batch at a time; ends the connection when that fails.

    Args:
        client: the client's channel; its owner closes it.
        send_timeout: the client channel's ``send_timeout`` (for the log line of a slow client).
        end: records why the connection ended (the first call wins).
        touch: notes traffic to the client (for the idle timeout).
    """

    client: MessageChannel
    send_timeout: float
    end: Callable[[Ending], None]
    touch: Callable[[], None] = attrs.field(default=lambda: None, kw_only=True)
    _lock: HandoffLock = attrs.field(init=False, factory=HandoffLock)
    _writable: bool = attrs.field(init=False, default=True)

    async def reply(self, message: JSONObject) -> bool:
        """Send one reply written by the bridge itself."""
        return await self.send([message])

    async def send(self, messages: list[JSONObject]) -> bool:
        """Write to the client; False if the client is gone or was given up on.

        Waits while the client does not read (backpressure), at most ``send_timeout`` per write
        (the client channel's own timeout, armed only when a write has to wait).

        A write cancelled half-way may have left part of a line on the wire; nothing is written to
        that client after it, since the next byte would corrupt the framing.
        """
        if not self._writable:
            return False
        await self._lock.acquire()  # free: no trip through the scheduler
        try:
            if not self._writable:
                return False
            self._writable = False  # until the write has completed
            await self.client.send_many(messages)
            self._writable = True
            self.touch()
            return True
        except SendTimeout:
            self.end(
                Ending(
                    f"client read nothing for {self.send_timeout}s", "client-too-slow", answers_unread=False
                )
            )
            return False
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.end(CLIENT_GONE)
            return False
        finally:
            self._lock.release()


@attrs.define(eq=False)
class ChildWriter:
    """Writes to the child's stdin, one batch at a time.

    Args:
        channel: the child's channel; the child's owner closes it.
    """

    channel: MessageChannel
    _lock: HandoffLock = attrs.field(init=False, factory=HandoffLock)

    async def send(self, messages: list[JSONObject]) -> bool:
        """Write to the child (waiting while it does not read); False if its stdin is closed."""
        await self._lock.acquire()  # free: no trip through the scheduler
        try:
            await self.channel.send_many(messages)
            return True
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        finally:
            self._lock.release()
