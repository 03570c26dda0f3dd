"""The read path of a WebSocket channel: one read, whole frames to the library, text frames to messages.

:class:`FrameReceiver` is the base :class:`~channels._ws.channel.WebSocketChannel` builds on, never
used alone. A server reads the common frames (one whole message in one text frame) with
:func:`~channels._ws.frames.take_text_frames`, and hands the ``websockets`` library every other
whole frame; the start of an incomplete frame is held back, so that the library is always between
frames. What the library owes the peer after a read (a pong, the closing reply) is written at once,
through the write side it inherits from :class:`~channels._ws.sender.FrameSender`.

A frame larger than one read, on a plain socket, is read straight into a buffer of its own size
(:func:`~channels._core.fdio.receive_into`), as much as the kernel holds per read, instead of in
64 KiB pieces gathered and copied together. A simple text frame's payload is unmasked there, in
place, as each read brings it in; its text is then decoded from that buffer: the 16 MiB of a large
message are copied twice on the way in (by the kernel into the buffer, by the UTF-8 decoding out
of it), besides the unmasking's pass over cached bytes.
"""

from __future__ import annotations

from collections import deque

import trio
from websockets.frames import Frame, Opcode
from websockets.protocol import Protocol, State
from websockets.speedups import apply_mask  # the library's C unmasking

from .._core.channel import CloseReason
from .._core.fdio import RECEIVE_SIZE, receive_fd_getter, receive_into, receive_some
from .._core.jsonrpc import CANONICAL_LINE_LIMIT
from .frames import FINAL_TEXT, MASK_KEY_BYTES, MASKED, frame_extent, take_text_frames
from .sender import FrameSender

# Close codes that end a channel in order (EndOfChannel): normal, going away, and no status code
# (RFC 6455 §7.4.1). Any other code is an error close.
ORDERLY_CLOSE_CODES = frozenset({1000, 1001, 1005})
# A frame more than one read long (fdio's RECEIVE_SIZE) is read into a buffer of its size: gathering
# it in 64 KiB reads cost a bytearray grown read by read and a copy of the whole out of it.
LARGE_FRAME_BYTES = RECEIVE_SIZE
# A large frame is unmasked in pieces of this size, each copied back into place: apply_mask returns
# a new object, and one of 16 MiB would be another 16 MiB allocated and written (faulted in, unless
# the daemon's heap still holds pages freed by an earlier large message), where a piece of one
# read's size is reused and stays in the CPU's cache.
UNMASK_PIECE_BYTES = RECEIVE_SIZE


