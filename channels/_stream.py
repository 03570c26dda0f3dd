"""A message channel over any ``trio.abc.Stream``, with newline framing.

One class serves the child's pipes, the process's own stdin/stdout, Unix sockets, TCP and, later,
TLS: everything that moves bytes reliably in both directions.
"""

from __future__ import annotations

import errno
import os
from collections import deque
from collections.abc import Callable, Sequence
from typing import final

import trio

from ._channel import MessageChannel, PeerInfo
from ._errors import InvalidMessage, MessageTooLarge, ProtocolError, SendTimeout
from ._framing import LineFramer, Oversized
from ._jsonrpc import JSONObject, decode, encode, sniff_leading_id, validate

# How much one read asks for. 64 KiB holds hundreds of small MCP messages, so a pipelined peer is
# served by one system call per batch; it is also trio's DEFAULT_RECEIVE_SIZE for sockets.
RECEIVE_SIZE = 65536

# The default for max_message_bytes: a client message on any transport may be up to 4 MiB
# (python-sdk's DEFAULT_MAX_REQUEST_BODY_SIZE for HTTP; its stdio transport has no limit at all).
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024

# How long TLS's closing handshake (close_notify) may wait for a peer that does not read.
CLOSE_TIMEOUT = 2.0

# How much of a rejected line is kept on its ProtocolError for logs.
LOG_EXCERPT_BYTES = 200


def send_fd_getter(stream: trio.abc.Stream) -> Callable[[], int] | None:
    """How to find the file descriptor ``stream`` sends on, if it is a plain socket or pipe.

    The getter is called for each write, because the fd becomes -1 once the stream is closed (and
    its number may then be reused by another file).
    """
    if isinstance(stream, trio.StapledStream):
        return send_fd_getter(stream.send_stream)
    if isinstance(stream, trio.SocketStream):
        return stream.socket.fileno
    if isinstance(stream, trio.lowlevel.FdStream):
        return stream.fileno
    return None


