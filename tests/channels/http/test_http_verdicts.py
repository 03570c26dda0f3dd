"""The POST header verdicts the MCP endpoint remembers are the unremembered checks' own.

Sans-IO: :class:`~channels._http.server.verdicts.PostHeaderVerdicts` against
:func:`~channels._mcp.admission.check_post_headers`, :func:`~channels._mcp.admission.names_modern_version`
and :func:`~channels._mcp.admission.check_legacy_version`, for every combination of a few values.
"""

from __future__ import annotations

import itertools

from channels._http.server.request import single_fields
from channels._http.server.verdicts import POST_HEADER_MEMO, PostHeaderVerdict, PostHeaderVerdicts
from channels._mcp.admission import check_legacy_version, check_post_headers, names_modern_version

ACCEPTS = [(), (b"application/json, text/event-stream",), (b"text/html",), (b"*/*",), (b"application/json",)]
CONTENT_TYPES = [(), (b"application/json",), (b"text/plain",), (b"application/json", b"application/json")]
VERSIONS = [
    (),
    (b"2025-11-25",),
    (b"2025-03-26",),
    (b"2026-07-28",),
    (b"1999-01-01",),
    (b"2025-11-25", b"2025-06-18"),
]


def headers_of(
    accept: tuple[bytes, ...], content_type: tuple[bytes, ...], version: tuple[bytes, ...]
) -> list[tuple[bytes, bytes]]:
    return [
        (b"host", b"127.0.0.1"),
        *((b"accept", value) for value in accept),
        *((b"content-type", value) for value in content_type),
        *((b"mcp-protocol-version", value) for value in version),
        (b"mcp-session-id", b"0123"),
    ]


def test_a_remembered_post_header_verdict_is_the_unremembered_checks_own_for_every_combination() -> None:
    """With or without the request's fields (the headers sent once, by name) to look them up in."""
    verdicts = PostHeaderVerdicts()
    for _ in range(2):  # judged the first time, remembered the second
        for combination in itertools.product(ACCEPTS, CONTENT_TYPES, VERSIONS):
            headers = headers_of(*combination)
            expected = PostHeaderVerdict(
                check_post_headers(headers), names_modern_version(headers), check_legacy_version(headers)
            )
            assert verdicts.of(headers) == expected, combination
            assert verdicts.of(headers, single_fields(headers)) == expected, combination


def test_the_remembered_post_header_verdicts_are_bounded_and_still_right_past_the_bound() -> None:
    verdicts = PostHeaderVerdicts()
    for number in range(3 * POST_HEADER_MEMO):
        headers = headers_of(
            (b"application/json, text/event-stream",), (b"application/json",), (b"%d" % number,)
        )
        assert verdicts.of(headers).legacy_refusal == check_legacy_version(headers)
        assert len(verdicts._memo) <= POST_HEADER_MEMO
