"""A message channel over a WebSocket: trio I/O around the ``websockets`` library's sans-I/O core.

``websockets`` (``ServerProtocol``/``ClientProtocol``) parses and builds frames, unmasks with its
C speed-up, validates UTF-8 (close 1007), enforces the size limit (close 1009), answers pings and
runs the closing handshake. This module only moves bytes between it and a trio stream, the way
:class:`~channels.StreamChannel` does for newline framing, and with the same economy: every frame
that one read brings in is delivered without another read (:meth:`receive_nowait`), and a batch of
messages leaves in one write (:meth:`send_many`), synchronously when the socket takes it all.
The frames nearly every message travels in (one whole message in one text frame) are read and
written by :mod:`channels._ws.frames` without the library's general parser; everything else is the
library's. The read path is :class:`~channels._ws.receiver.FrameReceiver`, the write path
:class:`~channels._ws.sender.FrameSender`, the bases this class builds on; here are the public
methods, keepalive and closing.

trio-websocket was the first choice; its design (a reader task handing each message through a
memory channel to the application, one ``send_all`` per message, wsproto's pure-Python frame
parser) cost 180 µs of CPU per relayed call in the benchmark, against 20 µs for TCP. See
docs/performance.md.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from itertools import islice
from typing import final

import trio
from websockets.protocol import Protocol, State

from .._core.channel import CloseReason, PeerInfo, take_decoded
from .._core.errors import ProtocolError
from .._core.fdio import discard_unread, receive_some
from .._core.jsonrpc import JSONObject, decode, decode_line
from .._core.lines import decode_lines
from .._core.stream import DEFAULT_MAX_MESSAGE_BYTES
from .receiver import FrameReceiver

logger = logging.getLogger("channels.websocket")

# How long a closing handshake may take before the connection is simply cut: the close frame's
# write and the wait for the peer's answering close frame together. Apache httpd's lingering close
# reads a departing client for up to 2 s (SECONDS_TO_LINGER), as the bridge's relay does.
CLOSE_TIMEOUT = 2.0
# Most bytes read and dropped while waiting for the peer's close frame: what the socket buffers
# between the two ends can hold (Linux's defaults: 128 KiB for a TCP receive buffer, tcp_rmem), with
# room to spare; a peer still sending after that is closed on (and reset).
CLOSE_READ_BYTES = 1024 * 1024
# RFC 6455 §5.5: a control frame's payload is at most 125 bytes, two of which hold the code.
MAX_CLOSE_REASON_BYTES = 123
# What a batch of payloads that decode_lines may take holds (a long non-ASCII one is a str).
_BYTES_ONLY = {bytes}


def _short(text: str) -> str:
    return text.encode()[:MAX_CLOSE_REASON_BYTES].decode(errors="ignore")


@final
class WebSocketChannel(FrameReceiver):
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

    __slots__ = ("_peer",)

    def __init__(
        self,
        stream: trio.abc.Stream,
        protocol: Protocol,
        peer: PeerInfo,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        received: bytes = b"",
    ) -> None:
        super().__init__(stream, protocol, max_message_bytes, received)
        self._peer = peer

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
        await self._wait_for_message()
        return decode(self._messages.popleft())

    async def receive_batch_lines(
        self, max_count: int
    ) -> tuple[list[JSONObject | ProtocolError], list[bytes | None]]:
        """As :meth:`MessageChannel.receive_batch_lines`: with each message its text frame's payload.

        A payload is handed out when it is byte for byte the message's canonical encoding
        (:func:`~channels._core.jsonrpc.decode_line`); its UTF-8 was checked on arrival. Cancel-safe
        as :func:`~channels.receive_batch`: only the wait for the first message can be cancelled.
        Raises as :meth:`receive` (a bad message is an item, not an exception).
        """
        await self._wait_for_message()
        messages = self._messages
        taken = [*islice(messages, max_count)]
        if len(taken) > 1 and {*map(type, taken)} == _BYTES_ONLY:  # checked as one (decode_lines)
            if len(taken) == len(messages):
                messages.clear()
            else:
                for _ in taken:
                    messages.popleft()
            return decode_lines(taken)  # type: ignore[arg-type]  # bytes only, as checked
        return take_decoded(messages, max_count, _decode_line)

    async def _wait_for_message(self) -> None:
        """Read until a message is buffered: the waiting part of :meth:`receive`, under its guard."""
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
                    return
                if self._end is not None:
                    raise self._ended()
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
            raise self._ended()
        raise trio.WouldBlock

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

    async def send_lines(self, messages: Sequence[JSONObject], lines: Sequence[bytes | None]) -> None:
        """As :meth:`MessageChannel.send_lines`: a given line is a text frame's payload as is.

        The line is neither checked nor encoded again (it is the message's canonical encoding,
        so the frame is the one :meth:`send_many` would write). Raises as :meth:`send_many`.
        """
        await self._send_batch(messages, lines)

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

        When this side starts the closing handshake (the owner closes an open connection and no
        task is receiving), it then reads and drops what the peer still sends until the peer's
        answering close frame or its end (RFC 6455 §7.1.1: the server closes TCP after both close
        frames), within ``CLOSE_TIMEOUT`` and ``CLOSE_READ_BYTES``; a cancellation cuts that
        wait short. A peer may have written more messages before it read the close frame: a
        socket closed while they arrive is reset by Linux, and the reset destroys what the peer
        had not read yet (the last replies and the close frame itself), docs/design.md §5.1.
        Otherwise what has already arrived is read and dropped before closing, for the same
        reason.

        ``by_owner``: the channel's owner closed it (operations then raise
        ``ClosedResourceError``); otherwise the channel broke (keepalive) and raise ``_end``.
        """
        self._closed = self._closed or by_owner
        if self._end is None:
            self._end = trio.BrokenResourceError(f"closed with {reason.value} {detail}".rstrip())
        try:
            if self._sending or self._write_broken:
                return  # a send is stuck mid-frame: no close frame can follow it
            answer_awaited = by_owner and not self._receiving and self._protocol.state is State.OPEN
            with trio.move_on_after(CLOSE_TIMEOUT) as scope:
                scope.shield = True
                if self._protocol.state is State.OPEN:
                    self._protocol.send_close(reason.value, _short(detail))
                if not answer_awaited:
                    self._discard_unread()
                await self._write(b"".join(self._protocol.data_to_send()), eof=True)
            if answer_awaited and not scope.cancelled_caught:
                with trio.move_on_at(scope.deadline):
                    await self._drop_until_close_frame()
                self._discard_unread()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await trio.aclose_forcefully(self._stream)

    def _discard_unread(self) -> None:
        if isinstance(self._stream, trio.SocketStream) and self._receive_fd is not None:
            discard_unread(self._receive_fd())  # a plain socket; TLS drops its own

    async def _drop_until_close_frame(self) -> None:
        """Read and drop what the peer sends until its close frame or its end, or enough bytes."""
        protocol = self._protocol
        start = self.bytes_received
        while protocol.close_rcvd is None and self.bytes_received - start < CLOSE_READ_BYTES:
            data = await receive_some(self._stream, self._receive_fd)
            if not data:
                return
            self.bytes_received += len(data)
            self._receive_bytes(data)  # whole frames to the library, which sees the close frame
            protocol.events_received()  # dropped: the channel is closed


def _decode_line(payload: bytes | str) -> tuple[JSONObject, bytes | None]:
    """A text frame's message, and its payload if that may be forwarded (``decode_line``)."""
    if isinstance(payload, bytes):
        return decode_line(payload)
    return decode(payload), None  # a long non-ASCII message, already decoded (FrameReceiver._text)
