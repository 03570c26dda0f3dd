"""A request's body as the parser hands it over (channels/_http/server/request.py), and as it is decoded.

Sans-IO: a body from LARGE_BODY_BYTES on comes as the bytearray it was read into, not copied into
bytes; it is decoded as its bytes would be, and never taken as a line to forward as it came.
"""

from __future__ import annotations

import pytest

from channels._http.server.endpoint import _parse_post
from channels._http.server.request import LARGE_BODY_BYTES, Parsing, Request
from channels._mcp.admission import parse_body
from channels._mcp.refusal import HttpRefusal


def posted(body: bytes, chunk: int = 65536) -> Request:
    """The request a POST of ``body`` becomes, fed to the listener's parser ``chunk`` bytes at a time."""
    parsing = Parsing(4 * LARGE_BODY_BYTES, None)
    data = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    for start in range(0, len(data), chunk):
        parsing.feed(data[start : start + chunk])
    request, _ = parsing.done.popleft()
    assert isinstance(request, Request)
    return request


def large_message(size: int) -> bytes:
    head = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"text":"'
    return head + b"x" * (size - len(head) - 4) + b'"}}'


def test_a_large_body_is_handed_over_as_read_and_decoded_but_never_forwarded_as_it_came() -> None:
    body = large_message(LARGE_BODY_BYTES + 10)
    request = posted(body)
    assert type(request.body) is bytearray and request.body == body
    message, line = _parse_post(request.body)
    assert isinstance(message, dict) and message["id"] == 7 and line is None
    small = posted(b'{"jsonrpc":"2.0","id":1,"method":"ping"}').body
    assert type(small) is bytes and _parse_post(small)[1] == small


@pytest.mark.parametrize(
    "body",
    [
        large_message(LARGE_BODY_BYTES),
        b" \r\n" + large_message(LARGE_BODY_BYTES),
        b" [" + large_message(LARGE_BODY_BYTES) + b"]",
        b"[" + large_message(LARGE_BODY_BYTES) + b"," + large_message(100) + b"]",
        b"\xff" + large_message(LARGE_BODY_BYTES),
        large_message(LARGE_BODY_BYTES)[:-1],
        b"[]" + b" " * LARGE_BODY_BYTES,
    ],
)
def test_a_body_in_a_bytearray_parses_as_its_bytes_do(body: bytes) -> None:
    expected, got = parse_body(body), parse_body(bytearray(body))
    if isinstance(expected, HttpRefusal):
        assert isinstance(got, HttpRefusal) and (got.status, got.code) == (expected.status, expected.code)
    else:
        assert got == expected
