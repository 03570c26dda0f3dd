"""Reading HTTP/1.1 requests: httptools' callbacks, the limits a parser leaves to its user.

Requests are parsed by httptools (llhttp, Node.js's parser, as uvicorn uses it): on a small
request it costs a few microseconds where h11 costs about seventy, which is most of what a
Streamable HTTP call through the bridge costs (see docs/performance.md).

:class:`Parsing` assembles :class:`Request` records from the bytes
:class:`~channels._http.server.conn.HttpConnection` reads, and enforces what concerns the bytes
themselves: a head of at most :data:`MAX_HEAD_BYTES`, a body under ``max_body``, the
:data:`HeadCheck` (Host, Origin, token) before any body is read, and no parsing past an Upgrade
request or a malformed one. The connection owns the timing (deadlines, ``100 Continue``).

A body over ``max_body`` is read on and discarded, up to :data:`DISCARD_BYTES`, rather than
refused while the client is still sending: clients that write a whole body before reading
(httpx, Node's fetch) would otherwise see the connection reset instead of the 413. Once it is
all in, the 413 (:func:`body_too_large`) is handed out in the request's place, and the connection
may serve the next request.
"""

from __future__ import annotations

import collections
import errno
import os
from collections.abc import Callable, Sequence

import attrs
import httptools

from ..._core.errors import INVALID_REQUEST
from ..._core.fdio import RECEIVE_SIZE
from ..._core.jsonrpc import CANONICAL_LINE_LIMIT, sniff_leading_id
from ..._core.oauth import Principal
from ..._mcp.refusal import SERVER_ERROR, HttpRefusal

Headers = Sequence[tuple[bytes, bytes]]

# Longest request head (request line and headers) accepted: nginx's large_client_header_buffers
# allow 4 x 8 KiB, h11's default is 16 KiB. Longer heads get 431. (Counted per read: a head that
# ends within the read that began it may be up to one read, 64 KiB, long.)
MAX_HEAD_BYTES = 32 * 1024
# Bytes of an over-limit body read and thrown away so that its client can read the 413 on a
# connection still usable: Go's net/http reads up to 256 KiB of an unread body for the same
# reason (maxPostHandlerReadBytes), but the SDKs' clients send a whole body before reading, so a
# body a few times the 4 MiB default limit must pass whole (64 MiB takes well under a second on
# loopback, and costs no memory). Beyond, the connection closes after a lingering close.
DISCARD_BYTES = 64 * 1024 * 1024
# The first bytes of an over-limit body kept to read its request id from (``{"jsonrpc":"2.0",
# "id":...`` as the SDKs write it; a string id may be 512 characters, see sniff_leading_id).
SNIFF_BYTES = 1024
# From this size on a body is handed to its Request as the bytearray it was read into, not copied
# into ``bytes``: a copy of a 16 MiB body is 16 MiB of fresh memory (4,096 page faults, about 10 ms
# here). A message this long is never forwarded as it came (jsonrpc's CANONICAL_LINE_LIMIT), only
# decoded, and decoding reads a bytearray as it reads bytes.
LARGE_BODY_BYTES = CANONICAL_LINE_LIMIT


@attrs.frozen
class Unverified:
    """An OAuth access token the head check could not decide without a fetch.

    The dispatcher verifies it before routing the request (:mod:`channels._http.server.oauth`).
    """


Credential = str | Principal | Unverified | None
"""What the head check found a request's client to be: a static token's label, an OAuth
principal, a token still to verify, or ``None`` when the listener asks for nothing."""


