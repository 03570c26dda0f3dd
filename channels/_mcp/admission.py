r"""What happens to an HTTP request to an MCP endpoint before anything reaches a child (sans-IO).

The rules of the Streamable HTTP transport that can be decided from the request alone: its
headers and its body. Nothing here reads a socket or knows a session; every check returns
``None`` (go on) or an :class:`HttpRefusal` (answer with it, forward nothing).

The order a server applies them in, for a ``POST``:

1. :func:`check_post_headers`: ``Accept`` (406) and ``Content-Type`` (415).
2. :func:`parse_body`: one JSON-RPC message, or a batch (400, ``-32700`` / ``-32600``).
3. :func:`era_of`: modern (2026-07-28 and later: no sessions, metadata in every request) or
   legacy (the ``initialize`` handshake, 2025-11-25 and earlier).
4. Modern: :func:`check_modern_request`, then for a ``tools/call``
   :func:`check_param_headers` with what :func:`tool_headers_from_list` learned from the
   child's ``tools/list`` replies. A JSON-RPC error the child answers with is sent with the
   status :func:`status_for_error` gives (the 2026-07-28 HTTP binding gives errors statuses).
   Legacy: :func:`check_legacy_version`, and :func:`check_legacy_batch` for an array.

The rules live in five modules; this one holds the checks that come first (steps 1 to 3, the
legacy ones), and re-exports the others, so that a server imports its rules from here:

* :mod:`channels._mcp.headers`: what a modern request carries in headers, shared with the client
  (versions, names, the ``=?base64?...?=`` form, ``x-mcp-header`` annotations).
* :mod:`channels._mcp.modern`: the modern checks of those headers (step 4).
* :mod:`channels._mcp.paramcheck`: the modern checks of a call's ``Mcp-Param-{Name}`` headers.
* :mod:`channels._mcp.refusal`: :class:`HttpRefusal`, the error codes and their statuses.

Sources, cited by short name in the comments below, each as read at the commit named:

* SPEC: ``modelcontextprotocol/modelcontextprotocol`` at ``b0f60ba`` (2026-08-22),
  ``docs/specification/2026-07-28/`` (HTTP: ``basic/transports/streamable-http.mdx``; ``_meta``:
  ``basic/index.mdx``; eras: ``basic/versioning.mdx``) and
  ``docs/specification/2025-11-25/basic/transports.mdx``.
* TS: ``modelcontextprotocol/typescript-sdk`` at ``3924de9`` (2026-08-18),
  ``packages/core-internal/src/shared/`` (``inboundClassification.ts``, ``mcpParamHeaders.ts``,
  ``mediaType.ts``) and ``packages/server/src/server/`` (``createMcpHandler.ts``,
  ``streamableHttp.ts``).
* PY: ``modelcontextprotocol/python-sdk`` at ``57394b0`` (2026-08-20), ``src/mcp/shared/inbound.py``
  and ``src/mcp/server/streamable_http.py``.
* CONF: ``modelcontextprotocol/conformance`` at ``c321dd3`` (2026-08-07, 0.2.0-alpha.11),
  ``src/scenarios/server/stateless.ts`` (scenario ``server-stateless``) and
  ``http-standard-headers.ts`` (``http-header-validation``, ``http-custom-header-server-validation``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any, Literal

from .._core.errors import InvalidMessage, ProtocolError
from .._core.guard import Headers, header_values
from .._core.jsonrpc import JSONObject, RequestId, decode, decode_json, validate
from .headers import (
    ASSUMED_VERSION,
    CLIENT_CAPABILITIES_KEY,
    FIRST_MODERN_VERSION,
    LEGACY_VERSIONS,
    METHOD_HEADER,
    MODERN_VERSIONS,
    NAME_HEADER,
    NAME_SOURCES,
    OWS,
    PARAM_HEADER_PREFIX,
    PROTOCOL_VERSION_HEADER,
    PROTOCOL_VERSION_KEY,
    REQUIRED_META_KEYS,
    ROUTING_HEADERS,
    TASK_NAME_SOURCES,
    X_MCP_HEADER,
    ParamPath,
    decode_header_value,
    encode_header_value,
    has_modern_claim,
    header_texts,
    is_modern_version,
    meta_of,
    method_of,
    modern_request_headers,
    tool_headers_from_list,
    x_mcp_headers,
)
from .modern import check_modern_request
from .paramcheck import check_param_headers
from .refusal import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_CAPABILITY,
    SERVER_ERROR,
    UNSUPPORTED_VERSION,
    HttpRefusal,
    invalid_request,
    method_not_allowed,
    protocol_refusal,
    shown,
    status_for_error,
)

__all__ = [
    "ASSUMED_VERSION",
    "BATCH_VERSION",
    "CLIENT_CAPABILITIES_KEY",
    "FIRST_MODERN_VERSION",
    "HEADER_MISMATCH",
    "INVALID_PARAMS",
    "LEGACY_VERSIONS",
    "METHOD_HEADER",
    "METHOD_NOT_FOUND",
    "MISSING_CAPABILITY",
    "MODERN_VERSIONS",
    "NAME_HEADER",
    "NAME_SOURCES",
    "PARAM_HEADER_PREFIX",
    "PROTOCOL_VERSION_HEADER",
    "PROTOCOL_VERSION_KEY",
    "REQUIRED_META_KEYS",
    "ROUTING_HEADERS",
    "SERVER_ERROR",
    "TASK_NAME_SOURCES",
    "UNSUPPORTED_VERSION",
    "X_MCP_HEADER",
    "HttpRefusal",
    "ParamPath",
    "check_legacy_batch",
    "check_legacy_version",
    "check_modern_request",
    "check_param_headers",
    "check_post_headers",
    "decode_header_value",
    "encode_header_value",
    "era_of",
    "is_modern_version",
    "method_not_allowed",
    "modern_request_headers",
    "names_modern_version",
    "parse_body",
    "status_for_error",
    "tool_headers_from_list",
    "x_mcp_headers",
]

# RFC 9110 §12.4.2 qvalue, read leniently (up to three decimals, as written or not).
_QVALUE = re.compile(r"[01](?:\.[0-9]{0,3})?")


# -- POST headers -----------------------------------------------------------------------------------


def check_post_headers(headers: Headers) -> HttpRefusal | None:
    """Check a POST's ``Accept`` (406) and ``Content-Type`` (415), in that order.

    ``Accept`` must admit both ``application/json`` and ``text/event-stream`` (SPEC
    ``streamable-http.mdx`` §Sending Messages item 2, and every legacy version). Wildcards count
    (``*/*``, ``application/*``, ``text/*``), as in PY ``check_accept_headers``; a range with
    ``q=0`` refuses its type (RFC 9110 §12.4.2), the most specific range deciding; an
    unreadable ``q`` counts as 1. Several ``Accept`` lines are one list (RFC 9110 §5.3).

    ``Content-Type`` must be given once and be ``application/json``, compared as a media type
    (case-insensitive, parameters such as ``charset`` ignored), never as a substring (TS
    ``mediaType.ts``). Both SDKs check ``Accept`` first (TS ``streamableHttp.ts``, PY
    ``streamable_http.py``).
    """
    ranges = _accept_ranges(headers)
    if not (_accepts(ranges, "application", "json") and _accepts(ranges, "text", "event-stream")):
        return HttpRefusal(
            HTTPStatus.NOT_ACCEPTABLE,
            SERVER_ERROR,
            "Not Acceptable: Accept must list both application/json and text/event-stream",
            "not-acceptable",
        )
    content_types = header_values(headers, b"content-type")
    if len(content_types) != 1 or _media_type(content_types[0]) != "application/json":
        return HttpRefusal(
            HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
            SERVER_ERROR,
            "Unsupported Media Type: Content-Type must be application/json",
            "unsupported-media-type",
        )
    return None


def _accept_ranges(headers: Headers) -> list[tuple[str, str, float]]:
    ranges = []
    for value in header_values(headers, b"accept"):
        for item in value.decode("latin-1").split(","):
            media, *parameters = item.split(";")
            kind, slash, subtype = media.strip().lower().partition("/")
            if not slash or not kind or not subtype:
                continue
            quality = 1.0
            for parameter in parameters:
                name, _, raw = parameter.partition("=")
                if name.strip().lower() == "q" and _QVALUE.fullmatch(raw.strip()):
                    quality = float(raw.strip())
            ranges.append((kind, subtype.strip(), quality))
    return ranges


def _accepts(ranges: list[tuple[str, str, float]], kind: str, subtype: str) -> bool:
    # RFC 9110 §12.5.1: the most specific matching range decides (type/subtype, then type/*, then */*).
    for wanted in ((kind, subtype), (kind, "*"), ("*", "*")):
        qualities = [quality for (k, s, quality) in ranges if (k, s) == wanted]
        if qualities:
            return max(qualities) > 0
    return False


