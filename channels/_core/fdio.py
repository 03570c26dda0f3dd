"""Reading and writing a plain socket or pipe directly, bypassing trio's stream wrappers.

What every channel that reads a socket itself shares: the read size, finding a stream's file
descriptor, one read that waits only when the kernel has nothing, one write of what the kernel
takes without waiting, and dropping unread bytes before a close. The newline and WebSocket
channels and the HTTP connection use these on their hot paths.
"""

from __future__ import annotations

import errno
import os
import select
import stat
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import trio

# How much one read asks for. 64 KiB holds hundreds of small MCP messages, so a pipelined peer is
# served by one system call per batch; it is also trio's DEFAULT_RECEIVE_SIZE for sockets.
RECEIVE_SIZE = 65536

_Arg = TypeVar("_Arg")
_Read = TypeVar("_Read")

# The most reads discard_unread makes (1 MiB: far more than a handshake, a goodbye or a close frame
# in flight; a peer still sending after that is reset, and cannot hold the event loop).
MAX_DISCARD_READS = 16
# The most buffers one writev takes (Linux's IOV_MAX, 1024); any further ones wait their turn.
WRITEV_MAX_BUFFERS = 1024


class SocketTls(trio.abc.Stream):
    """A TLS listener's stream, OpenSSL on the socket (:class:`~channels._core.tlsstream.TlsSocketStream`).

    Declared here so that :class:`~channels.StreamChannel` and the listeners can tell such a stream
    apart without importing the TLS machinery, which a daemon serving Unix sockets or plain TCP
    never uses (0.06 MiB). It writes without waiting and half-closes, as a socket does.
    """

    @abstractmethod
    def send_nowait(self, data: bytes | memoryview) -> int:
        """Write what the socket takes now; at most one progress piece, never waiting."""

    @abstractmethod
    async def send_eof(self) -> None:
        """TLS's goodbye (``close_notify``); receiving goes on."""

    @abstractmethod
    async def do_handshake(self) -> None:
        """Run the TLS handshake, if it has not run yet."""

    @abstractmethod
    def getpeercert(self, binary_form: bool = False) -> Any:
        """The client's certificate (mTLS), as ``ssl.SSLSocket.getpeercert`` returns it."""


TLS_STREAMS = (trio.SSLStream, SocketTls)
"""The stream types that carry TLS (for ``isinstance``): a client's, and a listener's."""

TlsStream = trio.SSLStream[Any] | SocketTls


def discard_unread(fd: int) -> None:
    """Read and drop what the socket ``fd`` has received and nobody read, without waiting.

    Called just before closing: a socket closed with unread bytes is reset (RST), and a reset can
    destroy what was sent last (a TLS alert, ``close_notify``, a WebSocket close frame) before
    the peer reads it.
    """
    try:
        for _ in range(MAX_DISCARD_READS):
            if not os.read(fd, RECEIVE_SIZE):
                return
    except OSError:
        pass  # BlockingIOError: nothing more; anything else: closing anyway


def _plain_fd_getter(stream: trio.abc.Stream, half: str) -> Callable[[], int] | None:
    if isinstance(stream, trio.StapledStream):
        return _plain_fd_getter(getattr(stream, half), half)
    if isinstance(stream, trio.SocketStream):
        return stream.socket.fileno
    if isinstance(stream, trio.lowlevel.FdStream):
        return stream.fileno
    return None


def send_fd_getter(stream: trio.abc.Stream) -> Callable[[], int] | None:
    """How to find the file descriptor ``stream`` sends on, if it is a plain socket or pipe.

    The getter is called for each write, because the fd becomes -1 once the stream is closed (and
    its number may then be reused by another file).
    """
    return _plain_fd_getter(stream, "send_stream")


def receive_fd_getter(stream: trio.abc.Stream) -> Callable[[], int] | None:
    """How to find the file descriptor ``stream`` receives on, if it is a plain socket or pipe.

    As :func:`send_fd_getter`, for :func:`receive_some`.
    """
    return _plain_fd_getter(stream, "receive_stream")


async def receive_some(
    stream: trio.abc.ReceiveStream,
    receive_fd: Callable[[], int] | None,
    size: int = RECEIVE_SIZE,
    *,
    wait_first: bool = False,
) -> bytes | bytearray:
    """``stream.receive_some(size)``, reading the fd ``receive_fd`` returns directly.

    trio's ``FdStream`` yields to the scheduler before every read, and ``SocketStream`` wraps each
    one in an async context manager; on a relay's path, where the reader has just been woken by the
    bytes it is about to read, that is a trip around the event loop (or a few µs of bookkeeping)
    per message for nothing. This reads first and waits (``wait_readable``) only if the kernel has
    nothing; if it did not have to wait, it still yields once, shielded, so that a reader of a
    peer that never pauses cannot starve the other tasks. Like ``receive_some`` it is a checkpoint;
    the caller checks for cancellation first (the channels' ``receive`` does). A stream without a
    plain fd (TLS) is simply read with its ``receive_some``.

    ``wait_first``: wait until the fd is readable before reading. A caller whose last read returned
    less than it asked for passes it: the kernel had nothing more then, so a read straight away
    would most likely fail with ``EAGAIN``, and that failure (a system call and a Python exception,
    about 2 µs here) is on every round trip of a relay that keeps up with its peer. If bytes did
    arrive meanwhile, the wait returns at once: the result is the same, at the cost of the same one
    trip through the scheduler a read that did not wait makes anyway.

    Returns:
        What one read returned; ``b""`` at the end of the stream.

    Raises:
        trio.ClosedResourceError: the stream was closed, before or during the wait.
        trio.BrokenResourceError: the read failed (a reset connection...).
    """
    if receive_fd is None:
        return await stream.receive_some(size)
    return await _read_fd(receive_fd, os.read, size, wait_first)


