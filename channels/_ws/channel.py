"""A message channel over a WebSocket: trio I/O around the ``websockets`` library's sans-I/O core.

``websockets`` (``ServerProtocol``/``ClientProtocol``) parses and builds frames, unmasks with its
C speed-up, validates UTF-8 (close 1007), enforces the size limit (close 1009), answers pings and
runs the closing handshake. This module only moves bytes between it and a trio stream, the way
:class:`~channels.StreamChannel` does for newline framing, and with the same economy: every frame
that one read brings in is delivered without another read (:meth:`receive_nowait`), and a batch of
messages leaves in one write (:meth:`send_many`), synchronously when the socket takes it all.
The frames nearly every message travels in (one whole message in one text frame) are read and
written by :mod:`channels._ws.frames` without the library's general parser; everything else is the
library's.

trio-websocket was the first choice; its design (a reader task handing each message through a
memory channel to the application, one ``send_all`` per message, wsproto's pure-Python frame
parser) cost 180 µs of CPU per relayed call in the benchmark, against 20 µs for TCP. See the
README's Performance section.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Sequence
from typing import final

import trio
from websockets.frames import Frame, Opcode
from websockets.protocol import Protocol, Side, State

from .._core.channel import CloseReason, MessageChannel, PeerInfo
from .._core.errors import InvalidMessage, SendTimeout
from .._core.fdio import (
    discard_unread,
    receive_fd_getter,
    receive_some,
    send_all_within,
    send_fd_getter,
    write_now,
)
from .._core.jsonrpc import JSONObject, decode, encode, validate
from .._core.lock import HandoffLock
from .._core.stream import DEFAULT_MAX_MESSAGE_BYTES
from .frames import frame_extent, take_text_frames, text_frame_header

logger = logging.getLogger("channels.websocket")

# How long a closing handshake may take before the connection is simply cut.
CLOSE_TIMEOUT = 2.0
# RFC 6455 §5.5: a control frame's payload is at most 125 bytes, two of which hold the code.
MAX_CLOSE_REASON_BYTES = 123
# Close codes that end a channel in order (EndOfChannel): normal, going away, and no status code
# (RFC 6455 §7.4.1). Any other code is an error close.
ORDERLY_CLOSE_CODES = frozenset({1000, 1001, 1005})


def _short(text: str) -> str:
    return text.encode()[:MAX_CLOSE_REASON_BYTES].decode(errors="ignore")


@final
class WebSocketChannel(MessageChannel):
    """JSON-RPC messages over an open WebSocket, one per text frame.

    Args:
        stream: the connection (TCP, or TLS for ``wss``); the channel owns and closes it.
        protocol: the ``websockets`` protocol object, already past its opening handshake (state
            ``OPEN``), with ``max_size`` set to the message limit.
        peer: who is on the other end.
        max_message_bytes: longest message accepted (also the protocol's ``max_size``).
        received: bytes that followed the opening handshake in its last read (a client that did
            not wait for the answer), to be read before anything else.

    Receiving: a binary frame closes the connection with 1003 and ``receive`` raises
    ``BrokenResourceError``; so do invalid UTF-8 (1007, by ``websockets``) and an over-long
    message (1009). A text frame that is not one JSON-RPC message raises
    :class:`~channels.ProtocolError` and the channel stays usable.

    The channel does not run its own tasks: whoever makes it runs :meth:`keepalive` beside it
    (:func:`~channels.connect` and the listener's :meth:`~channels.Incoming.establish` do).

    Attributes:
        max_message_bytes: the limit given to the constructor.
        send_timeout: see :attr:`MessageChannel.send_timeout`; ``None`` (no limit) at first.
    """

    __slots__ = (
        "_closed",
        "_end",
        "_fragments",
        "_messages",
        "_owed",
        "_partial",
        "_partial_size",
        "_peer",
        "_protocol",
        "_read_started",
        "_reads",
        "_receive_fd",
        "_receiving",
        "_send_fd",
        "_sending",
        "_server_side",
        "_stream",
        "_write_broken",
        "_write_lock",
        "bytes_received",
        "bytes_sent",
        "max_message_bytes",
        "send_timeout",
    )

    def __init__(
        self,
        stream: trio.abc.Stream,
        protocol: Protocol,
        peer: PeerInfo,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        received: bytes = b"",
    ) -> None:
        self._stream = stream
        self._protocol = protocol
        self._peer = peer
        self.max_message_bytes = max_message_bytes
        self.send_timeout: float | None = None
        self._send_fd = send_fd_getter(stream)
        self._receive_fd = receive_fd_getter(stream)
        # The shortcuts of _wsframes read masked frames and write unmasked ones: a server's.
        self._server_side = protocol.side is Side.SERVER
        # The start of a frame not complete yet, held back so that the library only ever gets
        # whole frames; and its full size, once its header is in (0 until then).
        self._partial = bytearray()
        self._partial_size = 0
        self._messages: deque[str] = deque()
        self._fragments: list[bytes] | None = None
        self._end: Exception | None = None  # what receive raises once the messages run out
        self._closed = False
        self._receiving = False
        self._sending = False
        # Data frames, pings, pongs and the close frame must not interleave.
        self._write_lock = HandoffLock()
        self._write_broken = False
        # For keepalive: reads started so far, and the number of the one waiting for bytes (0 when
        # none is): a counter, not a clock, so that a read costs no call to trio.current_time().
        self._reads = 0
        self._read_started = 0
        self.bytes_received = 0
        self.bytes_sent = 0
        # Whether the library owes the peer something (a pong, a closing reply) for frames that
        # came with the handshake: written before the first read.
        self._owed = False
        if received:
            self._receive_bytes(received)
            self._take_events()
            self._owed = True

    @property
    def peer(self) -> PeerInfo:
        """Who is on the other end (with the upgrade's ``Origin`` and ``User-Agent``)."""
        return self._peer

    @property
    def subprotocol(self) -> str | None:
        """The negotiated subprotocol (``"mcp"``), or ``None``."""
        return getattr(self._protocol, "subprotocol", None)

    # -- receiving --------------------------------------------------------------------------------

    async def receive(self) -> JSONObject:
        """Return the next message, reading the connection only when nothing is buffered.

        While reading it also answers pings and the peer's closing handshake. Always a checkpoint.
        Cancel-safe: a cancelled receive loses no message.

        Raises:
            ProtocolError: a text frame that is not one valid JSON-RPC message
                (:class:`~channels.ParseError`, :class:`~channels.InvalidMessage`); the channel
                stays usable.
            trio.EndOfChannel: the peer closed with 1000, 1001 or no status (on this call and
                every later one).
            trio.BrokenResourceError: the peer closed with another code, or the connection was
                lost or failed: a binary frame (1003), invalid UTF-8 (1007), a message over
                ``max_message_bytes`` (1009), no answer to a keepalive ping (1011).
            trio.ClosedResourceError: this side closed the channel (also wakes a blocked receive).
            trio.BusyResourceError: another task is receiving.
        """
        if self._receiving:
            raise trio.BusyResourceError("another task is already receiving on this channel")
        if self._closed:
            raise trio.ClosedResourceError("channel was closed")
        self._receiving = True
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
            if self._messages or self._end is not None:
                await trio.lowlevel.cancel_shielded_checkpoint()
            while True:
                if self._closed:  # by another task while this one read (a race with the goodbye)
                    raise trio.ClosedResourceError("channel was closed")
                if self._messages:
                    return decode(self._messages.popleft())
                if self._end is not None:
                    raise self._end
                await self._read()
        finally:
            self._receiving = False

    def receive_nowait(self) -> JSONObject:
        """Return a message that arrived with an earlier read, without reading or yielding.

        Raises:
            trio.WouldBlock: nothing is buffered.
            ProtocolError: the next buffered message is not valid JSON-RPC (as :meth:`receive`).
            trio.EndOfChannel, trio.BrokenResourceError: the connection has ended and everything
                buffered has been received (as :meth:`receive`).
            trio.ClosedResourceError: this side closed the channel.
            trio.BusyResourceError: a task is blocked in :meth:`receive`.
        """
        if self._receiving:
            raise trio.BusyResourceError("another task is already receiving on this channel")
        if self._closed:
            raise trio.ClosedResourceError("channel was closed")
        if self._messages:
            return decode(self._messages.popleft())
        if self._end is not None:
            raise self._end
        raise trio.WouldBlock

    async def _read(self) -> None:
        """One read: feed it to the protocol and collect messages.

        Then write what the protocol owes the peer (pongs, the closing handshake).
        """
        if self._owed:
            self._owed = False
            await self._flush(self._protocol.data_to_send())
        self._reads += 1
        self._read_started = self._reads
        try:
            data = await receive_some(self._stream, self._receive_fd)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            if self._closed:
                raise trio.ClosedResourceError("channel was closed") from None
            if self._end is None:
                self._end = trio.BrokenResourceError(f"connection lost: {exc}")
            return
        finally:
            self._read_started = 0
        self.bytes_received += len(data)
        protocol = self._protocol
        if data:
            self._receive_bytes(data)
        else:
            if self._partial:  # a frame cut short: the library says what that means
                protocol.receive_data(bytes(self._partial))
                self._partial.clear()
            protocol.receive_eof()
        self._take_events()
        pending = protocol.data_to_send()
        if pending:  # a pong, a close frame, the end of TCP
            await self._flush(pending)

    def _take_events(self) -> None:
        """Collect the messages in the frames the library has parsed, and notice the end."""
        protocol = self._protocol
        for event in protocol.events_received():
            if self._end is None and isinstance(event, Frame):
                if event.opcode is Opcode.TEXT and event.fin and self._fragments is None:
                    self._text(event.data)  # a whole message in one frame
                else:
                    self._frame(event)
        if self._end is None and protocol.state is not State.OPEN:
            self._end = self._ending()

    def _receive_bytes(self, data: bytes | bytearray) -> None:
        """Take the simple text frames at the front, and give the library the other whole frames.

        The start of an incomplete frame is kept until the rest arrives, so that the library is
        always between frames when this method reads the next one (see :mod:`channels._ws.frames`).
        """
        if self._partial:
            self._partial += data
            if len(self._partial) < self._partial_size:
                return  # a large frame still arriving: nothing to look at yet
            data = bytes(self._partial)
            self._partial.clear()
        protocol = self._protocol
        if not self._server_side or protocol.state is not State.OPEN:
            protocol.receive_data(data)  # the library's alone, from now on
            return
        taken = 0
        if self._fragments is None:  # else a text frame is a protocol error: the library says so
            payloads, taken = take_text_frames(data, self.max_message_bytes)
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
        self._partial += data[whole:]

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

    def _text(self, data: bytes | bytearray | memoryview) -> None:
        """A complete text message: RFC 6455 §8.1 fails the connection on invalid UTF-8."""
        try:
            self._messages.append(str(data, "utf-8"))
        except UnicodeDecodeError:
            self._protocol.fail(1007, "invalid UTF-8 in a text frame")
            self._end = trio.BrokenResourceError("peer sent invalid UTF-8 (closed with 1007)")

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

    # -- sending ----------------------------------------------------------------------------------

    async def send(self, value: JSONObject) -> None:
        """Write one message as one text frame.

        Always a checkpoint. If cancelled, the frame may have been written whole, in part or not
        at all, as with ``send_all``; send nothing more after a cancelled send.

        Raises:
            ValueError: ``value`` is not a JSON-RPC message, or holds a string JSON cannot carry
                (a lone surrogate); nothing is written.
            TypeError: ``value`` holds something that is not JSON data; nothing is written.
            SendTimeout: with :attr:`send_timeout` set, the peer accepted nothing for that long;
                the connection is cut and the channel broken.
            trio.BrokenResourceError: the connection failed or is closing, or an earlier send
                failed or timed out.
            trio.ClosedResourceError: this side closed the channel.
            trio.BusyResourceError: another task is sending.
        """
        if not await self._send_batch((value,)):
            await trio.lowlevel.cancel_shielded_checkpoint()

    async def send_many(self, messages: Sequence[JSONObject]) -> None:
        """Send a batch as one write, one text frame per message.

        Like :meth:`StreamChannel.send_many`, it yields to the scheduler only if it has to wait
        for the transport. Every message is checked before anything is written.

        Raises:
            As :meth:`send`; a ``ValueError`` or ``TypeError`` means none of the batch was written.
        """
        await self._send_batch(messages)

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
        if await send_all_within(self._stream, data, self.send_timeout):
            # Part of a frame may be on the wire: nothing may follow it, not even a close frame.
            self._write_broken = True
            await trio.aclose_forcefully(self._stream)
            raise SendTimeout(f"the peer accepted nothing for {self.send_timeout:g}s")

    # -- keepalive and closing --------------------------------------------------------------------

    async def keepalive(self, interval: float, timeout: float) -> None:
        """Ping every ``interval`` seconds; close with 1011 if the peer goes silent.

        Silent means nothing at all arrived within ``timeout`` of a ping while a receive was
        waiting for it. Only a waiting receive counts: a peer is not blamed for bytes this side
        did not read (while the bridge is applying backpressure, for example). A receive then
        raises ``trio.BrokenResourceError``.

        Run it in a task beside the channel's users; it returns once the channel is done and never
        raises for transport failures. Cancelling it only stops the pings.
        """
        while not self._closed and self._end is None:
            await trio.sleep(interval)
            received = self.bytes_received
            waiting_read = self._read_started  # the read that must see the pong (0: none waits)
            try:
                if self._protocol.state is not State.OPEN:
                    return
                self._protocol.send_ping(os.urandom(4))
                await self._write(b"".join(self._protocol.data_to_send()))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            await trio.sleep(timeout)
            if (
                self.bytes_received == received
                and waiting_read
                and self._read_started == waiting_read
                and not self._closed
            ):
                logger.info("%s: no pong within %gs; closing", self._peer, timeout)
                self._end = trio.BrokenResourceError("the peer did not answer a keepalive ping")
                await self._close(CloseReason.INTERNAL_ERROR, "keepalive ping timeout", by_owner=False)
                return

    async def aclose_with(self, reason: CloseReason, detail: str = "") -> None:
        """Send a close frame with ``reason``'s code and ``detail``, then close the connection.

        The peer's answering close frame is not waited for. Shielded and bounded: the close frame
        gets at most 2 s, even if the enclosing scope is cancelled, and the connection is closed
        whatever happens. No close frame is sent if a send is stuck mid-frame or an earlier write
        failed. Idempotent; wakes tasks blocked in :meth:`receive` or :meth:`send` (they raise
        ``trio.ClosedResourceError``).

        Args:
            reason: its value is the close code.
            detail: the close frame's reason text, cut to 123 bytes of UTF-8.
        """
        if self._closed:
            await trio.lowlevel.checkpoint()
            return
        await self._close(reason, detail, by_owner=True)

    async def aclose(self) -> None:
        """Close normally (1000): :meth:`aclose_with` with :attr:`CloseReason.NORMAL`."""
        await self.aclose_with(CloseReason.NORMAL)

    async def _close(self, reason: CloseReason, detail: str, *, by_owner: bool) -> None:
        """Send a close frame if the connection is still open, and close the stream.

        The stream is closed whatever happens (cancellation included).

        The peer's answering close frame is not awaited (RFC 6455 §7.1.1 lets either side end
        TCP; waiting would hold every close up for a peer that no task reads). What has already
        arrived is read first, so that closing does not reset the connection (RST) and throw
        away the close frame before the peer reads it.

        ``by_owner``: the channel's owner closed it (operations then raise
        ``ClosedResourceError``); otherwise the channel broke (keepalive) and raise ``_end``.
        """
        self._closed = self._closed or by_owner
        if self._end is None:
            self._end = trio.BrokenResourceError(f"closed with {reason.value} {detail}".rstrip())
        try:
            if self._sending or self._write_broken:
                return  # a send is stuck mid-frame: no close frame can follow it
            with trio.move_on_after(CLOSE_TIMEOUT) as scope:
                scope.shield = True
                if self._protocol.state is State.OPEN:
                    self._protocol.send_close(reason.value, _short(detail))
                if isinstance(self._stream, trio.SocketStream) and self._receive_fd is not None:
                    discard_unread(self._receive_fd())  # a plain socket; TLS drops its own
                await self._write(b"".join(self._protocol.data_to_send()), eof=True)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await trio.aclose_forcefully(self._stream)