def _media_type(value: bytes) -> str:
    return value.decode("latin-1").split(";", 1)[0].strip(OWS).lower()


# -- The body ---------------------------------------------------------------------------------------


def parse_body(body: bytes | bytearray) -> JSONObject | list[JSONObject] | HttpRefusal:
    """Read a POST body: one JSON-RPC message, or an array of them (a JSON-RPC batch).

    A message is decoded by :func:`channels.decode` (strict UTF-8, no NaN, no lone surrogates).
    Whether a batch is allowed is the caller's question (see :func:`check_legacy_batch` and
    :func:`check_modern_request`): only 2025-03-26 had them.

    Returns:
        The message, the batch, or a 400 refusal: ``-32700`` for bytes that are not acceptable
        JSON, ``-32600`` for JSON that is not a message (a scalar, an empty array, an element
        that is not a message). Both SDKs answer these with 400 (TS ``createMcpHandler.ts``, PY
        ``streamable_http.py``).
    """
    start = body[:1]
    if start and start in b" \t\r\n":  # (strip only then: a bytearray's strip is a copy)
        start = body.lstrip(b" \t\r\n")[:1]
    if start != b"[":
        try:
            return decode(body)
        except ProtocolError as exc:
            return protocol_refusal(exc)
    try:
        batch = decode_json(body)
    except ProtocolError as exc:
        return protocol_refusal(exc)
    if not batch:
        return invalid_request("an empty batch", "empty-batch")
    for element in batch:
        try:
            validate(element)
        except InvalidMessage as exc:
            return protocol_refusal(exc)
    return batch  # type: ignore[no-any-return]


