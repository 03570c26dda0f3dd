"""A request's headers sent once, by name (request.single_fields): what its readers look up.

Sans-IO: the parser hands each request its fields, and every reader that looks a header up in
them (Request.header, the head check, the POST header verdicts) decides as a scan of every
header would: a name sent twice is no field.
"""

from __future__ import annotations

from channels._http.server.request import Parsing, Request, single_fields

HEADERS = [
    (b"host", b"127.0.0.1:7301"),
    (b"accept", b"application/json"),
    (b"accept", b"text/event-stream"),
    (b"content-type", b"application/json"),
]


def test_a_header_sent_once_is_a_field_and_one_sent_twice_is_not() -> None:
    fields = single_fields(HEADERS)
    assert fields == {b"host": b"127.0.0.1:7301", b"content-type": b"application/json"}
    assert single_fields(HEADERS[:2]) == {b"host": b"127.0.0.1:7301", b"accept": b"application/json"}
    assert single_fields([]) == {}


def test_a_request_answers_for_a_header_sent_twice_with_none_as_a_scan_would() -> None:
    request = Request("POST", "/mcp", tuple(HEADERS), b"")
    assert request.header(b"accept") is None
    assert request.header(b"host") == b"127.0.0.1:7301"
    assert request.header(b"origin") is None
    for name in (b"host", b"accept", b"content-type", b"origin"):
        values = [value for key, value in HEADERS if key == name]
        assert request.header(name) == (values[0] if len(values) == 1 else None)


def test_a_parsed_request_carries_the_fields_of_its_lower_cased_headers() -> None:
    seen: list[tuple[bytes, dict[bytes, bytes]]] = []

    def check_head(method: bytes, target: bytes, headers: object, fields: dict[bytes, bytes]) -> None:
        seen.append((method, dict(fields)))

    parsing = Parsing(1024, check_head)
    parsing.feed(
        b"POST /mcp HTTP/1.1\r\nHost: a\r\nOrigin: http://x\r\nORIGIN: http://y\r\n"
        b"Content-Length: 2\r\n\r\n{}"
    )
    request, keep_alive = parsing.done.popleft()
    assert isinstance(request, Request) and keep_alive
    assert request.fields == {b"host": b"a", b"content-length": b"2"}
    assert seen == [(b"POST", request.fields)]
    assert request.header(b"origin") is None  # sent twice, whatever its case
