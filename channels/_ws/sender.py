"""The write path of a WebSocket channel: whole frames in one write, the lock that keeps them whole.

:class:`FrameSender` is the base :class:`~channels._ws.channel.WebSocketChannel` builds on, never
used alone. A server writes its unmasked text frames itself (:func:`~channels._ws.frames.text_frame_header`);
a client's masked frames, pings, pongs and the close frame are the ``websockets`` library's. Every
write first goes to the socket synchronously (:func:`~channels._core.fdio.write_now`) and only
what the kernel did not take waits, each wait for room in the socket under :attr:`send_timeout`
(a bound on time without progress, not on the whole write). A large payload is written after its
header from where it lies (``writev``), never copied into one buffer with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import trio
from websockets.protocol import Protocol, Side, State

from .._core.channel import MessageChannel
from .._core.errors import InvalidMessage, SendTimeout
from .._core.fdio import send_all_progressing, send_fd_getter, write_now, writev_now
from .._core.jsonrpc import JSONObject, encode, validate
from .._core.lock import HandoffLock
from .frames import LENGTH_7_MAX, text_frame_header

# A payload this large is written from where it lies, after the frames before it, by one writev
# (copying it into one buffer with its header cost a copy of the whole message). Below it, joining
# is cheaper than the extra buffers: one read's worth (channels/_core/fdio.py RECEIVE_SIZE).
LARGE_PAYLOAD_BYTES = 65536
# The header of every text frame short enough for a 7-bit length (RFC 6455 §5.2), made once: a
# relay's replies are mostly that short, and a lookup costs less than a call per frame.
SHORT_HEADERS = tuple(text_frame_header(size) for size in range(LENGTH_7_MAX + 1))


def _payload(message: JSONObject) -> bytes:
    """The text frame payload for ``message``: its checked encoding."""
    try:
        validate(message)
    except InvalidMessage as exc:
        raise ValueError(f"not a JSON-RPC message: {exc}") from None
    return encode(message, newline=False)


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

    async def _send_batch(
        self, messages: Sequence[JSONObject], lines: Sequence[bytes | None] | None = None
    ) -> bool:
        """Write ``messages``, one text frame each; True if that had to wait for the transport.

        ``lines[i]``, where given and not ``None``, is the payload for ``messages[i]`` as is,
        unchecked (:meth:`~channels.MessageChannel.send_lines`); every other message is checked
        and encoded, all before anything is written.
        """
        if self._sending:
            raise trio.BusyResourceError("another task is already sending on this channel")
        if lines is None:
            lines = (None,) * len(messages)
        elif len(lines) != len(messages):
            raise ValueError(f"{len(lines)} lines for {len(messages)} messages")
        payloads = [
            _payload(message) if line is None else line for message, line in zip(messages, lines, strict=True)
        ]
        self._sending = True
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
            self._check_sendable()
            if not self._server_side:  # a client masks its frames: the library's job
                for payload in payloads:
                    self._protocol.send_text(payload)
                return await self._write(b"".join(self._protocol.data_to_send()))
            parts: list[bytes] = []  # small frames joined; each large payload on its own
            frames: list[bytes] = []
            for payload in payloads:
                size = len(payload)
                if size <= LENGTH_7_MAX:
                    frames += (SHORT_HEADERS[size], payload)
                elif size < LARGE_PAYLOAD_BYTES:
                    frames += (text_frame_header(size), payload)
                else:
                    frames.append(text_frame_header(size))
                    parts += (b"".join(frames), payload)
                    frames = []
            if not parts:
                return await self._write(b"".join(frames))
            if frames:
                parts.append(b"".join(frames))
            return await self._write(parts)
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

    async def _write(self, data: bytes | list[bytes], *, eof: bool = False) -> bool:
        """Write ``data`` whole, then half-close TCP if ``eof``; True if that had to wait.

        ``data`` is bytes, or a list of parts written in turn (one ``writev``). Holds the write
        lock throughout, so that no other write, and no EOF, can come between the parts of a frame.
        """
        size = len(data) if isinstance(data, bytes) else sum(map(len, data))
        if not size and not eof:
            return False
        await self._write_lock.acquire()
        try:
            if isinstance(data, bytes):
                sent = write_now(self._send_fd, data)
            else:
                sent = writev_now(self._send_fd, data)
            if sent < size:
                try:
                    await self._write_parts_rest(data, sent)
                except BaseException:
                    # Cancelled or failed part-way: part of a frame may be on the wire, and no
                    # frame may follow it.
                    self._write_broken = True
                    raise
            self.bytes_sent += size
            if eof and isinstance(self._stream, trio.abc.HalfCloseableStream):
                await self._stream.send_eof()
            return sent < size
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._write_broken = True
            if self._closed:
                raise trio.ClosedResourceError("channel was closed") from None
            raise
        finally:
            self._write_lock.release()

    async def _write_parts_rest(self, data: bytes | list[bytes], sent: int) -> None:
        """Write what follows the first ``sent`` bytes of ``data`` (or of its parts, in turn)."""
        for part in [data] if isinstance(data, bytes) else data:
            if sent < len(part):
                await self._write_rest(memoryview(part)[sent:])
            sent = max(0, sent - len(part))

    async def _write_rest(self, data: memoryview) -> None:
        # send_timeout bounds the time without progress, not the whole write: a peer reading a
        # large frame slowly but steadily is not too slow (docs/design.md §6).
        if self._send_fd is not None:
            timed_out = await self._write_as_room_frees(self._send_fd, data)
        else:  # TLS: the stream's send_all, in pieces
            timed_out = await send_all_progressing(self._stream, data, self.send_timeout)
        if timed_out:
            # Part of a frame may be on the wire: nothing may follow it, not even a close frame.
            self._write_broken = True
            await trio.aclose_forcefully(self._stream)
            raise SendTimeout(f"the peer accepted nothing for {self.send_timeout:g}s")

    async def _write_as_room_frees(self, send_fd: Callable[[], int], data: memoryview) -> bool:
        """Write ``data`` to a plain socket as the kernel makes room, as much as it takes each time.

        Each wait for room is bounded by :attr:`send_timeout`: True if one ran out (part of
        ``data`` may then be on the wire). A write with ``send_all`` in 64 KiB pieces, each under
        its own deadline, made a send call and a cancel scope per piece.
        """
        timeout = math.inf if self.send_timeout is None else self.send_timeout
        while data:
            fd = send_fd()
            if fd < 0:
                raise trio.ClosedResourceError("stream was closed")
            with trio.move_on_after(timeout) as waited:
                await trio.lowlevel.wait_writable(fd)  # a close elsewhere wakes it: ClosedResourceError
            if waited.cancelled_caught:
                return True
            data = data[write_now(send_fd, data) :]
        return False
