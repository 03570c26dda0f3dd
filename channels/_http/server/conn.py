"""One HTTP/1.1 server connection on a trio stream, with the limits a daemon needs.

Requests are parsed by httptools (llhttp, Node.js's parser, as uvicorn uses it): on a small
request it costs a few microseconds where h11 costs about seventy, which is most of what a
Streamable HTTP call through the bridge costs (see README, Performance). Responses are written
here: a status line and headers the bridge itself chose, with ``Content-Length``, or chunked for
server-sent events (close-delimited for an HTTP/1.0 client).

What a parser leaves to its user is done here too: bounded reads (a request head must arrive
within ``head_timeout`` of its first byte and fit in :data:`MAX_HEAD_BYTES`, a body within
``body_timeout`` and under ``max_body`` bytes), ``Expect: 100-continue``, keep-alive with an idle
timeout, bounded writes (a client that does not read its response is cut off after
``send_timeout``), and noticing that the client went away while its response is pending.

One task serves the connection: it reads a request, answers it (possibly streaming for a long
time), then reads the next. While it answers, :meth:`HttpConnection.wait_disconnected` may watch
the socket from another task, which must be done (cancelled) before the next request is read: the
two never read at once. A client that pipelines its next request meanwhile loses nothing.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from http import HTTPStatus

import attrs
import httptools
import trio

from ..._core.fdio import RECEIVE_SIZE
from ..._core.stream import send_all_within, send_fd_getter, write_now

Headers = Sequence[tuple[bytes, bytes]]

# Longest request head (request line and headers) accepted: nginx's large_client_header_buffers
# allow 4 x 8 KiB, h11's default is 16 KiB. Longer heads get 431. (Counted per read: a head that
# ends within the read that began it may be up to one read, 64 KiB, long.)
MAX_HEAD_BYTES = 32 * 1024
SERVER_HEADER = b"server: mcp-bridge\r\n"
# A body up to this size is sent in the same write as its head (one system call); a larger one
# after it, rather than copied to join them (a socket buffer holds about this much at once).
LARGE_BODY = 64 * 1024
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def _status_line(status: int) -> bytes:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    return f"HTTP/1.1 {status} {phrase}\r\n".encode()


_STATUS_LINES = {status.value: _status_line(status.value) for status in HTTPStatus}


@attrs.frozen
class Request:
    """One complete HTTP request.

    Attributes:
        method: ``"POST"``, ``"GET"``...
        target: the request target as sent (path and query).
        headers: every header, names lower-case, in order, ``Host`` included.
        body: the whole body.
        http_version: ``"1.1"`` or ``"1.0"``.
        credential: the label of the token the head check accepted, if one was asked for.
    """

    method: str
    target: str
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    http_version: str = "1.1"
    credential: str | None = None

    @property
    def path(self) -> str:
        """The target without its query."""
        return self.target.partition("?")[0]

    @property
    def query(self) -> str:
        """The target's query, without ``?``."""
        return self.target.partition("?")[2]

    def header(self, name: bytes) -> bytes | None:
        """The value of header ``name`` (lower-case) if it appears exactly once, else ``None``."""
        values = [value for key, value in self.headers if key == name]
        return values[0] if len(values) == 1 else None


