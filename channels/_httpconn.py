"""One HTTP/1.1 server connection: h11 on a trio stream, with the limits a daemon needs.

h11 parses and frames; this module adds what h11 leaves to its user: bounded reads (a request
head must arrive within ``head_timeout``, a body within ``body_timeout`` and under ``max_body``
bytes), ``Expect: 100-continue``, keep-alive with an idle timeout, bounded writes (a client that
does not read its response is cut off after ``send_timeout``), streamed responses (chunked, for
server-sent events), and noticing that the client went away while its response is pending.

One task serves the connection: it reads a request, answers it (possibly streaming for a long
time), then reads the next. While it answers, :meth:`HttpConnection.wait_disconnected` may watch
the socket from another task, which must be done (cancelled) before the next request is read: the
two never read at once. A client that pipelines its next request meanwhile loses nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from http import HTTPStatus

import attrs
import h11
import trio

from ._stream import RECEIVE_SIZE, send_all_within, send_fd_getter, write_now

logger = logging.getLogger("channels.http")

Headers = Sequence[tuple[bytes, bytes]]

# Longest request head (request line and headers) accepted: nginx's large_client_header_buffers
# allow 4 x 8 KiB, h11's default is 16 KiB. Longer heads get 431.
MAX_HEAD_BYTES = 32 * 1024
SERVER_HEADER = (b"server", b"mcp-bridge")


def _reason(status: int) -> bytes:
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


@attrs.frozen
class Request:
    """One complete HTTP request.

    Attributes:
        method: ``"POST"``, ``"GET"``...
        target: the request target as sent (path and query).
        headers: every header, names lower-case, in order, ``Host`` included.
        body: the whole body.
        http_version: ``"1.1"`` or ``"1.0"``.
    """

    method: str
    target: str
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    http_version: str = "1.1"

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
    """A request that cannot be read: answered with ``status`` and the connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


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