def single_fields(headers: Sequence[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    """The value of each header sent exactly once, by (lower-case) name.

    What a request's readers look a header up in, rather than each scanning every header:
    ``dict()`` makes it in one call, and a name sent more than once (rare) is then taken out, so
    that ``get`` answers as :meth:`Request.header` does. It has as many entries as ``headers``
    exactly when no name is repeated.
    """
    fields = dict(headers)
    if len(fields) != len(headers):
        seen: set[bytes] = set()
        for name, _ in headers:
            if name in seen:
                fields.pop(name, None)
            seen.add(name)
    return fields


@attrs.define(eq=False)
class Request:
    """One complete HTTP request; nothing changes it once made.

    Not an ``attrs.frozen`` class: a frozen ``__init__`` sets each field through
    ``object.__setattr__``, a measurable part of a small request's cost (as for
    :class:`~channels._http.server.call.HttpCall`).

    Attributes:
        method: ``"POST"``, ``"GET"``...
        target: the request target as sent (path and query).
        headers: every header, names lower-case, in order, ``Host`` included.
        body: the whole body: ``bytes``, or from :data:`LARGE_BODY_BYTES` on, the ``bytearray`` it
            was read into (handed over, not copied; such a body is only decoded, never forwarded
            as it came). Nothing changes it.
        http_version: ``"1.1"`` or ``"1.0"``.
        credential: what the head check accepted (see :data:`Credential`).
        fields: :func:`single_fields` of ``headers`` (made from them if not given).
    """

    method: str
    target: str
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes | bytearray
    http_version: str = "1.1"
    credential: Credential = None
    fields: dict[bytes, bytes] = attrs.field(
        default=attrs.Factory(lambda self: single_fields(self.headers), takes_self=True),
        eq=False,
        repr=False,
    )

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
        return self.fields.get(name)


class BadRequest(Exception):
    """A request that cannot be read, or is refused on its head alone.

    It is answered with ``status`` (and ``headers`` and ``body`` if given, else the message as
    text) and the connection is closed, its body unread; unless ``keep_alive``: an over-limit
    body that was read to its end, after which the connection may serve the next request.
    ``logged``: the head check already logged why (a refused credential), so it is not again.
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        headers: Headers = (),
        body: bytes | None = None,
        keep_alive: bool = False,
        logged: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers
        self.body = body
        self.keep_alive = keep_alive
        self.logged = logged


def body_too_large(limit: int, prefix: bytes, *, keep_alive: bool = False) -> BadRequest:
    """The 413 for a body over ``limit`` bytes: a JSON-RPC ``-32600`` ``message-too-large`` error.

    Its ``data`` carries the limit; its id is the request's when the body's first bytes
    (``prefix``) name it first, as the SDKs write requests, else null.
    """
    message = f"Message too large: the request body is over the limit of {limit} bytes"
    refusal = HttpRefusal(
        413, INVALID_REQUEST, message, "message-too-large", sniff_leading_id(prefix), {"limit": limit}
    )
    return BadRequest(
        413, message, headers=refusal.response_headers(), body=refusal.body(), keep_alive=keep_alive
    )


# A request the listener could not read is refused in the same form as every other refusal: a
# JSON-RPC error (id null: no message was read), its code by status, and a stable data.reason.
UNREADABLE = {
    400: (INVALID_REQUEST, "bad-http-request"),  # malformed, or closed in the middle of a request
    408: (SERVER_ERROR, "http-timeout"),  # no complete head or body within its deadline
    431: (INVALID_REQUEST, "head-too-large"),  # over MAX_HEAD_BYTES
}


def unreadable_body(error: BadRequest) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """The headers and JSON-RPC error body a :class:`BadRequest` without a body of its own gets."""
    code, reason = UNREADABLE.get(error.status, (INVALID_REQUEST, "bad-http-request"))
    refusal = HttpRefusal(error.status, code, str(error), reason, None)
    return refusal.response_headers(), refusal.body()


HeadCheck = Callable[[bytes, bytes, list[tuple[bytes, bytes]], dict[bytes, bytes]], "BadRequest | Credential"]
"""Called with a request's method, target, headers and :func:`single_fields` as soon as its head
is in, before its body is read or ``100 Continue`` is sent: returns a :class:`BadRequest` to
refuse it (Host, Origin, token), or its :data:`Credential`."""


# What a released Parsing's parser calls back: nothing (httptools looks up each callback by name).
_NO_CALLBACKS = object()


class Parsing:
    """httptools' callbacks: they assemble requests, which the connection hands out.

    A callback cannot stop the parser cleanly, so a limit it finds is kept in :attr:`error`
    and raised by :meth:`feed` after ``feed_data``.

    Args:
        max_body: the longest body accepted (413 beyond).
        check_head: run on each request's head before its body is read (see :data:`HeadCheck`).
    """

    def __init__(self, max_body: int, check_head: HeadCheck | None) -> None:
        self.max_body = max_body
        self.check_head = check_head
        self.credential: Credential = None
        self.parser = httptools.HttpRequestParser(self)
        # Complete requests, with whether to keep alive; an over-limit one as its 413.
        self.done: collections.deque[tuple[Request | BadRequest, bool]] = collections.deque()
        self.error: BadRequest | None = None
        self.started = False  # a request has begun and is not complete
        self.head_done = False
        self.head_bytes = 0
        self.expects_continue = False
        self.upgraded = False  # an Upgrade request or a parse error: parse nothing more
        self.deferred: BadRequest | None = None  # a parse error behind complete requests
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._fields: dict[bytes, bytes] = {}  # single_fields(self._headers), once the head is in
        # One growing buffer, not a list of the reads: a large body then lives in one mapping that
        # is returned to the system when freed, instead of a heap of 64 KiB pieces that fragments.
        self._body = bytearray()
        self._size = 0
        self.discarding = False  # the body being read is over the limit: read on, keep nothing

    def release(self) -> None:
        """Parse nothing more, and let go of the parser and the head check (idempotent).

        The parser holds this object's methods (its callbacks), and the head check may hold this
        object: two reference cycles, which would keep the connection's requests' objects until
        the next full collection. Once released, reference counts free them when the connection
        goes.
        """
        self.upgraded = True  # feed() parses nothing more
        self.parser = httptools.HttpRequestParser(_NO_CALLBACKS)  # refers to nothing of this one
        self.check_head = None
        self.error = self.deferred = None  # raised, their tracebacks hold the connection's frames

    def feed(self, data: bytes) -> None:
        """Parse ``data``; complete requests go to :attr:`done` with whether to keep alive.

        Raises:
            BadRequest: malformed, over a limit, or refused by the head check.
        """
        if self.upgraded:
            return  # after an Upgrade request nothing more is parsed: the connection closes
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # llhttp stops at the head of an Upgrade request and hands the rest over as another
            # protocol's bytes. This endpoint upgrades nothing: a request without a body is
            # answered as a plain one, then the connection closes; one with a body cannot be
            # framed, so it is refused (never parsing its body as the next request).
            self.upgraded = True
            if not self.done or _declares_body(self.done[-1][0]):
                self.done.clear()
                raise BadRequest(400, "an Upgrade request with a body is not served here") from None
        except httptools.HttpParserError as exc:
            error = self.error or BadRequest(400, f"malformed request: {exc}")
            if self.done:  # complete requests before the bad one are answered first
                self.deferred = error
                self.upgraded = True
                return
            try:
                raise error from None
            finally:  # the local would hold this frame, which its traceback holds: a cycle
                del error
        if self.error is not None:
            raise self.error
        if self.started and not self.head_done:
            self.head_bytes += len(data)
            if self.head_bytes > MAX_HEAD_BYTES:
                raise BadRequest(431, f"the request head is over {MAX_HEAD_BYTES} bytes")

    def http10_head(self) -> bool:
        """Whether the request being read is HTTP/1.0 (which knows no ``100 Continue``)."""
        return self.parser.get_http_version() == "1.0"

    # --- httptools' callbacks ----------------------------------------------------------

    def on_message_begin(self) -> None:
        self.started, self.head_done, self.head_bytes = True, False, 0
        self._url, self._headers, self._body, self._size = b"", [], bytearray(), 0
        self.discarding = False

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.head_done:  # trailers of a chunked body are dropped: no limit counts them
            self._headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.head_done = True
        headers = self._headers
        fields = self._fields = single_fields(headers)
        if self.check_head is not None:
            outcome = self.check_head(self.parser.get_method(), self._url, headers, fields)
            if isinstance(outcome, BadRequest):
                self.error = outcome
                return
            self.credential = outcome
        declared = None
        if len(fields) == len(headers):  # no name repeated: looked up, not scanned
            length, expect = fields.get(b"content-length"), fields.get(b"expect")
            if length is not None and length.isdigit():
                declared = int(length)
            if expect is not None and expect.lower() == b"100-continue":
                self.expects_continue = True
        else:
            for name, value in headers:
                if name == b"content-length" and value.isdigit():
                    declared = int(value)
                elif name == b"expect" and value.lower() == b"100-continue":
                    self.expects_continue = True
        if declared is not None and declared > self.max_body:
            if self.expects_continue:  # the client waits before sending it: refused unsent
                self.error = body_too_large(self.max_body, b"")
            else:
                self.discarding = True

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self.discarding:
            if len(self._body) < SNIFF_BYTES:
                self._body += body[: SNIFF_BYTES - len(self._body)]
            if self._size > DISCARD_BYTES:
                self.error = self.error or self.too_large()
        elif self._size > self.max_body:
            self.discarding = True
            self._body += body[: max(0, SNIFF_BYTES - len(self._body))]
            del self._body[SNIFF_BYTES:]
        elif self.error is None:
            self._body += body

    def too_large(self, *, keep_alive: bool = False) -> BadRequest:
        """The 413 for the body being read (over the limit)."""
        return body_too_large(self.max_body, bytes(self._body[:SNIFF_BYTES]), keep_alive=keep_alive)

    def on_message_complete(self) -> None:
        parser = self.parser
        if self.discarding:  # all of it was read: answered with 413, and the connection may go on
            keep_alive = parser.should_keep_alive()
            self.done.append((self.too_large(keep_alive=keep_alive), keep_alive))
            self._body = bytearray()
            self.started = self.head_done = self.expects_continue = self.discarding = False
            return
        body = self._body
        request = Request(
            parser.get_method().decode("ascii", "replace"),
            self._url.decode("ascii", "replace"),
            tuple(self._headers),
            body if len(body) >= LARGE_BODY_BYTES else bytes(body),
            parser.get_http_version(),
            self.credential,
            self._fields,
        )
        self._body = bytearray()  # not kept until the next request begins
        self.done.append((request, parser.should_keep_alive()))
        self.started = self.head_done = self.expects_continue = False


def _declares_body(request: Request | BadRequest) -> bool:
    if isinstance(request, BadRequest):
        return True  # an over-limit body
    for name, value in request.headers:
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() not in (b"", b"0")):
            return True
    return False


def read_ready(fd: int) -> bytes | None:
    """What a socket that was just found readable holds, read at once (at most 64 KiB).

    ``b""`` at its end (or if it failed or was closed: the connection is over either way), None if
    it holds nothing after all (the caller then reads it the usual way). The caller's wait for
    readability was its schedule point: trio's ``receive_some`` would yield a second time after
    a read that did not wait, a pass of the scheduler per request for nothing.
    """
    try:
        return os.read(fd, RECEIVE_SIZE)
    except BlockingIOError:
        return None
    except OSError as exc:  # reset, or EBADF: closed by another task meanwhile
        return b"" if exc.errno != errno.EINTR else None