class BadRequest(Exception):
    """A request that cannot be read, or is refused on its head alone.

    It is answered with ``status`` (and ``headers`` and ``body`` if given, else the message as
    text) and the connection is closed, its body unread.
    """

    def __init__(
        self, status: int, message: str, *, headers: Headers = (), body: bytes | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers
        self.body = body


HeadCheck = Callable[[bytes, bytes, list[tuple[bytes, bytes]]], "BadRequest | str | None"]
"""Called with a request's method, target and headers as soon as its head is in, before its body
is read or ``100 Continue`` is sent: returns a :class:`BadRequest` to refuse it (Host, Origin,
token), or the label of the token it presented (``None`` if none is asked for)."""


@attrs.frozen
class ConnectionLimits:
    """How long and how much one HTTP connection may take.

    Attributes:
        head_timeout: seconds from the first byte of a request to the end of its head (slowloris).
        body_timeout: seconds to receive a whole body once the head is in.
        idle_timeout: seconds a kept-alive connection may wait for its next request.
        send_timeout: seconds a write may wait for the client to read.
        max_body: the longest body accepted (413 beyond).
    """

    head_timeout: float
    body_timeout: float
    idle_timeout: float
    send_timeout: float
    max_body: int


class _Parsing:
    """httptools' callbacks: they assemble requests, which :class:`HttpConnection` hands out.

    A callback cannot stop the parser cleanly, so a limit it finds is kept in :attr:`error`
    and raised by the caller after ``feed_data``.
    """

    def __init__(self, max_body: int, check_head: HeadCheck | None) -> None:
        self.max_body = max_body
        self.check_head = check_head
        self.credential: str | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.done: collections.deque[tuple[Request, bool]] = collections.deque()
        self.error: BadRequest | None = None
        self.started = False  # a request has begun and is not complete
        self.head_done = False
        self.head_bytes = 0
        self.expects_continue = False
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        # One growing buffer, not a list of the reads: a large body then lives in one mapping that
        # is returned to the system when freed, instead of a heap of 64 KiB pieces that fragments.
        self._body = bytearray()
        self._size = 0

    def on_message_begin(self) -> None:
        self.started, self.head_done, self.head_bytes = True, False, 0
        self._url, self._headers, self._body, self._size = b"", [], bytearray(), 0

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.head_done:  # trailers of a chunked body are dropped: no limit counts them
            self._headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.head_done = True
        if self.check_head is not None:
            outcome = self.check_head(self.parser.get_method(), self._url, self._headers)
            if isinstance(outcome, BadRequest):
                self.error = outcome
                return
            self.credential = outcome
        for name, value in self._headers:
            if name == b"content-length" and value.isdigit() and int(value) > self.max_body:
                self.error = BadRequest(
                    413, f"the body ({int(value)} bytes) is over the limit of {self.max_body}"
                )
            elif name == b"expect" and value.lower() == b"100-continue":
                self.expects_continue = True

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > self.max_body:
            self.error = self.error or BadRequest(413, f"the body is over the limit of {self.max_body} bytes")
        elif self.error is None:
            self._body += body

    def on_message_complete(self) -> None:
        parser = self.parser
        request = Request(
            parser.get_method().decode("ascii", "replace"),
            self._url.decode("ascii", "replace"),
            tuple(self._headers),
            bytes(self._body),
            parser.get_http_version(),
            self.credential,
        )
        self._body = bytearray()  # not kept until the next request begins
        self.done.append((request, parser.should_keep_alive()))
        self.started = self.head_done = self.expects_continue = False


class HttpConnection:
    """One accepted stream; the serving task owns it and closes it with :meth:`aclose`.

    Args:
        stream: the connection (TLS already negotiated), owned from now on.
        limits: timeouts and the body limit.
        check_head: run on each request's head before its body is read (see :data:`HeadCheck`).
    """

    def __init__(
        self, stream: trio.abc.Stream, limits: ConnectionLimits, check_head: HeadCheck | None = None
    ) -> None:
        self.stream = stream
        self.limits = limits
        self._parsing = _Parsing(limits.max_body, check_head)
        self._unparsed = bytearray()  # read while a response was pending, parsed with the next
        self._upgraded = False  # an Upgrade request or a parse error: parse nothing more
        self._deferred: BadRequest | None = None  # a parse error behind complete requests
        self._send_fd = send_fd_getter(stream)
        self._socket = stream.socket if isinstance(stream, trio.SocketStream) else None
        self._peer_closed = False
        self._broken = False
        self._keep_alive = True
        self._http10 = False
        self._responding = False  # a request was handed out and its response is not complete
        self._streaming = False
        self._head_request = False  # a response to HEAD has no body
        self.phase = "idle"
        self.read_deadline = float("inf")
        self.read_scope: trio.CancelScope | None = None
        """Cancelled by :meth:`expire`: the scope around this connection's reads."""
        self.bytes_received = 0
        self.bytes_sent = 0
        self.closing = False
        """Set to close the connection after the current response (the server is stopping)."""

    @property
    def reusable(self) -> bool:
        """Whether another request may follow on this connection."""
        return (
            not (self._broken or self._peer_closed or self.closing or self._responding) and self._keep_alive
        )

    async def next_request(self, *, first: bool) -> Request | None:
        """Read the next request, or ``None`` if the client closed.

        The time it may take is not enforced here: :attr:`read_deadline` says until when the
        current phase (:attr:`phase`: ``"idle"``, ``"head"``, ``"body"``) may last, and the caller
        cancels the read once it passed (see :mod:`channels._core.ticker`), then asks
        :meth:`timed_out` what to answer.

        Args:
            first: this is the connection's first request (the idle timeout does not apply: the
                client connected to send something, so only the head timeout does).

        Raises:
            BadRequest: malformed, too large or too slow; the caller answers ``status`` and
                closes.
        """
        parsing = self._parsing
        self.phase = "head" if first else "idle"
        self.read_deadline = trio.current_time() + (
            self.limits.head_timeout if first else self.limits.idle_timeout
        )
        if self._unparsed:
            data, self._unparsed = bytes(self._unparsed), bytearray()
            self._feed(data)
        while not parsing.done:
            if self._deferred is not None:
                raise self._deferred
            if self._upgraded:
                return None
            if parsing.started and self.phase == "idle":
                self.phase, self.read_deadline = "head", trio.current_time() + self.limits.head_timeout
            if parsing.head_done and self.phase != "body":
                self.phase, self.read_deadline = "body", trio.current_time() + self.limits.body_timeout
                if parsing.expects_continue:
                    parsing.expects_continue = False
                    if not self._http10_head():
                        await self._send(CONTINUE)
            data = await self._receive(expect_wait=not first and not parsing.started)
            if not data:
                if parsing.started:
                    raise BadRequest(400, "the connection closed in the middle of a request")
                return None
            self._feed(data)
        request, keep_alive = parsing.done.popleft()
        self.phase = "answering"
        self._keep_alive = keep_alive
        self._http10 = request.http_version == "1.0"
        self._head_request = request.method == "HEAD"
        self._responding = True
        return request

    @property
    def waiting_for_request(self) -> bool:
        """Reading, and no byte of the next request has come (a keep-alive or new connection)."""
        return self.phase in ("idle", "head") and not self._parsing.started and not self._unparsed

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
        if self.phase == "body":
            return BadRequest(408, f"no complete body within {self.limits.body_timeout:g}s")
        if self.phase == "head" and (self._parsing.started or self._unparsed):
            return BadRequest(408, f"no complete request head within {self.limits.head_timeout:g}s")
        return None  # idle, or connected and silent: closed without a word

    def _feed(self, data: bytes) -> None:
        parsing = self._parsing
        if self._upgraded:
            return  # after an Upgrade request nothing more is parsed: the connection closes
        try:
            parsing.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # llhttp stops at the head of an Upgrade request and hands the rest over as another
            # protocol's bytes. This endpoint upgrades nothing: a request without a body is
            # answered as a plain one, then the connection closes; one with a body cannot be
            # framed, so it is refused (never parsing its body as the next request).
            self._upgraded = True
            self._keep_alive = False
            if not parsing.done or self._declares_body(parsing.done[-1][0]):
                parsing.done.clear()
                raise BadRequest(400, "an Upgrade request with a body is not served here") from None
        except httptools.HttpParserError as exc:
            error = parsing.error or BadRequest(400, f"malformed request: {exc}")
            if parsing.done:  # complete requests before the bad one are answered first
                self._deferred = error
                self._upgraded = True
                return
            raise error from None
        if parsing.error is not None:
            raise parsing.error
        if parsing.started and not parsing.head_done:
            parsing.head_bytes += len(data)
            if parsing.head_bytes > MAX_HEAD_BYTES:
                raise BadRequest(431, f"the request head is over {MAX_HEAD_BYTES} bytes")

    def _http10_head(self) -> bool:
        return self._parsing.parser.get_http_version() == "1.0"

    @staticmethod
    def _declares_body(request: Request) -> bool:
        for name, value in request.headers:
            if name == b"transfer-encoding" or (
                name == b"content-length" and value.strip() not in (b"", b"0")
            ):
                return True
        return False

    async def _receive(self, *, expect_wait: bool = False) -> bytes:
        """The next bytes from the client, ``b""`` once it closed.

        Args:
            expect_wait: the client has probably sent nothing yet (its next request, right after
                a response): wait for readability first instead of trying a read that would find
                nothing (trio's ``receive_some`` tries first), one system call less per request.
        """
        if self._peer_closed:
            return b""
        try:
            if expect_wait and self._socket is not None:
                await trio.lowlevel.wait_readable(self._socket)
            data = await self.stream.receive_some(RECEIVE_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        if not data:
            self._peer_closed = True
        self.bytes_received += len(data)
        return bytes(data)

    def _head(self, status: int, headers: Headers, tail: bytes) -> bytes:
        parts = [_STATUS_LINES.get(status) or _status_line(status), SERVER_HEADER]
        parts.extend(name + b": " + value + b"\r\n" for name, value in headers)
        parts.append(tail)
        return b"".join(parts)

    def _closes(self) -> bool:
        return self._peer_closed or self.closing or not self._keep_alive

    async def respond(self, status: int, headers: Headers, body: bytes = b"") -> None:
        """Send a complete response with ``Content-Length``.

        Raises:
            trio.BrokenResourceError: the client is gone or did not read in time.
        """
        length = b"" if status in (204, 304) else b"content-length: %d\r\n" % len(body)  # RFC 9110 §8.6
        if self._closes():
            self._keep_alive = False
            tail = length + b"connection: close\r\n\r\n"
        else:
            tail = length + b"\r\n"
        head = self._head(status, headers, tail)
        if self._head_request:
            await self._send(head)
        elif len(body) <= LARGE_BODY:
            await self._send(head + body)  # one write for the whole response
        else:  # no copy of a large body just to prepend the head
            await self._send(head)
            await self._send(body)
        self._responding = False

    async def start_stream(self, status: int, headers: Headers) -> None:
        """Send the head of a response whose body follows in pieces (chunked on HTTP/1.1).

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
        await self._send(self._head(status, headers, tail))

    async def send_body(self, data: bytes) -> None:
        """Send the next piece of a streamed body.

        Raises:
            trio.BrokenResourceError: the client is gone or did not read in time.
        """
        if data:
            await self._send(data if self._http10 else b"%x\r\n%s\r\n" % (len(data), data))

    async def end_stream(self) -> None:
        """End a streamed response.

        Raises:
            trio.BrokenResourceError: the client is gone or did not read in time.
        """
        if not self._http10:
            await self._send(b"0\r\n\r\n")
        self._streaming = False
        self._responding = False

    async def _send(self, data: bytes) -> None:
        if self._broken:
            raise trio.BrokenResourceError("the connection is broken")
        try:
            # Most responses fit the socket buffer: one synchronous write, no scheduling.
            sent = write_now(self._send_fd, data)
            if sent == len(data):
                self.bytes_sent += sent
                await trio.lowlevel.checkpoint_if_cancelled()
                return
            timed_out = await send_all_within(self.stream, memoryview(data)[sent:], self.limits.send_timeout)
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
        """Answer a :class:`BadRequest` (unless a response was begun) and mark the connection done."""
        if not self._streaming:
            self._keep_alive = False
            if error.body is not None:
                headers, body = error.headers, error.body
            else:
                headers, body = (
                    [(b"content-type", b"text/plain; charset=utf-8")],
                    (str(error) + "\n").encode(),
                )
            try:
                await self.respond(error.status, headers, body)
            except trio.BrokenResourceError:
                pass
        self._broken = True

    async def aclose(self) -> None:
        """Close the connection (idempotent)."""
        self._broken = True
        await trio.aclose_forcefully(self.stream)