@final
class StreamChannel(MessageChannel):
    """Newline-framed JSON-RPC messages over a byte stream.

    Args:
        stream: the transport. The channel owns it from now on and closes it in :meth:`aclose`.
        max_message_bytes: longest line accepted from the peer; a longer one raises
            :class:`~channels.MessageTooLarge` once and is skipped (see :mod:`channels._framing`).
        peer: who is on the other end.
        send_timeout: see :attr:`MessageChannel.send_timeout`.

    Receiving is buffered: one ``receive_some`` may yield many messages, which :meth:`receive` and
    :meth:`receive_nowait` then hand out one at a time. :meth:`send_many` writes a batch with a
    single write.

    :meth:`send_many` tries writes to a socket or pipe synchronously first: trio's ``send_all``
    yields to the scheduler after every successful non-blocking write, and on a relay's hot path
    that extra trip around the event loop costs about 40 µs a round trip (the benchmark's
    sequential latency, 265 → 230 µs here). When the kernel takes the whole batch at once, the
    usual case, ``send_many`` returns after a cancellation check without yielding; otherwise the
    rest goes through ``send_all``, with its waiting and its checkpoints. :meth:`send` keeps trio's
    rule and is always a full checkpoint.
    """

    __slots__ = (
        "_broken",
        "_closed",
        "_eof",
        "_framer",
        "_peer",
        "_pending",
        "_receiving",
        "_send_fd",
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
        self._send_fd = send_fd_getter(stream)
        self._framer = LineFramer(max_message_bytes)
        self._peer = peer if peer is not None else PeerInfo("stream")
        self._pending: deque[bytes | Oversized] = deque()
        self._eof = False
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
        return self._peer

    @peer.setter
    def peer(self, peer: PeerInfo) -> None:
        """Replaced once the handshake has learnt more (a token's label, a certificate)."""
        self._peer = peer

    @property
    def stream(self) -> trio.abc.Stream:
        """The underlying stream (owned by this channel)."""
        return self._stream

    async def receive(self) -> JSONObject:
        if self._receiving:
            raise trio.BusyResourceError("another task is already receiving on this channel")
        self._receiving = True
        try:
            if self._closed:
                raise trio.ClosedResourceError("channel was closed")
            await trio.lowlevel.checkpoint_if_cancelled()
            if self._pending or self._eof:
                await trio.lowlevel.cancel_shielded_checkpoint()
            while not self._pending:
                if self._eof:
                    raise trio.EndOfChannel
                data = await self._stream.receive_some(RECEIVE_SIZE)
                if data:
                    self.bytes_received += len(data)
                    self._pending.extend(self._framer.feed(data))
                else:
                    self._eof = True
                    self.dropped_at_eof = self._framer.close()
            return self._decode(self._pending.popleft())
        finally:
            self._receiving = False

    def receive_nowait(self) -> JSONObject:
        if self._receiving:
            raise trio.BusyResourceError("another task is already receiving on this channel")
        if self._closed:
            raise trio.ClosedResourceError("channel was closed")
        if self._pending:
            return self._decode(self._pending.popleft())
        if self._eof:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    def _decode(self, item: bytes | Oversized) -> JSONObject:
        if isinstance(item, Oversized):
            limit = self._framer.max_line_bytes
            raise MessageTooLarge(
                f"message larger than {limit} bytes",
                limit=limit,
                prefix=item.prefix,
                request_id=sniff_leading_id(item.prefix),
            )
        self.last_message_bytes = len(item)
        try:
            return decode(item)
        except ProtocolError as exc:
            exc.excerpt = item[:LOG_EXCERPT_BYTES]
            raise

    async def send(self, value: JSONObject) -> None:
        if not await self._send_batch((value,)):
            await trio.lowlevel.cancel_shielded_checkpoint()

    async def send_many(self, messages: Sequence[JSONObject]) -> None:
        """Send a batch with one write. Checks for cancellation, but yields to the scheduler only
        if it has to wait for the transport: a loop of ``send_many`` must yield elsewhere (the
        relay's pumps yield in ``receive``)."""
        await self._send_batch(messages)

    async def _send_batch(self, messages: Sequence[JSONObject]) -> bool:
        """Write ``messages``; True if that went through ``send_all`` (which yields)."""
        if self._sending:
            raise trio.BusyResourceError("another task is already sending on this channel")
        self._sending = True
        try:
            for message in messages:
                try:
                    validate(message)
                except InvalidMessage as exc:
                    raise ValueError(f"not a JSON-RPC message: {exc}") from None
            data = b"".join([encode(message) for message in messages])
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
        if self.send_timeout is None:
            await self._stream.send_all(data)
            return
        with trio.move_on_after(self.send_timeout) as waited:
            await self._stream.send_all(data)
        if waited.cancelled_caught:
            self._broken = True  # part of a line may be on the wire: nothing may follow it
            raise SendTimeout(f"the peer accepted nothing for {self.send_timeout:g}s")

    def _write_now(self, data: bytes) -> int:
        """Write what the kernel takes without waiting; return how many bytes that was."""
        fd = self._send_fd() if self._send_fd is not None else -1
        if fd < 0 or self._closed:
            return 0  # not a plain fd, or closed: send_all decides what to raise
        try:
            return os.write(fd, data)
        except BlockingIOError:
            return 0
        except OSError as exc:
            if exc.errno == errno.EBADF:
                raise trio.ClosedResourceError("stream was closed") from None
            raise trio.BrokenResourceError(f"write failed: {exc}") from exc

    async def send_eof(self) -> None:
        if not isinstance(self._stream, trio.abc.HalfCloseableStream):
            raise NotImplementedError(f"{type(self._stream).__name__} cannot half-close")
        await self._stream.send_eof()

    async def aclose(self) -> None:
        self._closed = True
        self._pending.clear()
        if self._sending or not isinstance(self._stream, trio.SSLStream):
            # A send stuck mid-write cannot be followed by TLS's close_notify; plain streams
            # close at once anyway.
            await trio.aclose_forcefully(self._stream) if self._sending else await self._stream.aclose()
            return
        # TLS says goodbye (close_notify) if the peer lets it, within CLOSE_TIMEOUT; a cancelled
        # SSLStream.aclose still closes the transport.
        with trio.move_on_after(CLOSE_TIMEOUT) as scope:
            scope.shield = True
            await self._stream.aclose()