class HttpConnection:
    """h11 over one accepted stream; the serving task owns it and closes it with :meth:`aclose`.

    Args:
        stream: the connection (TLS already negotiated), owned from now on.
        limits: timeouts and the body limit.
    """

    def __init__(self, stream: trio.abc.Stream, limits: ConnectionLimits) -> None:
        self.stream = stream
        self.limits = limits
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        self._send_fd = send_fd_getter(stream)
        self._peer_closed = False
        self._broken = False
        self.bytes_received = 0
        self.bytes_sent = 0
        self.closing = False
        """Set to close the connection after the current response (the server is stopping)."""

    @property
    def reusable(self) -> bool:
        """Whether another request may follow on this connection."""
        return not (self._broken or self._peer_closed or self.closing) and self._h11.our_state is h11.DONE

    async def next_request(self, *, first: bool) -> Request | None:
        """Read the next request, or ``None`` if the client closed or went idle too long.

        Args:
            first: this is the connection's first request (the idle timeout does not apply: the
                client connected to send something, so only the head timeout does).

        Raises:
            BadRequest: malformed, too large or too slow; the caller answers ``status`` and
                closes.
        """
        phase = "idle"
        with trio.CancelScope() as scope:
            if not first:
                if self._h11.our_state is not h11.DONE or self._h11.their_state is not h11.DONE:
                    return None
                self._h11.start_next_cycle()
                if not self._h11.trailing_data[0]:
                    scope.deadline = trio.current_time() + self.limits.idle_timeout
                    if not await self._receive_into_h11():
                        return None
            # One scope for the whole request: the head must come within head_timeout of its
            # first byte, the body within body_timeout after that.
            phase = "head"
            scope.deadline = trio.current_time() + self.limits.head_timeout
            head = await self._next_event()
            if head is None:
                return None
            assert isinstance(head, h11.Request)
            phase = "body"
            scope.deadline = trio.current_time() + self.limits.body_timeout
            body = await self._read_body(head)
            return Request(
                head.method.decode("ascii", "replace"),
                head.target.decode("ascii", "replace"),
                tuple(head.headers),
                body,
                head.http_version.decode("ascii", "replace"),
            )
        if phase == "idle":
            return None  # idle too long
        if phase == "body":
            raise BadRequest(408, f"no complete body within {self.limits.body_timeout:g}s")
        raise BadRequest(408, f"no complete request head within {self.limits.head_timeout:g}s")

    async def _receive_into_h11(self) -> bool:
        if self._peer_closed:
            return False
        try:
            data = await self.stream.receive_some(RECEIVE_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""
        if not data:
            self._peer_closed = True
        self.bytes_received += len(data)
        self._h11.receive_data(bytes(data))
        return bool(data)

    async def _next_event(self) -> h11.Request | h11.Data | h11.EndOfMessage | None:
        while True:
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise BadRequest(exc.error_status_hint, f"malformed request: {exc}") from None
            if event is h11.NEED_DATA:
                if self._h11.they_are_waiting_for_100_continue:
                    interim = self._h11.send(h11.InformationalResponse(status_code=100, headers=[]))
                    assert interim is not None
                    await self._send(interim)
                await self._receive_into_h11()
                continue
            if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                return None
            if isinstance(event, (h11.Request, h11.Data, h11.EndOfMessage)):
                return event

    async def _read_body(self, head: h11.Request) -> bytes:
        declared = next((value for name, value in head.headers if name == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > self.limits.max_body:
            raise BadRequest(
                413, f"the body ({int(declared)} bytes) is over the limit of {self.limits.max_body}"
            )
        chunks: list[bytes] = []
        size = 0
        while True:
            event = await self._next_event()
            if event is None:
                raise BadRequest(400, "the connection closed in the middle of the body")
            if isinstance(event, h11.EndOfMessage):
                return b"".join(chunks)
            assert isinstance(event, h11.Data)
            size += len(event.data)
            if size > self.limits.max_body:
                raise BadRequest(413, f"the body is over the limit of {self.limits.max_body} bytes")
            chunks.append(bytes(event.data))

    async def respond(self, status: int, headers: Headers, body: bytes = b"") -> None:
        """Send a complete response with ``Content-Length``.

        Raises:
            trio.BrokenResourceError: the client is gone or did not read in time.
        """
        all_headers = [SERVER_HEADER, *headers, (b"content-length", str(len(body)).encode())]
        if self._peer_closed or self._h11.their_state is not h11.DONE or self.closing:
            all_headers.append((b"connection", b"close"))
        head = self._h11.send(h11.Response(status_code=status, headers=all_headers, reason=_reason(status)))
        framed = self._h11.send(h11.Data(data=body)) if body else b""
        end = self._h11.send(h11.EndOfMessage())
        assert head is not None and framed is not None and end is not None
        await self._send(head + framed + end)  # one write for the whole response

    async def start_stream(self, status: int, headers: Headers) -> None:
        """Send the head of a response whose body follows in pieces (chunked on HTTP/1.1).

        Raises:
            trio.BrokenResourceError: the client is gone or did not read in time.
        """
        data = self._h11.send(
            h11.Response(status_code=status, headers=[SERVER_HEADER, *headers], reason=_reason(status))
        )
        assert data is not None
        await self._send(data)

    async def send_body(self, data: bytes) -> None:
        """Send the next piece of a streamed body.

        Raises:
            trio.BrokenResourceError: the client is gone or did not read in time.
        """
        framed = self._h11.send(h11.Data(data=data))
        assert framed is not None
        await self._send(framed)

    async def end_stream(self) -> None:
        """End a streamed response.

        Raises:
            trio.BrokenResourceError: the client is gone or did not read in time.
        """
        end = self._h11.send(h11.EndOfMessage())
        assert end is not None
        await self._send(end)

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

        Bytes that arrive meanwhile (a pipelined next request) stay buffered for
        :meth:`next_request`. Meant to run beside a pending response, and be cancelled when the
        response is done.
        """
        while await self._receive_into_h11():
            if len(self._h11.trailing_data[0]) > MAX_HEAD_BYTES + self.limits.max_body:
                await trio.sleep_forever()  # a pipelining client must wait for its answer

    async def refuse(self, error: BadRequest) -> None:
        """Answer a :class:`BadRequest` (if a response can still be sent) and mark the connection done."""
        if self._h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            body = (str(error) + "\n").encode()
            try:
                await self.respond(error.status, [(b"content-type", b"text/plain; charset=utf-8")], body)
            except (trio.BrokenResourceError, h11.LocalProtocolError):
                pass
        self._broken = True

    async def aclose(self) -> None:
        """Close the connection (idempotent)."""
        self._broken = True
        await trio.aclose_forcefully(self.stream)