# -- The era ----------------------------------------------------------------------------------------


def era_of(
    message: JSONObject | list[JSONObject], headers: Headers, *, header_modern: bool | None = None
) -> Literal["modern", "legacy"]:
    """Which era's rules apply to a POST: the body's claim first, then the header.

    This is TS ``inboundClassification.ts`` ``classifyInboundRequest``:

    * A body whose ``params._meta`` holds ``io.modelcontextprotocol/protocolVersion`` claims the
      per-request metadata of the modern era, whatever the header says; a header that disagrees
      (``2025-11-25`` with a 2026-07-28 ``_meta``) is then refused by
      :func:`check_modern_request` with ``-32020``, a legacy version in the ``_meta`` with
      ``-32022``.
    * Without a claim, an ``MCP-Protocol-Version`` header naming a modern version makes it modern
      (the request is then refused for its missing ``_meta``, ``-32602``).
    * ``initialize`` is the legacy handshake unless it carries a complete modern claim (which
      the child then answers with ``-32601``, as CONF ``server-stateless`` expects): with a
      modern header and no such claim it is modern, and refused with ``-32020``.
    * Anything else is legacy: no claim and no header (taken as :data:`ASSUMED_VERSION`), or a
      legacy or unknown-older header, which :func:`check_legacy_version` judges. A posted
      response has no ``params``, so its header alone decides.

    A batch is modern if any element claims, or the header is modern; it is then refused.

    ``header_modern``: :func:`names_modern_version` of ``headers``, if the caller knows it already
    (it remembers it per distinct header value); ``headers`` are then not read.
    """
    if header_modern is None:
        header_modern = names_modern_version(headers)
    if isinstance(message, list):
        return "modern" if header_modern or any(_claims(element) for element in message) else "legacy"
    if method_of(message) == "initialize" and not has_modern_claim(message):
        return "modern" if header_modern else "legacy"
    return "modern" if header_modern or _claims(message) else "legacy"


