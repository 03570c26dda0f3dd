"""Response heads from headers encoded once (connvalues.header_block), as from name and value pairs.

Sans-IO: a response style encodes its JSON answer's headers once for all its responses; the head
written from them is byte for byte the head written from the pairs.
"""

from __future__ import annotations

from channels._http.server.connvalues import header_block, response_head
from channels._http.server.response import JSON_HEADERS, StreamStyle

EXTRA = ((b"mcp-session-id", b"0123456789abcdef"), (b"vary", b"origin"))


def test_a_response_head_from_encoded_headers_is_the_head_from_their_pairs() -> None:
    tail = b"content-length: 2\r\n\r\n"
    head = response_head(200, header_block(EXTRA), tail)
    assert head == response_head(200, EXTRA, tail)
    assert head == (
        b"HTTP/1.1 200 OK\r\nserver: mcp-bridge\r\nmcp-session-id: 0123456789abcdef\r\n"
        b"vary: origin\r\ncontent-length: 2\r\n\r\n"
    )
    assert response_head(599, [], b"\r\n") == b"HTTP/1.1 599 \r\nserver: mcp-bridge\r\n\r\n"


def test_a_response_styles_json_headers_are_the_content_type_and_its_extra_headers_encoded() -> None:
    assert StreamStyle(extra_headers=EXTRA).json_headers == header_block((*JSON_HEADERS, *EXTRA))
    assert StreamStyle().json_headers == b"content-type: application/json\r\n"
