"""TLS on an accepted TCP socket, with OpenSSL reading and writing the socket itself.

``trio.SSLStream`` runs TLS over any trio stream: OpenSSL works on memory buffers and Python code
moves every record between them and the transport, with locks and retry loops around each call.
For a socket, the standard library's ``ssl.SSLSocket`` lets OpenSSL do that in C, and trio only
has to wait when OpenSSL says it must (``SSLWantReadError``, ``SSLWantWriteError``). On the
benchmark's round trip this halves what TLS adds to plain TCP.

:class:`TlsSocketStream` is the server side of ``tls:``, ``wss://`` and ``https://`` listeners. It
offers what the listeners use of ``trio.SSLStream`` (``do_handshake``, ``getpeercert``, the
stream methods) and two more methods: :meth:`TlsSocketStream.send_nowait`, for
:class:`~channels.StreamChannel`'s synchronous write, and :meth:`TlsSocketStream.send_eof`, TLS's
half-close, for a lingering close. Clients keep ``trio.SSLStream``.
"""

from __future__ import annotations

import errno
import os
import socket
import ssl
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar, final

import trio

from .fdio import RECEIVE_SIZE, SocketTls, discard_unread
from .fdio import TLS_STREAMS as TLS_STREAMS  # declared with SocketTls, named here as before
from .fdio import TlsStream as TlsStream

T = TypeVar("T")


