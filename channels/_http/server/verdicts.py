"""What a POST's headers decide before its body is read, remembered per distinct header values.

A client sends the same ``Accept``, ``Content-Type`` and ``MCP-Protocol-Version`` on every POST,
and judging them (Accept's ranges and q-values, the version's era) is a measurable part of a
small request's cost; :class:`PostHeaderVerdicts` judges each distinct combination once, with the
same functions (so the same refusals) as an unremembered check. Owned by the MCP endpoint.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from ..._core.guard import Headers
from ..._mcp.admission import HttpRefusal, check_legacy_version, check_post_headers, names_modern_version

# Distinct (Accept, Content-Type, MCP-Protocol-Version) combinations remembered: clients send one
# each, a few clients at once; past it the memo starts again.
POST_HEADER_MEMO = 64
# Header names as the request parser hands them (request.py lowers them).
ACCEPT, CONTENT_TYPE, PROTOCOL_VERSION = b"accept", b"content-type", b"mcp-protocol-version"


@attrs.frozen
class PostHeaderVerdict:
    """What one combination of header values decides.

    Attributes:
        refusal: :func:`check_post_headers` (Accept and Content-Type).
        modern: :func:`names_modern_version` (the header's part of the era).
        legacy_refusal: :func:`check_legacy_version`, for a POST of the legacy era.
    """

    refusal: HttpRefusal | None
    modern: bool
    legacy_refusal: HttpRefusal | None


class PostHeaderVerdicts:
    """The verdicts on the combinations seen last (at most :data:`POST_HEADER_MEMO`)."""

    def __init__(self) -> None:
        self._memo: dict[tuple[object, ...], PostHeaderVerdict] = {}

    def of(self, headers: Headers, fields: Mapping[bytes, bytes] | None = None) -> PostHeaderVerdict:
        """The verdict on ``headers`` (lower-case names, as parsed).

        ``fields``: the value of each header sent once, by name, if the caller has it
        (``request.single_fields``); with no name repeated, the three are looked up in it.
        """
        key: tuple[object, ...]
        if fields is not None and len(fields) == len(headers):  # each at most once: (value or None)
            key = (fields.get(ACCEPT), fields.get(CONTENT_TYPE), fields.get(PROTOCOL_VERSION))
        else:  # every value of each, in order (a tuple of tuples: no key of the other kind)
            accept: list[bytes] = []
            content_type: list[bytes] = []
            version: list[bytes] = []
            for name, value in headers:
                if name == ACCEPT:
                    accept.append(value)
                elif name == CONTENT_TYPE:
                    content_type.append(value)
                elif name == PROTOCOL_VERSION:
                    version.append(value)
            key = (tuple(accept), tuple(content_type), tuple(version))
        verdict = self._memo.get(key)
        if verdict is None:
            verdict = PostHeaderVerdict(
                check_post_headers(headers), names_modern_version(headers), check_legacy_version(headers)
            )
            if len(self._memo) >= POST_HEADER_MEMO:
                self._memo.clear()
            self._memo[key] = verdict
        return verdict