class FrameReceiver(FrameSender):
    """The read side of :class:`~channels._ws.channel.WebSocketChannel`, its base class.

    Args:
        stream: the connection; the channel owns it and closes it.
        protocol: the ``websockets`` protocol object, past its opening handshake.
        max_message_bytes: longest message accepted (also the protocol's ``max_size``).
        received: bytes that followed the opening handshake in its last read, read first.

    Attributes:
        max_message_bytes: the limit given to the constructor.
    """

    __slots__ = (
        "_drained",
        "_end",
        "_fragments",
        "_large",
        "_large_filled",
        "_large_key",
        "_large_payload",
        "_large_unmasked",
        "_messages",
        "_owed",
        "_partial",
        "_partial_size",
        "_read_started",
        "_reads",
        "_receive_fd",
        "_receiving",
        "bytes_received",
        "max_message_bytes",
    )

    def __init__(
        self, stream: trio.abc.Stream, protocol: Protocol, max_message_bytes: int, received: bytes
    ) -> None:
        super().__init__(stream, protocol)
        self.max_message_bytes = max_message_bytes
        self._receive_fd = receive_fd_getter(stream)
        # The start of a frame not complete yet, held back so that the library only ever gets
        # whole frames; and its full size, once its header is in (0 until then).
        self._partial = bytearray()
        self._partial_size = 0
        # A large frame (over LARGE_FRAME_BYTES, on a plain socket) being read into a buffer of its
        # size, and how much of it has arrived; None when no such frame is arriving.
        self._large: bytearray | None = None
        self._large_filled = 0
        # When the large frame is a simple text frame (the kind take_text_frames takes), its mask
        # key, else None (the library will read it whole); where its payload starts in the buffer,
        # and how far it has been unmasked (in place, as it arrives, while still in the CPU's cache).
        self._large_key: bytes | None = None
        self._large_payload = 0
        self._large_unmasked = 0
        # Whole text messages, UTF-8 checked: their bytes (what decode_line needs), or their text
        # when they are too long for decode_line's canonical check and already had to be decoded.
        self._messages: deque[bytes | str] = deque()
        self._fragments: list[bytes] | None = None
        # Why the connection ended: receive raises a copy of it once the messages run out (see
        # _ended), never it, whose traceback would hold the frames of the channel's readers.
        self._end: Exception | None = None
        self._receiving = False
        # For keepalive: reads started so far, and the number of the one waiting for bytes (0 when
        # none is): a counter, not a clock, so that a read costs no call to trio.current_time().
        self._reads = 0
        self._read_started = 0
        self.bytes_received = 0
        # The last read returned less than it asked for: the kernel's buffer was empty, so the next
        # read of frames waits for bytes first instead of failing with EAGAIN (receive_some's
        # wait_first): one system call and exception less per message a relay forwards.
        self._drained = False
        # Whether the library owes the peer something (a pong, a closing reply) for frames that
        # came with the handshake: written before the first read.
        self._owed = False
        if received:
            self._receive_bytes(received)
            self._take_events()
            self._owed = True

    async def _read(self) -> None:
        """One read: feed it to the protocol and collect messages.

        Then write what the protocol owes the peer (pongs, the closing handshake).
        """
        if self._owed:
            self._owed = False
            await self._flush(self._protocol.data_to_send())
        self._reads += 1
        self._read_started = self._reads
        large, receive_fd = self._large, self._receive_fd  # (a large frame implies a plain fd)
        data: bytes | bytearray = b""
        try:
            if large is not None and receive_fd is not None:
                # The frame's last read also takes what follows it, up to a read's size, as a
                # read of RECEIVE_SIZE would: the peer's writes are drained no less eagerly.
                spill = bytearray(RECEIVE_SIZE if len(large) - self._large_filled < RECEIVE_SIZE else 0)
                asked = len(large) - self._large_filled + len(spill)
                # Straight away even after a short read: mid-frame the peer is still writing, and
                # the kernel has usually taken more by now (an echo of 16 MiB did not pay for waiting).
                received = await receive_into(receive_fd, (memoryview(large)[self._large_filled :], spill))
            else:
                large = None
                asked = RECEIVE_SIZE
                data = await receive_some(self._stream, receive_fd, wait_first=self._drained)
                received = len(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            if self._closed:
                raise trio.ClosedResourceError("channel was closed") from None
            if self._end is None:
                self._end = trio.BrokenResourceError(f"connection lost: {exc}")
            return
        finally:
            self._read_started = 0
        self.bytes_received += received
        self._drained = received < asked  # a short read emptied the kernel's buffer
        if not received:
            self._receive_eof()
        elif large is None:
            self._receive_bytes(data)
        else:
            taken = min(received, len(large) - self._large_filled)
            self._large_arrived(taken)
            if received > taken:
                del spill[received - taken :]  # what followed the frame
                self._take_events()  # the library's view of the frame, before the next one's
                self._receive_bytes(spill)
        self._take_events()
        pending = self._protocol.data_to_send()
        if pending:  # a pong, a close frame, the end of TCP
            await self._flush(pending)

    def _receive_eof(self) -> None:
        """The end of the stream: a frame cut short goes to the library, which says what that means."""
        protocol = self._protocol
        if self._large is not None:  # (its payload, maybe partly unmasked, will not be read)
            self._partial = self._large[: self._large_filled]
            self._large = self._large_key = None
        if self._partial:
            protocol.receive_data(bytes(self._partial))
            self._partial.clear()
        protocol.receive_eof()

    def _take_events(self) -> None:
        """Collect the messages in the frames the library has parsed, and notice the end."""
        protocol = self._protocol
        for event in protocol.events_received():
            if self._end is None and isinstance(event, Frame):
                if event.opcode is Opcode.TEXT and event.fin and self._fragments is None:
                    data = event.data  # a whole message in one frame
                    self._text(data if isinstance(data, bytes) else bytes(data))
                else:
                    self._frame(event)
        if self._end is None and protocol.state is not State.OPEN:
            self._end = self._ending()

    def _receive_bytes(self, data: bytes | bytearray) -> None:
        """Take the simple text frames at the front, and give the library the other whole frames.

        The start of an incomplete frame is kept until the rest arrives, so that the library is
        always between frames when this method reads the next one (see :mod:`channels._ws.frames`).
        """
        if self._large is not None:  # bytes read otherwise than into it (by the closing handshake)
            taken = min(len(data), len(self._large) - self._large_filled)
            self._large[self._large_filled : self._large_filled + taken] = memoryview(data)[:taken]
            self._large_arrived(taken)
            if taken < len(data):
                self._take_events()
                self._receive_bytes(data[taken:])
            return
        if self._partial:
            self._partial += data
            if len(self._partial) < self._partial_size:
                return  # a large frame still arriving: nothing to look at yet
            data, self._partial = self._partial, bytearray()  # handed over, not copied
        protocol = self._protocol
        if not self._server_side or protocol.state is not State.OPEN:
            protocol.receive_data(data)  # the library's alone, from now on
            return
        taken = 0
        if self._fragments is None:  # else a text frame is a protocol error: the library says so
            payloads, taken = take_text_frames(data, self.max_message_bytes)
            # _text's common case for the whole read at once: every payload is shorter than the
            # frames together, and ASCII if their concatenation is (one scan, one copy of a few
            # KiB: a loop over the payloads cost more, and a single payload is not copied).
            if taken < CANONICAL_LINE_LIMIT and b"".join(payloads).isascii():
                self._messages.extend(payloads)
            else:
                for payload in payloads:
                    self._text(payload)
                    if self._end is not None:
                        return  # invalid UTF-8: the connection is failing; the library drops the rest
        whole = taken
        while (extent := frame_extent(data, whole)) is not None:
            header, length = extent
            if length > self.max_message_bytes:
                whole, extent = len(data), None  # the library refuses it from its header (1009)
                break
            if whole + header + length > len(data):
                break  # incomplete: kept, with its size
            whole += header + length
        self._partial_size = sum(extent) if extent is not None else 0  # 0: header incomplete
        if whole > taken:
            protocol.receive_data(data[taken:whole])
        if self._partial_size > LARGE_FRAME_BYTES and self._receive_fd is not None:
            if whole > taken:
                self._take_events()  # frames the library just read may have begun a fragmented message
            self._large = large = bytearray(self._partial_size)
            self._large_filled = len(data) - whole
            large[: self._large_filled] = memoryview(data)[whole:]
            assert extent is not None  # (its size is known)
            self._large_payload = self._large_unmasked = header = extent[0]
            simple = large[0] == FINAL_TEXT and large[1] & MASKED  # as take_text_frames takes
            if simple and self._fragments is None and protocol.state is State.OPEN:
                self._large_key = bytes(large[header - MASK_KEY_BYTES : header])
                self._unmask_arrived(complete=False)
        else:
            self._partial += data[whole:]

    def _large_arrived(self, count: int) -> None:
        """``count`` more bytes of the large frame are in its buffer: unmask them; take it once whole.

        If this side began closing meanwhile (``_end`` is then set, and the frame's message would be
        dropped), the library reads the frame instead, only to find the close frame behind it: a
        payload partly unmasked is of no matter to it (it reads a data frame's header, not its text).
        """
        large = self._large
        assert large is not None
        self._large_filled += count
        complete = self._large_filled == len(large)
        open_ = self._protocol.state is State.OPEN
        if self._large_key is not None and open_:
            self._unmask_arrived(complete)
        if not complete:
            return
        self._large = None
        key, self._large_key = self._large_key, None
        if key is None or not open_:
            self._receive_bytes(large)  # the library's, whole
            return
        with memoryview(large) as view, view[self._large_payload :] as payload:
            self._text(bytes(payload) if len(payload) < CANONICAL_LINE_LIMIT else payload)

    def _unmask_arrived(self, complete: bool) -> None:
        """Unmask in place, piece by piece, the large frame's payload that arrived since the last call.

        Only whole groups of four bytes until the frame is complete, so that each piece starts at
        the key's first byte. ``_large_unmasked`` moves up to what has been unmasked.
        """
        large, key, start = self._large, self._large_key, self._large_unmasked
        assert large is not None and key is not None
        stop = self._large_filled
        if not complete:
            stop -= (stop - start) % MASK_KEY_BYTES
        _apply_mask_in_place(large, start, stop, key)
        self._large_unmasked = stop

    def _frame(self, frame: Frame) -> None:
        data = frame.data if isinstance(frame.data, bytes) else bytes(frame.data)
        if frame.opcode is Opcode.TEXT:
            if frame.fin:
                self._text(data)
            else:
                self._fragments = [data]
        elif frame.opcode is Opcode.CONT and self._fragments is not None:
            self._fragments.append(data)
            if frame.fin:
                self._text(b"".join(self._fragments))
                self._fragments = None
        elif frame.opcode is Opcode.BINARY or frame.opcode is Opcode.CONT:
            self._protocol.fail(
                CloseReason.UNSUPPORTED_DATA.value, "binary frames are not accepted: send JSON-RPC as text"
            )
            self._end = trio.BrokenResourceError("peer sent a binary frame (closed with 1003)")

    def _text(self, data: bytes | memoryview) -> None:
        """A complete text message: RFC 6455 §8.1 fails the connection on invalid UTF-8.

        ASCII is UTF-8: one scan without a copy checks nearly every message, whose bytes are kept
        for :func:`~channels._core.jsonrpc.decode_line`. Other text is decoded to be checked; a
        message too long for decode_line's canonical check is kept as that text, which the strict
        parser would otherwise decode again (``data`` is then a view of the large frame's buffer
        where it was unmasked; a shorter message's is bytes).
        """
        kept = data if isinstance(data, bytes) and len(data) < CANONICAL_LINE_LIMIT else None
        if kept is not None and kept.isascii():
            self._messages.append(kept)
            return
        try:
            text = str(data, "utf-8")
        except UnicodeDecodeError:
            self._protocol.fail(1007, "invalid UTF-8 in a text frame")
            self._end = trio.BrokenResourceError("peer sent invalid UTF-8 (closed with 1007)")
            return
        self._messages.append(text if kept is None else kept)

    def _ended(self) -> Exception:
        """A new exception like :attr:`_end`, for ``receive`` to raise (once the messages ran out).

        Raised itself, the kept one would keep the traceback of each raise, whose frames hold the
        channel's readers and the channel: a reference cycle, freed only by a full collection.
        """
        assert self._end is not None
        return type(self._end)(*self._end.args)

    def _ending(self) -> Exception:
        """What ``receive`` raises once the protocol has left the OPEN state."""
        protocol = self._protocol
        received, sent = protocol.close_rcvd, protocol.close_sent
        if received is not None and (sent is None or protocol.close_rcvd_then_sent):
            code, reason = received.code, received.reason
            if code in ORDERLY_CLOSE_CODES:
                return trio.EndOfChannel()
            return trio.BrokenResourceError(f"closed by the peer with {code} {reason}".rstrip())
        if sent is not None:  # this side failed the connection (1007, 1009...)
            code, reason = sent.code, sent.reason
            return trio.BrokenResourceError(f"closed with {code} {reason}".rstrip())
        return trio.BrokenResourceError("connection lost without a close frame")


def _apply_mask_in_place(buffer: bytearray, start: int, stop: int, key: bytes) -> None:
    """XOR ``buffer[start:stop]`` with ``key`` repeated from ``start`` on (RFC 6455 §5.3), in place."""
    with memoryview(buffer) as view:
        for piece in range(start, stop, UNMASK_PIECE_BYTES):
            end = min(piece + UNMASK_PIECE_BYTES, stop)
            view[piece:end] = apply_mask(view[piece:end], key)