@final
class TlsSocketStream(SocketTls):
    """A server-side TLS connection over a connected TCP socket.

    Args:
        stream: the accepted connection; this stream takes its socket over (``stream`` must not
            be used again) and closes it in :meth:`aclose`, or at once if this raises.
        context: the server's TLS context.
        https_compatible: treat a connection closed without TLS's goodbye (``close_notify``) as
            an ordinary end of stream, as HTTP does (``trio.SSLStream``'s flag of that name);
            otherwise reading one raises ``trio.BrokenResourceError``.

    The handshake runs in :meth:`do_handshake`, or in the first read or write. Like
    ``trio.SSLStream``, one task may read while another writes; two tasks reading (or writing)
    at once raise ``trio.BusyResourceError``; and a write that was cancelled or failed part-way
    breaks the writing side for good (OpenSSL may hold part of a record, which only the same bytes
    could complete).

    Raises:
        OSError: the peer already reset the connection.
    """

    def __init__(
        self, stream: trio.SocketStream, context: ssl.SSLContext, *, https_compatible: bool = False
    ) -> None:
        sock = socket.socket(fileno=stream.socket.detach())  # the same connection, owned here
        try:
            sock.setblocking(False)
            self._ssl = context.wrap_socket(
                sock,
                server_side=True,
                do_handshake_on_connect=False,
                suppress_ragged_eofs=https_compatible,
            )
        except BaseException:
            # The peer reset the connection already (OSError). If the SSLSocket had taken the
            # descriptor over, it goes with the exception; if not, this closes it.
            sock.close()
            raise
        self._handshaken = False
        self._write_broken = False
        self._eof_sent = False
        # After our goodbye, OpenSSL met the peer's data where it looked for the peer's, and no
        # longer decrypts: what comes is read as it is, for a lingering close to drop (send_eof).
        self._undecryptable = False
        self._receiving = False
        self._sending = False
        self._closed = False

    @property
    def ssl_object(self) -> ssl.SSLSocket:
        """The ``ssl.SSLSocket``: for its certificate, cipher and version, not for I/O."""
        return self._ssl

    def getpeercert(self, binary_form: bool = False) -> Any:
        """The client's certificate (mTLS), as ``ssl.SSLSocket.getpeercert`` returns it."""
        return self._ssl.getpeercert(binary_form)

    def fileno(self) -> int:
        """The socket's file descriptor; -1 once closed."""
        return -1 if self._closed else self._ssl.fileno()

    async def _wait(self, want: ssl.SSLError) -> None:
        """Wait for what OpenSSL asked for: the socket readable, or writable."""
        if isinstance(want, ssl.SSLWantWriteError):
            await trio.lowlevel.wait_writable(self._ssl)
        else:
            await trio.lowlevel.wait_readable(self._ssl)

    def _check_open(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError("stream was closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self._eof_sent:
            raise trio.ClosedResourceError("the write side was shut (send_eof)")
        if self._write_broken:
            raise trio.BrokenResourceError("an earlier write was cancelled or failed part-way")

    async def _until_done(self, operation: Callable[[], T]) -> T:
        """Call ``operation`` (one OpenSSL call) until it completes, waiting whenever OpenSSL asks.

        A checkpoint: if it never had to wait, it still yields once, shielded.

        Raises:
            trio.BrokenResourceError: the call failed; ``__cause__`` holds OpenSSL's reason.
            trio.ClosedResourceError: the stream was closed, before or during a wait.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        waited = False
        while True:
            try:
                result = operation()
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError) as want:
                await self._wait(want)
                waited = True
                self._check_open()
            except (ssl.SSLError, OSError) as exc:
                self._check_open()
                raise _failure(exc) from exc
            else:
                if not waited:
                    await trio.lowlevel.cancel_shielded_checkpoint()
                return result

    async def do_handshake(self) -> None:
        """Run the TLS handshake, if it has not run yet. Always a checkpoint.

        Raises:
            trio.BrokenResourceError: the handshake failed; ``__cause__`` holds OpenSSL's reason.
            trio.ClosedResourceError: the stream was closed.
        """
        self._check_open()
        if self._handshaken:
            await trio.lowlevel.checkpoint()
            return
        await self._until_done(self._ssl.do_handshake)
        self._handshaken = True

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        """Read and decrypt what has arrived, waiting if nothing has; ``b""`` at the end.

        Raises:
            trio.BrokenResourceError: the connection failed, or (without ``https_compatible``)
                ended without ``close_notify``.
            trio.ClosedResourceError: the stream was closed, before or during the wait.
            trio.BusyResourceError: another task is reading.
        """
        if self._receiving:
            raise trio.BusyResourceError("another task is already reading this stream")
        self._receiving = True
        try:
            if not self._handshaken:
                await self.do_handshake()
            self._check_open()
            return await self._until_done(partial(self._recv, max_bytes or RECEIVE_SIZE))
        finally:
            self._receiving = False

    def _recv(self, max_bytes: int) -> bytes:
        if self._undecryptable:
            try:
                return os.read(self._ssl.fileno(), max_bytes)
            except BlockingIOError:
                raise ssl.SSLWantReadError from None
        try:
            return self._ssl.recv(max_bytes)
        except ssl.SSLZeroReturnError:
            # The peer's close_notify after ours (send_eof): the end of its stream. (The ssl
            # module returns b"" for it only while our side has not said goodbye.)
            return b""

    def send_nowait(self, data: bytes | memoryview) -> int:
        """Encrypt and write ``data`` whole if the socket takes it now; return ``len(data)`` or 0.

        With 0, part of ``data`` may already be inside OpenSSL: the caller must go on with
        :meth:`send_all` of the same bytes (OpenSSL wants the same buffer again), and nothing
        else first. Never blocks, never yields.

        Raises:
            trio.BrokenResourceError: the connection failed.
            trio.ClosedResourceError: the stream was closed.
            trio.BusyResourceError: another task is writing.
        """
        if self._sending:
            raise trio.BusyResourceError("another task is already writing this stream")
        self._check_writable()
        if not self._handshaken:
            return 0
        try:
            return self._ssl.send(data)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return 0
        except (ssl.SSLError, OSError) as exc:
            self._write_broken = True
            raise _failure(exc) from exc

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Encrypt and write all of ``data``, waiting while the socket is full.

        Raises:
            trio.BrokenResourceError: the connection failed.
            trio.ClosedResourceError: the stream was closed, before or during the wait.
            trio.BusyResourceError: another task is writing.
        """
        if self._sending:
            raise trio.BusyResourceError("another task is already writing this stream")
        self._sending = True
        try:
            if not self._handshaken:
                await self.do_handshake()
            self._check_writable()
            view = memoryview(data)
            if not view:
                await trio.lowlevel.checkpoint()
            while view:  # once: OpenSSL takes the whole buffer (no SSL_MODE_ENABLE_PARTIAL_WRITE)
                view = view[await self._until_done(partial(self._ssl.send, view)) :]
        except BaseException:
            self._write_broken = True  # cancelled or failed: part of a record may be in OpenSSL
            raise
        finally:
            self._sending = False

    async def send_eof(self) -> None:
        """Say goodbye (``close_notify``) and shut the write side; reading goes on.

        TLS's half-close: the peer reads everything written before, then its end of stream, and
        may go on sending, which :meth:`receive_some` still reads until the peer's own
        ``close_notify`` (RFC 8446 §6.1 allows it; a TLS 1.2 peer answers with its goodbye). Does
        not wait for the peer's. Nothing may be written afterwards (``trio.ClosedResourceError``).

        Read after it only to drop what comes (a lingering close): if the peer's data was already
        in the socket, OpenSSL, looking for the peer's goodbye after sending its own, meets it
        and stops decrypting; :meth:`receive_some` then returns the bytes as they arrive (TLS
        records, not the peer's data) until the peer closes.

        Raises:
            trio.BrokenResourceError: the connection failed.
            trio.ClosedResourceError: the stream was closed, or the write side already shut.
            trio.BusyResourceError: another task is writing.
        """
        if self._sending:
            raise trio.BusyResourceError("another task is already writing this stream")
        self._sending = True
        try:
            if not self._handshaken:
                await self.do_handshake()
            self._check_writable()
            await self._until_done(self._send_close_notify)
            self._eof_sent = True
        except BaseException:
            self._write_broken = True  # cancelled or failed: part of the alert may be in OpenSSL
            raise
        finally:
            self._sending = False

    def _send_close_notify(self) -> None:
        """One step of sending ``close_notify``; the SSL errors of ``_until_done`` mean the same.

        ``unwrap`` (OpenSSL's ``SSL_shutdown``) sends the alert, then looks for the peer's: "wants
        to read" means that the alert is out, and the peer's has not come (the usual case; it is
        read by :meth:`receive_some`). Returning means both are done.
        """
        try:
            self._ssl.unwrap()
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLError as exc:
            if exc.reason != "APPLICATION_DATA_AFTER_CLOSE_NOTIFY":
                raise
            # The alert is out (OpenSSL names the error after it); then it read the peer's data
            # instead of its goodbye and gave up on reading. Reads are now the socket's own.
            self._undecryptable = True

    async def wait_send_all_might_not_block(self) -> None:
        """Wait until the socket can take more."""
        self._check_open()
        await trio.lowlevel.wait_writable(self._ssl)

    async def aclose(self) -> None:
        """Say goodbye (``close_notify``) if the socket takes it at once, and close.

        Idempotent; never waits for the peer, and wakes tasks blocked reading or writing (they
        raise ``trio.ClosedResourceError``). Always a checkpoint.
        """
        if not self._closed:
            self._closed = True
            if self._handshaken and not self._sending and not self._write_broken:  # not mid-record
                try:
                    self._ssl.unwrap()
                except (ssl.SSLError, OSError, ValueError):
                    pass  # no room, or the peer is gone: closing is all that is left
            discard_unread(self._ssl.fileno())
            trio.lowlevel.notify_closing(self._ssl)
            self._ssl.close()
        await trio.lowlevel.checkpoint()


def _failure(exc: BaseException) -> trio.ClosedResourceError | trio.BrokenResourceError:
    """What a failed OpenSSL call on the socket means for the stream's user."""
    if isinstance(exc, OSError) and exc.errno == errno.EBADF:
        return trio.ClosedResourceError("stream was closed")
    reason = getattr(exc, "reason", None) or str(exc)
    return trio.BrokenResourceError(f"TLS connection failed: {reason}")
