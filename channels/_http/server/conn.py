"""One HTTP/1.1 server connection on a trio stream, with the limits a daemon needs.

Requests are parsed by httptools, in :mod:`channels._http.server.request` (with the limits that
concern the bytes themselves: head size, body size, the head check). Responses are written
here: a status line and headers the bridge itself chose, with ``Content-Length``, or chunked for
server-sent events (close-delimited for an HTTP/1.0 client).

What a parser leaves to its user and is a matter of time is done here: bounded reads (a request
head must arrive within ``head_timeout`` of its first byte, a body within ``body_timeout``),
``Expect: 100-continue``, keep-alive with an idle timeout, bounded writes (a client that reads
nothing of its response for ``send_timeout`` is cut off, one that reads it slowly is not), and
noticing that the client went away while its response is pending.

A body over the limit is read to its end and thrown away, within ``discard_time`` and with no
pause over ``discard_idle``, then answered 413 on a connection that stays usable; a refusal sent
while the client may still be sending is followed by a lingering close (the write side shut, what
comes read and dropped within the same bounds), so that the client reads the refusal instead of a
reset. Both as web servers do it: nginx's ``lingering_close``.

One task serves the connection: it reads a request, answers it (possibly streaming for a long
time), then reads the next. While it answers, :meth:`HttpConnection.wait_disconnected` may watch
the socket from another task, which must be done (cancelled) before the next request is read: the
two never read at once. A client that pipelines its next request meanwhile loses nothing.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from ..._core.fdio import RECEIVE_SIZE, SocketTls, send_all_progressing, send_fd_getter, write_now
from .connvalues import ConnectionLimits, HeaderBlock, response_head
from .request import (
    DISCARD_BYTES,
    MAX_HEAD_BYTES,
    BadRequest,
    HeadCheck,
    Headers,
    Parsing,
    Request,
    read_ready,
    unreadable_body,
)

# A body up to this size is sent in the same write as its head (one system call); a larger one
# after it, rather than copied to join them (a socket buffer holds about this much at once).
LARGE_BODY = 64 * 1024
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
LAST_CHUNK = b"0\r\n\r\n"  # ends a chunked body (no trailer)
# What HttpConnection.respond_now() wrote of a response: none of it, all of it, or a part.
NOT_SENT, SENT, PART_SENT = 0, 1, 2


class HttpConnection:
    """One accepted stream; the serving task owns it and closes it with :meth:`aclose`.

    Args:
        stream: the connection (TLS already negotiated), owned from now on.
        limits: timeouts and the body limit.
        check_head: run on each request's head before its body is read (see
            :data:`~channels._http.server.request.HeadCheck`).
    """

    def __init__(
        self, stream: trio.abc.Stream, limits: ConnectionLimits, check_head: HeadCheck | None = None
    ) -> None:
        self.stream = stream
        self.limits = limits
        self.parsing = Parsing(limits.max_body, check_head)
        self._unparsed = bytearray()  # read while a response was pending, parsed with the next
        self._unsent = memoryview(b"")  # what respond_now() left for finish_response()
        self._send_fd = send_fd_getter(stream)
        self.socket = stream.socket if isinstance(stream, trio.SocketStream) else None  # a plain one
        self._peer_closed = False
        self._broken = False
        self._keep_alive = True
        self._http10 = False
        self._responding = False  # a request was handed out and its response is not complete
        self._streaming = False
        self._head_request = False  # a response to HEAD has no body
        self.on_progress: Callable[[], object] = lambda: None  # the client took part of a write
        self.phase = "idle"
        self.read_deadline = float("inf")
        self.read_scope: trio.CancelScope | None = None  # what expire() cancels: the reads' scope
        self.bytes_received = 0
        self.bytes_sent = 0
        self.closing = False  # close the connection after the current response (the server stops)

    @property
    def reusable(self) -> bool:
        """Whether another request may follow on this connection."""
        return (
            not (self._broken or self._peer_closed or self.closing or self._responding) and self._keep_alive
        )

    async def next_request(self, *, first: bool) -> Request | None:
        """Read the next request, or ``None`` if the client closed.

        The time it may take is not enforced here: :attr:`read_deadline` says until when the
        current phase (:attr:`phase`: ``"idle"``, ``"head"``, ``"body"``, ``"discard"``) may last,
        and the caller cancels the read once it passed (see :mod:`channels._core.ticker`), then
        asks :meth:`timed_out` what to answer.

        Args:
            first: this is the connection's first request (the idle timeout does not apply: the
                client connected to send something, so only the head timeout does).

        Raises:
            BadRequest: malformed, too large or too slow; the caller answers it with
                :meth:`refuse`, and the connection goes on only if it is ``keep_alive`` (an
                over-limit body read to its end).
        """
        parsing = self.parsing
        self.phase = "head" if first else "idle"
        now = trio.current_time()  # read again only after a wait (most requests come in one read)
        self.read_deadline = now + (self.limits.head_timeout if first else self.limits.idle_timeout)
        if self._unparsed:
            data, self._unparsed = bytes(self._unparsed), bytearray()
            parsing.feed(data)
        discard_until = float("inf")
        while not parsing.done:
            if parsing.deferred is not None:
                raise parsing.deferred
            if parsing.upgraded:
                return None
            if parsing.started and self.phase == "idle":
                self.phase, self.read_deadline = "head", now + self.limits.head_timeout
            if parsing.discarding:
                if self.phase != "discard":
                    self.phase, discard_until = "discard", now + self.limits.discard_time
                self.read_deadline = min(discard_until, now + self.limits.discard_idle)
            elif parsing.head_done and self.phase != "body":
                self.phase, self.read_deadline = "body", now + self.limits.body_timeout
                if parsing.expects_continue:
                    parsing.expects_continue = False
                    if not parsing.http10_head():
                        await self._send(CONTINUE)
            data = await self._receive(expect_wait=not first and not parsing.started)
            if not data:
                if parsing.started:
                    raise BadRequest(400, "the connection closed in the middle of a request")
                return None
            parsing.feed(data)
            if not parsing.done:
                now = trio.current_time()
        request, keep_alive = parsing.done.popleft()
        self.phase = "answering"
        self._keep_alive = keep_alive
        self._responding = True
        if isinstance(request, BadRequest):  # an over-limit body, read to its end
            self._http10 = self._head_request = False
            try:
                raise request
            finally:
                del request  # the local would hold this frame, which its traceback holds: a cycle
        self._http10 = request.http_version == "1.0"
        self._head_request = request.method == "HEAD"
        return request

    @property
    def waiting_for_request(self) -> bool:
        """Reading, and no byte of the next request has come (a keep-alive or new connection)."""
        return self.phase in ("idle", "head") and not self.parsing.started and not self._unparsed

    @property
    def deadline(self) -> float:
        """When the current read phase must end (a :class:`~channels._core.ticker.Waiter`)."""
        return self.read_deadline

    def expire(self) -> None:
        """The read took too long, or the server is stopping: cancel :attr:`read_scope`."""
        if self.read_scope is not None:
            self.read_scope.cancel()

    def timed_out(self) -> BadRequest | None:
        """Why the read that :attr:`read_deadline` ended failed: 408, or ``None`` if it was idle."""
        if self.phase == "discard":  # an over-limit body that did not end in time: 413 and close
            return self.parsing.too_large()
        if self.phase == "body":
            return BadRequest(408, f"no complete body within {self.limits.body_timeout:g}s")
        if self.phase == "head" and (self.parsing.started or self._unparsed):
            return BadRequest(408, f"no complete request head within {self.limits.head_timeout:g}s")
        return None  # idle, or connected and silent: closed without a word

    async def _receive(self, *, expect_wait: bool = False) -> bytes:
        """The next bytes from the client, ``b""`` once it closed.

        ``expect_wait``: the client has probably sent nothing yet (its next request, after a response):
        wait for readability, then read (``read_ready``), rather than a read that finds nothing first.
        """
        if self._peer_closed:
            return b""
        data: bytes | bytearray | None = None
        try:
            if expect_wait and self.socket is not None:
                await trio.lowlevel.wait_readable(self.socket)
                data = read_ready(self.socket.fileno())
            if data is None:
                data = await self.stream.receive_some(RECEIVE_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        if not data:
            self._peer_closed = True
        self.bytes_received += len(data)
        return bytes(data)

    def keep(self, data: bytes) -> None:
        """Bytes another wait read from :attr:`socket`, kept for :meth:`next_request`; ``b""``: the end."""
        self.bytes_received += len(data)
        self._unparsed += data
        if not data:
            self._peer_closed = True

    def _closes(self) -> bool:
        return self._peer_closed or self.closing or not self._keep_alive

    def _response_head(self, status: int, headers: HeaderBlock, body: bytes) -> bytes:
        length = b"" if status in (204, 304) else b"content-length: %d\r\n" % len(body)  # RFC 9110 §8.6
        if closes := self._closes():
            self._keep_alive = False
        return response_head(status, headers, length + (b"connection: close\r\n\r\n" if closes else b"\r\n"))

    async def respond(self, status: int, headers: HeaderBlock, body: bytes = b"") -> None:
        """Send a complete response with ``Content-Length``; ``headers`` may be encoded already.

        Raises:
            trio.BrokenResourceError: the client is gone or did not read in time.
        """
        head = self._response_head(status, headers, body)
        if self._head_request:
            await self._send(head)
        elif len(body) <= LARGE_BODY:
            await self._send(head + body)  # one write for the whole response
        else:  # no copy of a large body just to prepend the head
            await self._send(head)
            await self._send(body)
        self._responding = False

    def respond_now(self, status: int, headers: HeaderBlock, body: bytes) -> int:
        """Send a small whole response without waiting, from any task; how much of it went.

        :data:`NOT_SENT`, :data:`SENT`, or :data:`PART_SENT` (the rest is :meth:`finish_response`'s).
        For a reply routed to a response parked in its JSON wait (``response.JsonAnswer``): the
        routing task writes what the kernel takes at once, rather than wake the connection's task
        to write it a scheduler pass later. Nothing is written for a large body, a HEAD request,
        TLS, a full buffer or a broken connection: the connection's task then answers as usual.
        """
        if self._broken or self._head_request or len(body) > LARGE_BODY:
            return NOT_SENT
        data = self._response_head(status, headers, body) + body
        try:
            sent = write_now(self._send_fd, data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return NOT_SENT  # the connection's own write finds it broken and says so
        if not sent:
            return NOT_SENT
        self.bytes_sent += sent
        if sent == len(data):
            self._responding = False
            return SENT
        self.on_progress()
        self._unsent = memoryview(data)[sent:]
        return PART_SENT

    async def finish_response(self) -> None:
        """Send what :meth:`respond_now` left (:data:`PART_SENT`); as :meth:`respond`, raises."""
        rest, self._unsent = self._unsent, memoryview(b"")
        await self._send(rest)
        self._responding = False

    async def start_stream(self, status: int, headers: Headers, first: bytes = b"") -> None:
        """Send the head of a response whose body follows in pieces (chunked on HTTP/1.1).

        ``first``: the body's first piece, sent in the same write as the head (one system call,
        one segment with ``TCP_NODELAY``) where :meth:`send_body` would send it after.

        Raises:
            trio.BrokenResourceError: the client is gone or did not read in time.
        """
        self._streaming = True
        if self._http10:  # no chunked encoding: the end of the connection ends the body
            self._keep_alive = False
            tail = b"connection: close\r\n\r\n"
        elif self._closes():
            self._keep_alive = False
            tail = b"transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        else:
            tail = b"transfer-encoding: chunked\r\n\r\n"
        await self._send(response_head(status, headers, tail) + self._chunk(first))

    async def send_body(self, data: bytes, *, last: bool = False) -> None:
        """Send the next piece of a streamed body; with ``last``, end the response in the same write.

        Raises:
            trio.BrokenResourceError: the client is gone or did not read in time.
        """
        if last:
            await self._send(self._chunk(data) + (b"" if self._http10 else LAST_CHUNK))
            self._streaming = False
            self._responding = False
        elif data:
            await self._send(self._chunk(data))

    def _chunk(self, data: bytes) -> bytes:
        if not data or self._http10:
            return data
        return b"%x\r\n%s\r\n" % (len(data), data)

    async def _send(self, data: bytes | memoryview) -> None:
        if self._broken:
            raise trio.BrokenResourceError("the connection is broken")
        try:
            # Most responses fit the socket buffer: one synchronous write, no scheduling.
            sent = write_now(self._send_fd, data)
            if sent == len(data):
                self.bytes_sent += sent
                await trio.lowlevel.checkpoint_if_cancelled()
                return
            if sent:
                self.on_progress()
            rest, timeout = memoryview(data)[sent:], self.limits.send_timeout
            timed_out = await send_all_progressing(self.stream, rest, timeout, self.on_progress)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self._broken = True
            raise trio.BrokenResourceError("the client went away") from exc
        except BaseException:
            self._broken = True  # cancelled part-way: the response may be cut
            raise
        if timed_out:
            self._broken = True
            raise trio.BrokenResourceError(f"the client did not read within {self.limits.send_timeout:g}s")
        self.bytes_sent += len(data)

    async def wait_disconnected(self) -> None:
        """Return once the client has closed its side (or the connection broke).

        Bytes that arrive meanwhile (a pipelined next request) are kept for
        :meth:`next_request`. Meant to run beside a pending response, and be cancelled when the
        response is done.
        """
        while data := await self._receive():
            self._unparsed += data
            if len(self._unparsed) > MAX_HEAD_BYTES + self.limits.max_body:
                await trio.sleep_forever()  # a pipelining client must wait for its answer

    async def refuse(self, error: BadRequest) -> None:
        """Answer a :class:`BadRequest` (unless a response was begun).

        The connection is done after it, unless the error is ``keep_alive`` (then
        :attr:`reusable` says whether the next request may follow). If the client may still be
        sending, a lingering close lets it read the answer: see :meth:`_linger`.
        """
        if error.keep_alive and not self._streaming:
            await self.respond(error.status, error.headers, error.body or b"")
            return
        if not self._streaming:
            self._keep_alive = False
            if error.body is not None:
                headers, body = error.headers, error.body
            else:
                headers, body = unreadable_body(error)
            try:
                await self.respond(error.status, headers, body)
                if self.parsing.started and not self._peer_closed:
                    await self._linger()
            except trio.BrokenResourceError:
                pass
        self._broken = True

    async def _linger(self) -> None:
        """Shut the write side, then read and drop what the client still sends, within bounds.

        A client that sends its whole body before reading (httpx, Node's fetch) would get a
        reset, not the answer, if the connection closed with its bytes unread (RFC 9112 §9.6).
        Ends at the client's close, after ``discard_time`` in all, ``discard_idle`` without a
        byte, or :data:`~channels._http.server.request.DISCARD_BYTES` read. Over https:// the shut
        is TLS's ``close_notify`` (``TlsSocketStream.send_eof``), within ``send_timeout``: the
        client sees the end now, not at the close, ``discard_time`` later.
        """
        if isinstance(self.stream, trio.abc.HalfCloseableStream | SocketTls):
            try:
                with trio.fail_after(self.limits.send_timeout):
                    await self.stream.send_eof()
            except (trio.TooSlowError, trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                return
        start = self.bytes_received
        with trio.move_on_after(self.limits.discard_time):
            while self.bytes_received - start <= DISCARD_BYTES:
                with trio.move_on_after(self.limits.discard_idle):
                    if await self._receive():
                        continue
                return

    async def aclose(self) -> None:
        """Close the connection (idempotent); its parser is released (:meth:`.Parsing.release`)."""
        self._broken = True
        self.parsing.release()
        await trio.aclose_forcefully(self.stream)
