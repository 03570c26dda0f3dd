"""The write path of a WebSocket channel: whole frames in one write, the lock that keeps them whole.

:class:`FrameSender` is the base :class:`~channels._ws.channel.WebSocketChannel` builds on, never
used alone. A server writes its unmasked text frames itself (:func:`~channels._ws.frames.text_frame_header`);
a client's masked frames, pings, pongs and the close frame are the ``websockets`` library's. Every
write first goes to the socket synchronously (:func:`~channels._core.fdio.write_now`) and only
what the kernel did not take waits in ``send_all``, in 64 KiB pieces each under
:attr:`send_timeout` (a bound on time without progress, not on the whole write).
"""

from __future__ import annotations

from collections.abc import Sequence

import trio
from websockets.protocol import Protocol, Side, State

from .._core.channel import MessageChannel
from .._core.errors import InvalidMessage, SendTimeout
from .._core.fdio import send_all_progressing, send_fd_getter, write_now
from .._core.jsonrpc import JSONObject, encode, validate
from .._core.lock import HandoffLock
from .frames import text_frame_header


class FrameSender(MessageChannel):
    """The write side of :class:`~channels._ws.channel.WebSocketChannel`, its base class.

    Args:
        stream: the connection; the channel owns it and closes it.
        protocol: the ``websockets`` protocol object, past its opening handshake.

    Attributes:
        send_timeout: see :attr:`MessageChannel.send_timeout`; ``None`` (no limit) at first.
    """

    __slots__ = (
        "_closed",
        "_protocol",
        "_send_fd",
        "_sending",
        "_server_side",
        "_stream",
        "_write_broken",
        "_write_lock",
        "bytes_sent",
        "send_timeout",
    )

    def __init__(self, stream: trio.abc.Stream, protocol: Protocol) -> None:
        self._stream = stream
        self._protocol = protocol
        self.send_timeout: float | None = None
        self._send_fd = send_fd_getter(stream)
        # The shortcuts of _wsframes read masked frames and write unmasked ones: a server's.
        self._server_side = protocol.side is Side.SERVER
        self._closed = False
        self._sending = False
        # Data frames, pings, pongs and the close frame must not interleave.
        self._write_lock = HandoffLock()
        self._write_broken = False
        self.bytes_sent = 0

    async def _send_batch(self, messages: Sequence[JSONObject]) -> bool:
        if self._sending:
            raise trio.BusyResourceError("another task is already sending on this channel")
        for message in messages:
            try:
                validate(message)
            except InvalidMessage as exc:
                raise ValueError(f"not a JSON-RPC message: {exc}") from None
        self._sending = True
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
            self._check_sendable()
            if not self._server_side:  # a client masks its frames: the library's job
                for message in messages:
                    self._protocol.send_text(encode(message, newline=False))
                return await self._write(b"".join(self._protocol.data_to_send()))
            frames: list[bytes] = []
            for message in messages:
                payload = encode(message, newline=False)
                frames += (text_frame_header(len(payload)), payload)
            return await self._write(b"".join(frames))
        finally:
            self._sending = False

    def _check_sendable(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError("channel was closed")
        if self._write_broken:
            raise trio.BrokenResourceError("an earlier send failed or timed out")
        if self._protocol.state is not State.OPEN:
            raise trio.BrokenResourceError("the connection is closing")

    async def _flush(self, data: list[bytes]) -> None:
        """Write what the protocol has queued (``data_to_send()``: a pong, a close frame, EOF)."""
        if data and not self._write_broken:
            try:
                # b"" is the protocol's cue to end TCP (SEND_EOF).
                await self._write(b"".join(data), eof=b"" in data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the reading side will find out

    async def _write(self, data: bytes, *, eof: bool = False) -> bool:
        """Write ``data`` whole, then half-close TCP if ``eof``; True if that had to wait.

        Holds the write lock throughout, so that no other write, and no EOF, can come between
        the parts of a frame.
        """
        if not data and not eof:
            return False
        await self._write_lock.acquire()
        try:
            sent = write_now(self._send_fd, data)
            if sent < len(data):
                try:
                    await self._write_rest(memoryview(data)[sent:])
                except BaseException:
                    # Cancelled or failed part-way: part of a frame may be on the wire, and no
                    # frame may follow it.
                    self._write_broken = True
                    raise
            self.bytes_sent += len(data)
            if eof and isinstance(self._stream, trio.abc.HalfCloseableStream):
                await self._stream.send_eof()
            return sent < len(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._write_broken = True
            if self._closed:
                raise trio.ClosedResourceError("channel was closed") from None
            raise
        finally:
            self._write_lock.release()

    async def _write_rest(self, data: memoryview) -> None:
        # send_timeout bounds the time without progress, not the whole write: a peer reading a
        # large frame slowly but steadily is not too slow (docs/design.md §6).
        if await send_all_progressing(self._stream, data, self.send_timeout):
            # Part of a frame may be on the wire: nothing may follow it, not even a close frame.
            self._write_broken = True
            await trio.aclose_forcefully(self._stream)
            raise SendTimeout(f"the peer accepted nothing for {self.send_timeout:g}s")
