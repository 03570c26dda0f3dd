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

    When the connection ends, the relay calls :meth:`finish_write` before cancelling its tasks, so
    that a write in progress is not cut half-way (which would leave part of a line on the wire and
    nothing more could be written: the requests in flight would go unanswered), then
    :meth:`resume` for its own answers.

    Args:
        client: the client's channel; its owner closes it.
        send_timeout: the client channel's ``send_timeout`` (for the log line of a slow client, and
            the bound of :meth:`finish_write`).
        end: records why the connection ended (the first call wins).
        touch: notes traffic to the client (for the idle timeout).
    """

    client: MessageChannel
    send_timeout: float
    end: Callable[[Ending], None]
    touch: Callable[[], None] = attrs.field(default=lambda: None, kw_only=True)
    _lock: HandoffLock = attrs.field(init=False, factory=HandoffLock)
    # A write failed or was cut half-way: nothing may be written to the client any more.
    _broken: bool = attrs.field(init=False, default=False)
    # The connection has ended: no write may start until resume() (see finish_write).
    _held: bool = attrs.field(init=False, default=False)
    _writing: bool = attrs.field(init=False, default=False)
    _write_ended: trio.Event | None = attrs.field(init=False, default=None)

    async def reply(self, message: JSONObject) -> bool:
        """Send one reply written by the bridge itself."""
        return await self.send([message])

    async def send(self, messages: list[JSONObject], lines: list[bytes | None] | None = None) -> bool:
        """Write to the client; False if the client is gone or was given up on.

        ``lines``, if given, are the lines the messages arrived as, for those forwarded unchanged
        (:meth:`~channels.MessageChannel.send_lines`).

        Waits while the client does not read (backpressure), at most ``send_timeout`` per write
        (the client channel's own timeout, armed only when a write has to wait), and while another
        write is in progress. Between :meth:`finish_write` and :meth:`resume` it waits until
        cancelled: the relay is cancelling its tasks, and what they had to write is answered by
        the relay instead.

        A write cancelled half-way may have left part of a line on the wire; nothing is written to
        that client after it, since the next byte would corrupt the framing.
        """
        if self._broken:
            return False
        await self._lock.acquire()  # free: no trip through the scheduler
        try:
            if self._broken:
                return False
            if self._held:
                await trio.sleep_forever()
            self._writing = True
            completed = False
            try:
                if lines is None:
                    await self.client.send_many(messages)
                else:
                    await self.client.send_lines(messages, lines)
                completed = True
            finally:
                # A write that failed or was cut half-way breaks the connection. Set only then, not
                # for the length of every write: a write asked for meanwhile waits for the lock,
                # and must not take the one in progress for a broken connection (and drop its
                # messages, a refusal or a timeout's error among them).
                self._broken = not completed
                self._writing = False
                if self._write_ended is not None:
                    self._write_ended.set()
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

    async def finish_write(self) -> None:
        """Start no more writes, and wait for the one in progress, if any, to end.

        For at most ``send_timeout``: a client that has not read the rest by then is too slow, and
        the write is cut when the caller cancels it (the client then gets nothing more). Writes
        asked for from now on wait until cancelled (:meth:`send`), until :meth:`resume`.
        """
        self._held = True
        if self._writing:
            ended = self._write_ended = trio.Event()
            with trio.move_on_after(self.send_timeout):
                await ended.wait()

    def resume(self) -> None:
        """Let writes start again after :meth:`finish_write` (the relay's own answers)."""
        self._held = False


@attrs.define(eq=False)
class ChildWriter:
    """Writes to the child's stdin, one batch at a time.

    Args:
        channel: the child's channel; the child's owner closes it.
    """

    channel: MessageChannel
    _lock: HandoffLock = attrs.field(init=False, factory=HandoffLock)

    async def send(self, messages: list[JSONObject], lines: list[bytes | None] | None = None) -> bool:
        """Write to the child (waiting while it does not read); False if its stdin is closed.

        ``lines`` as for :meth:`ClientWriter.send`.
        """
        await self._lock.acquire()  # free: no trip through the scheduler
        try:
            if lines is None:
                await self.channel.send_many(messages)
            else:
                await self.channel.send_lines(messages, lines)
            return True
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        finally:
            self._lock.release()