def names_modern_version(headers: Headers) -> bool:
    """Whether an ``MCP-Protocol-Version`` header names a modern version (:func:`era_of`'s header part)."""
    return any(is_modern_version(value) for value in header_texts(headers, PROTOCOL_VERSION_HEADER))


def _claims(message: Any) -> bool:
    meta = meta_of(message)
    return meta is not None and PROTOCOL_VERSION_KEY in meta


# -- Legacy -----------------------------------------------------------------------------------------

BATCH_VERSION = "2025-03-26"
"""The one version with JSON-RPC batches (SPEC 2025-03-26 ``basic/index.mdx`` §Batching; removed by
2025-06-18, its changelog item 1)."""


def check_legacy_version(
    headers: Headers,
    supported: Sequence[str] = LEGACY_VERSIONS,
    *,
    request_id: RequestId | None = None,
) -> HttpRefusal | None:
    """Check the ``MCP-Protocol-Version`` header of a legacy-era request.

    No header is fine: the request is taken as :data:`ASSUMED_VERSION`. A version not in
    ``supported``, or more than one header, is refused with 400 (SPEC 2025-11-25
    ``transports.mdx`` §Protocol Version Header: "the server MUST respond with 400 Bad Request").
    The spec names no body; the code is ``-32000`` with the message both SDKs write (TS
    ``streamableHttp.ts`` ``validateProtocolVersion``), plus ``data`` naming the supported
    versions and the requested one.

    Args:
        headers: the request's headers.
        supported: the legacy versions served.
        request_id: the id of the request, for the refusal's ``id``.
    """
    values = header_texts(headers, PROTOCOL_VERSION_HEADER)
    if not values:
        return None
    if len(values) > 1:
        return HttpRefusal(
            HTTPStatus.BAD_REQUEST,
            SERVER_ERROR,
            "Bad Request: more than one MCP-Protocol-Version header",
            "duplicate-header",
            request_id,
        )
    if values[0] in supported:
        return None
    return HttpRefusal(
        HTTPStatus.BAD_REQUEST,
        SERVER_ERROR,
        f"Bad Request: Unsupported protocol version: {shown(values[0])} "
        f"(supported versions: {', '.join(supported)})",
        "unsupported-protocol-version",
        request_id,
        {"supported": list(supported), "requested": values[0]},
    )


def check_legacy_batch(batch: Sequence[JSONObject], headers: Headers) -> HttpRefusal | None:
    """Check that a legacy-era batch is allowed: only at :data:`BATCH_VERSION`, without ``initialize``.

    The version is the ``MCP-Protocol-Version`` header's, or :data:`ASSUMED_VERSION` without
    one; ``initialize`` "MUST NOT be part of a JSON-RPC batch" (SPEC 2025-03-26
    ``basic/lifecycle.mdx``). Refusals are 400 with ``-32600``.
    """
    values = header_texts(headers, PROTOCOL_VERSION_HEADER)
    version = values[0] if values else ASSUMED_VERSION
    if version != BATCH_VERSION:
        return invalid_request(
            f"JSON-RPC batches exist only in protocol version {BATCH_VERSION}, not {shown(version)}",
            "batch-not-allowed",
        )
    if any(method_of(message) == "initialize" for message in batch):
        return invalid_request("initialize must not be part of a batch", "initialize-in-batch")
    return None