async def receive_into(receive_fd: Callable[[], int], buffers: Sequence[memoryview | bytearray]) -> int:
    """Read into ``buffers``, in turn, what the socket ``receive_fd`` returns holds; 0 at the end.

    :func:`receive_some` for buffers the caller owns (``readv``), with the same waiting, yielding
    and errors.
    """
    return await _read_fd(receive_fd, os.readv, buffers)


async def _read_fd(
    receive_fd: Callable[[], int], read: Callable[[int, _Arg], _Read], arg: _Arg, wait_first: bool = False
) -> _Read:
    """``read(fd, arg)`` on the fd ``receive_fd`` returns, waiting only if the kernel has nothing.

    The loop :func:`receive_some` and :func:`receive_into` share: see :func:`receive_some`.
    """
    waited = False
    while True:
        fd = receive_fd()
        if fd < 0:
            raise trio.ClosedResourceError("stream was closed")
        if wait_first and not waited:
            await trio.lowlevel.wait_readable(fd)  # as below; the fd is looked up again after it
            waited = True
            continue
        try:
            data = read(fd, arg)
        except BlockingIOError:
            data = None  # waited for outside the handler, which would keep the exception alive
        except OSError as exc:
            if exc.errno == errno.EBADF:
                raise trio.ClosedResourceError("stream was closed") from None
            raise trio.BrokenResourceError(f"read failed: {exc}") from exc
        if data is None:
            await trio.lowlevel.wait_readable(fd)  # aclose() elsewhere wakes it: ClosedResourceError
            waited = True
            continue
        if not waited:
            await trio.lowlevel.cancel_shielded_checkpoint()
        return data


def write_now(send_fd: Callable[[], int] | None, data: bytes | memoryview) -> int:
    """Write to the fd ``send_fd`` returns what the kernel takes without waiting.

    Returns how many bytes that was: 0 if the stream has no plain fd (TLS...) or is closed, so
    that the caller's ``send_all`` decides what to raise, or if the kernel's buffer is full.

    Raises:
        trio.ClosedResourceError: the fd was closed under us.
        trio.BrokenResourceError: the write failed (the peer reset the connection...).
    """
    return _write_fd(send_fd, os.write, data)


def write_whole_now(send_fd: Callable[[], int] | None, data: bytes) -> bool:
    """Write ``data`` whole to the pipe ``send_fd`` returns, without waiting, or none of it.

    Whether it was written. Only a pipe promises all or nothing, and only for a write of at most
    ``PIPE_BUF`` bytes (pipe(7): such a write is atomic, and where the pipe has no room for all of
    it a non-blocking one fails with ``EAGAIN``). Anything else (a socket, a longer write, a full
    pipe, a closed or failed fd) writes nothing and returns False, for the caller's ordinary send
    to write it and say what went wrong. One ``fstat`` tells a pipe: the fd may change hands.
    """
    fd = send_fd() if send_fd is not None else -1
    if fd < 0 or len(data) > select.PIPE_BUF:
        return False
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode) and os.write(fd, data) == len(data)
    except OSError:  # EAGAIN (no room for all of it), EPIPE, EBADF...: nothing was written
        return False


def writev_now(send_fd: Callable[[], int] | None, parts: Sequence[bytes | memoryview]) -> int:
    """:func:`write_now` for several buffers in turn, by one ``writev``.

    Only the first ``WRITEV_MAX_BUFFERS`` are offered; the caller writes the rest next.
    """
    return _write_fd(send_fd, os.writev, parts[:WRITEV_MAX_BUFFERS])


def _write_fd(send_fd: Callable[[], int] | None, write: Callable[[int, _Arg], int], arg: _Arg) -> int:
    fd = send_fd() if send_fd is not None else -1
    if fd < 0:
        return 0
    try:
        return write(fd, arg)
    except BlockingIOError:
        return 0
    except OSError as exc:
        if exc.errno == errno.EBADF:
            raise trio.ClosedResourceError("stream was closed") from None
        raise trio.BrokenResourceError(f"write failed: {exc}") from exc


async def send_all_within(stream: trio.abc.SendStream, data: memoryview, timeout: float | None) -> bool:
    """``stream.send_all(data)``, given at most ``timeout`` seconds if set.

    Returns True if the time ran out: then part of ``data`` may be on the wire, and the caller
    must write nothing more to ``stream``.
    """
    if timeout is None:
        await stream.send_all(data)
        return False
    with trio.move_on_after(timeout) as waited:
        await stream.send_all(data)
    return waited.cancelled_caught


# The piece :func:`send_all_progressing` gives its own deadline: what a socket buffer takes at once
# on a fresh connection, so each piece is a step a reading client completes often.
PROGRESS_PIECE = 65536


async def send_all_progressing(
    stream: trio.abc.SendStream,
    data: memoryview,
    timeout: float | None,
    on_progress: Callable[[], object] | None = None,
) -> bool:
    """``stream.send_all(data)`` in pieces, each given at most ``timeout`` seconds if set.

    The deadline is on time without progress, not on the whole write: a peer that reads a large
    write slowly but steadily is not cut off, one that stops reading is, ``timeout`` seconds
    after the last piece it took. ``on_progress()``, if given, is called after each piece. With
    no ``timeout`` the write is one ``send_all``, as the pieces would only cost time.

    Returns True if a piece's time ran out: then part of ``data`` may be on the wire, and the
    caller must write nothing more to ``stream``.
    """
    if timeout is None and on_progress is None:
        await stream.send_all(data)
        return False
    for start in range(0, len(data), PROGRESS_PIECE):
        if await send_all_within(stream, data[start : start + PROGRESS_PIECE], timeout):
            return True
        if on_progress is not None:
            on_progress()
    return False
