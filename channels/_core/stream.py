"""A message channel over any ``trio.abc.Stream``, with newline framing.

One class serves the child's pipes, the process's own stdin/stdout, Unix sockets, TCP and, later,
TLS: everything that moves bytes reliably in both directions. Its direct reads and writes of a
plain socket or pipe are :mod:`channels._core.fdio`'s.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from typing import final

import trio

from .channel import MessageChannel, PeerInfo
from .errors import ProtocolError, SendTimeout
from .fdio import (
    PROGRESS_PIECE,
    RECEIVE_SIZE,
    TLS_STREAMS,
    SocketTls,
    receive_fd_getter,
    receive_some,
    send_all_progressing,
    send_fd_getter,
    write_now,
    write_whole_now,
)
from .framing import LineFramer, Oversized
from .jsonrpc import JSONObject, decode_line, encode_lines
from .lines import LOG_EXCERPT_BYTES, take_lines

# The default for max_message_bytes: a client message on any transport may be up to 4 MiB
# (python-sdk's DEFAULT_MAX_REQUEST_BODY_SIZE for HTTP; its stdio transport has no limit at all).
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
"""The default limit on a message received from a peer, in bytes (4 MiB)."""

# How long TLS's closing handshake (close_notify) may wait for a peer that does not read.
CLOSE_TIMEOUT = 2.0


@final
class StreamChannel(MessageChannel):
    """Newline-framed JSON-RPC messages over a byte stream.

    Args:
        stream: the transport. The channel owns it from now on and closes it in :meth:`aclose`.
        max_message_bytes: longest line accepted from the peer; a longer one raises
            :class:`~channels.MessageTooLarge` once and is skipped (see :mod:`channels._core.framing`).
        peer: who is on the other end.
        send_timeout: see :attr:`MessageChannel.send_timeout`.

    Receiving is buffered: one ``receive_some`` may yield many messages, which :meth:`receive` and
    :meth:`receive_nowait` then hand out one at a time. :meth:`send_many` writes a batch with a
    single write.

    Writes and reads of a socket or pipe are direct (:mod:`channels._core.fdio`): :meth:`send_many`
    returns without yielding when the kernel took the whole batch at once (trio's ``send_all``
    yields after every write: a trip around the event loop per relay hop), and a read that
    returned less than it asked for emptied the kernel's buffer, so the next one waits for bytes
    first rather than fail with ``EAGAIN``. :meth:`send` keeps trio's rule and always yields.

    Raises:
        ValueError: ``max_message_bytes`` is less than 1.
    """

    __slots__ = (
        "_broken",
        "_closed",
        "_drained",
        "_eof",
        "_framer",
        "_nowait_limit",
        "_peer",
        "_pending",
        "_receive_fd",
        "_receiving",
        "_send_fd",
        "_send_now",
        "_sending",
        "_stream",
        "bytes_received",
        "bytes_sent",
        "dropped_at_eof",
        "last_message_bytes",
        "send_timeout",
    )

    def __init__(
        self,
        stream: trio.abc.Stream,
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        peer: PeerInfo | None = None,
        send_timeout: float | None = None,
    ) -> None:
        self._stream = stream
        # What writes without waiting: OpenSSL's socket for a TLS listener's stream, else the fd.
        self._send_fd = None if isinstance(stream, SocketTls) else send_fd_getter(stream)
        self._send_now: Callable[[bytes], int] = (
            stream.send_nowait if isinstance(stream, SocketTls) else partial(write_now, self._send_fd)
        )
        # OpenSSL keeps part of a record it could not write at once and must be given the same
        # buffer again, so a TLS write tried without waiting must fit one progress piece: the
        # rest of a larger one goes out in pieces (_send_rest), never after a partial attempt.
        self._nowait_limit = PROGRESS_PIECE if isinstance(stream, SocketTls) else None
        self._receive_fd = receive_fd_getter(stream)
        self._framer = LineFramer(max_message_bytes)
        self._peer = peer if peer is not None else PeerInfo("stream")
        self._pending: deque[bytes | bytearray | Oversized] = deque()
        self._eof = False
        self._drained = False  # the last read returned less than it asked for (receive_some's wait_first)
        self._closed = False
        self._broken = False
        self.send_timeout = send_timeout
        self._receiving = False
        self._sending = False
        self.dropped_at_eof = 0
        """Bytes of a partial last line dropped at end of input (0 if the peer ended cleanly)."""
        self.bytes_received = 0
        """Bytes read from the stream so far."""
        self.bytes_sent = 0
        """Bytes written to the stream so far (counted once ``send_all`` returned)."""
        self.last_message_bytes = 0
        """Size on the wire of the message last returned by ``receive``/``receive_nowait`` (for
        byte-bounded queues that must not re-encode to measure)."""

    @property
    def peer(self) -> PeerInfo:
        """Who is on the other end.

        Settable: the listener replaces it once the handshake has learnt more (a token's label, a
        certificate).
        """
        return self._peer

    @peer.setter
    def peer(self, peer: PeerInfo) -> None:
        self._peer = peer

    @property
    def stream(self) -> trio.abc.Stream:
        """The underlying stream, owned by this channel: do not close it, or read or write it."""
        return self._stream

    async def receive(self) -> JSONObject:
        """Return the next message, reading the stream only when nothing is buffered.

        Always a checkpoint. Cancel-safe: a cancelled receive loses no message.

        Raises:
            ProtocolError: the next line is not one valid JSON-RPC message
                (:class:`~channels.ParseError`, :class:`~channels.InvalidMessage`), or is over
                the limit (:class:`~channels.MessageTooLarge`, raised once, the line skipped); the
                channel stays usable.
            trio.EndOfChannel: the peer closed its end (on this call and every later one; a
                partial last line is dropped and counted in :attr:`dropped_at_eof`).
            trio.BrokenResourceError: the stream failed.
            trio.ClosedResourceError: this side closed the channel (also wakes a blocked receive).
            trio.BusyResourceError: another task is receiving.
        """
        if self._receiving:
            raise trio.BusyResourceError("another task is already receiving on this channel")
        self._receiving = True
        try:
            await self._fill()
            return self._decode()
        finally:
            self._receiving = False

    async def receive_batch_lines(
        self, max_count: int
    ) -> tuple[list[JSONObject | ProtocolError], list[bytes | None]]:
        """As :meth:`MessageChannel.receive_batch_lines`: the lines decoded in one loop.

        Cancel-safe as :func:`~channels.receive_batch`: only the wait for the first line can be
        cancelled. Raises as :meth:`receive` (a bad line is an item, not an exception).
        """
        if self._receiving:
            raise trio.BusyResourceError("another task is already receiving on this channel")
        self._receiving = True
        try:
            await self._fill()
        finally:
            self._receiving = False
        return self._take_lines(max_count)

    async def _fill(self) -> None:
        """Wait until a line is buffered: the reading part of :meth:`receive`, under its guard."""
        if self._closed:
            raise trio.ClosedResourceError("channel was closed")
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._pending or self._eof:
            await trio.lowlevel.cancel_shielded_checkpoint()
        while not self._pending:
            if self._eof:
                raise trio.EndOfChannel
            try:
                data = await receive_some(self._stream, self._receive_fd, wait_first=self._drained)
            except trio.BrokenResourceError:
                if self._closed:  # closed by another task meanwhile (TLS's goodbye can break)
                    raise trio.ClosedResourceError("channel was closed") from None
                raise
            if self._closed:  # closed by another task while this one read
                raise trio.ClosedResourceError("channel was closed")
            # A short read emptied the kernel's buffer: the next one waits for bytes first.
            self._drained = len(data) < RECEIVE_SIZE
            if data:
                self.bytes_received += len(data)
                self._pending.extend(self._framer.feed(data))
            else:
                self._eof = True
                self.dropped_at_eof = self._framer.close()

    def receive_nowait(self) -> JSONObject:
        """Return a message already buffered, without reading the stream or yielding.

        Raises:
            trio.WouldBlock: nothing is buffered.
            ProtocolError: the next buffered line is not an acceptable message (as :meth:`receive`).
            trio.EndOfChannel: the peer closed and everything buffered has been received.
            trio.ClosedResourceError: this side closed the channel.
            trio.BusyResourceError: a task is blocked in :meth:`receive`.
        """
        if self._receiving:
            raise trio.BusyResourceError("another task is already receiving on this channel")
        if self._closed:
            raise trio.ClosedResourceError("channel was closed")
        if self._pending:
            return self._decode()
        if self._eof:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    def take_buffered(self, items: list[JSONObject | ProtocolError], max_count: int) -> None:
        """As :meth:`MessageChannel.take_buffered`: the buffered lines, decoded in one loop."""
        if self._receiving or self._closed:
            return  # receive_nowait would raise: the next receive says why
        items += self._take_lines(max_count - len(items))[0]

    def _decode(self) -> JSONObject:
        """The next buffered line's message (one is buffered); raises its error as :meth:`receive`."""
        item = self._take_lines(1)[0][0]
        if isinstance(item, ProtocolError):
            raise item
        return item

    def _take_lines(self, max_count: int) -> tuple[list[JSONObject | ProtocolError], list[bytes | None]]:
        """``take_decoded`` of up to ``max_count`` buffered lines, in one pass (:func:`take_lines`).

        One line alone (a call at a time) is decoded here, as :func:`take_lines` would, without
        the calls a batch pays once.
        """
        pending = self._pending
        if len(pending) == 1 and type(pending[0]) is bytes and max_count:
            line: bytes = pending.popleft()  # type: ignore[assignment]  # bytes, as checked
            self.last_message_bytes = len(line)
            try:
                message, kept = decode_line(line)
            except ProtocolError as exc:
                exc.excerpt = line[:LOG_EXCERPT_BYTES]
                return [exc], [None]
            return [message], [kept]
        items, lines, last = take_lines(pending, max_count, self._framer.max_line_bytes)
        if last is not None:
            self.last_message_bytes = last
        return items, lines

    async def send(self, value: JSONObject) -> None:
        """Write one message as one line.

        Always a checkpoint. If cancelled, the message may have been written whole, in part or not
        at all, as with ``send_all``; send nothing more after a cancelled send.

        Raises:
            ValueError: ``value`` is not a JSON-RPC message, or holds a string JSON cannot carry
                (a lone surrogate); nothing is written.
            TypeError: ``value`` holds something that is not JSON data; nothing is written.
            SendTimeout: with :attr:`send_timeout` set, the peer accepted nothing for that long;
                the channel is broken from then on.
            trio.BrokenResourceError: the stream failed, or an earlier send timed out.
            trio.ClosedResourceError: this side closed the channel.
            trio.BusyResourceError: another task is sending.
        """
        if not await self._send_data(encode_lines((value,))):
            await trio.lowlevel.cancel_shielded_checkpoint()

    async def send_many(self, messages: Sequence[JSONObject]) -> None:
        """Send a batch with one write.

        Checks for cancellation, but yields to the scheduler only if it has to wait for the
        transport: a loop of ``send_many`` must yield elsewhere (the relay's pumps yield in
        ``receive``). Every message is checked before anything is written.

        Raises:
            As :meth:`send`; a ``ValueError`` or ``TypeError`` means none of the batch was written.
        """
        await self._send_data(encode_lines(messages))

    def encode_batch(self, messages: Sequence[JSONObject]) -> bytes:
        """``messages`` checked and encoded as :meth:`send_many` writes them; raises as it does."""
        return encode_lines(messages)

    def send_encoded_nowait(self, data: bytes) -> bool:
        """Write a batch :meth:`encode_batch` returned, whole, now and without yielding, or none of it.

        Whether it was written: only to a pipe, and for up to ``PIPE_BUF`` bytes
        (:func:`~channels._core.fdio.write_whole_now`); never while another send is in progress
        or after one timed out. Nothing written, :meth:`send_encoded` writes it as ever.
        """
        if self._sending or self._broken or self._closed or not write_whole_now(self._send_fd, data):
            return False
        self.bytes_sent += len(data)
        return True

    async def send_encoded(self, data: bytes) -> None:
        """Write batches :meth:`encode_batch` returned (joined) as :meth:`send_many` writes one."""
        await self._send_data(data)

    async def send_lines(self, messages: Sequence[JSONObject], lines: Sequence[bytes | None]) -> None:
        """As :meth:`MessageChannel.send_lines`: a given line is written as is, unchecked and not encoded.

        Raises:
            As :meth:`send_many`.
        """
        await self._send_data(encode_lines(messages, lines))

    async def _send_data(self, data: bytes) -> bool:
        """Write encoded messages; True if that went through ``send_all`` (which yields)."""
        if self._sending:
            raise trio.BusyResourceError("another task is already sending on this channel")
        self._sending = True
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
            if self._broken:
                raise trio.BrokenResourceError("an earlier send timed out")
            sent = self._write_now(data)
            if sent < len(data):
                await self._send_rest(memoryview(data)[sent:])
            self.bytes_sent += len(data)
            return sent < len(data)
        finally:
            self._sending = False

    async def _send_rest(self, data: memoryview) -> None:
        # send_timeout bounds the time without progress, not the whole write: a peer reading a
        # large message slowly but steadily is not too slow (docs/design.md §6).
        if await send_all_progressing(self._stream, data, self.send_timeout):
            self._broken = True  # part of a line may be on the wire: nothing may follow it
            raise SendTimeout(f"the peer accepted nothing for {self.send_timeout:g}s")

    def _write_now(self, data: bytes) -> int:
        """Write what the kernel takes without waiting; return how many bytes that was."""
        if self._closed:
            return 0  # send_all decides what to raise
        if self._nowait_limit is not None and len(data) > self._nowait_limit:
            return 0
        return self._send_now(data)

    async def send_eof(self) -> None:
        """Half-close: the peer sees ``EndOfChannel``; receiving goes on.

        Over a TLS listener's stream (:class:`~channels._core.tlsstream.TlsSocketStream`) that is
        TLS's goodbye, ``close_notify``, after which the peer may still send.

        Raises:
            NotImplementedError: the stream cannot half-close (neither a
                ``trio.abc.HalfCloseableStream`` nor a TLS listener's stream: a TLS client's
                ``trio.SSLStream``).
            trio.ClosedResourceError, trio.BrokenResourceError: as the stream's ``send_eof``.
        """
        if not isinstance(self._stream, trio.abc.HalfCloseableStream | SocketTls):
            raise NotImplementedError(f"{type(self._stream).__name__} cannot half-close")
        await self._stream.send_eof()

    async def aclose(self) -> None:
        """Close the channel and its stream; idempotent, and it closes even if cancelled.

        Wakes a task blocked in :meth:`receive` or :meth:`send` (they raise
        ``trio.ClosedResourceError``); messages still buffered are dropped. Over TLS the goodbye
        (``close_notify``) is sent shielded from cancellation and bounded by a 2 s wait; a send
        stuck mid-write makes the close immediate instead.
        """
        self._closed = True
        self._pending.clear()
        if self._sending or not isinstance(self._stream, TLS_STREAMS):
            # A send stuck mid-write cannot be followed by TLS's close_notify; plain streams
            # close at once anyway.
            await trio.aclose_forcefully(self._stream) if self._sending else await self._stream.aclose()
            return
        # TLS says goodbye (close_notify) if the peer lets it, within CLOSE_TIMEOUT; a cancelled
        # SSLStream.aclose still closes the transport.
        with trio.move_on_after(CLOSE_TIMEOUT) as scope:
            scope.shield = True
            await self._stream.aclose()
