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

Sources, cited by short name in the comments below (snapshot dates in
``shared/reference/mcp-spec-digest.md`` §0):

* SPEC: ``modelcontextprotocol/modelcontextprotocol``, ``docs/specification/2026-07-28/`` (HTTP:
  ``basic/transports/streamable-http.mdx``; ``_meta``: ``basic/index.mdx``; eras:
  ``basic/versioning.mdx``) and ``docs/specification/2025-11-25/basic/transports.mdx``.
* TS: ``modelcontextprotocol/typescript-sdk``, ``packages/core-internal/src/shared/``
  (``inboundClassification.ts``, ``mcpParamHeaders.ts``, ``mediaType.ts``) and
  ``packages/server/src/server/`` (``createMcpHandler.ts``, ``streamableHttp.ts``).
* PY: ``modelcontextprotocol/python-sdk``, ``src/mcp/shared/inbound.py`` and
  ``src/mcp/server/streamable_http.py``.
* CONF: ``modelcontextprotocol/conformance``, ``src/scenarios/server/stateless.ts`` (scenario
  ``server-stateless``) and ``http-standard-headers.ts`` (``http-header-validation``,
  ``http-custom-header-server-validation``).
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from http import HTTPStatus
from typing import Any, Literal

import attrs

from ._errors import INVALID_REQUEST, PARSE_ERROR, InvalidMessage, ProtocolError
from ._guard import Headers, header_values
from ._jsonrpc import JSONObject, Kind, RequestId, decode, encode, is_request_id, validate

# -- Versions ---------------------------------------------------------------------------------------

LEGACY_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The versions that open with ``initialize`` (SPEC ``basic/versioning.mdx`` §Terminology; PY
``mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS``)."""
MODERN_VERSIONS = ("2026-07-28",)
"""The per-request-metadata versions this module knows (PY ``MODERN_PROTOCOL_VERSIONS``)."""
ASSUMED_VERSION = "2025-03-26"
"""A request with no ``MCP-Protocol-Version`` header is taken as this version (SPEC 2025-11-25
``transports.mdx`` §Protocol Version Header: the server "SHOULD assume protocol version
2025-03-26"; 2026-07-28 ``streamable-http.mdx`` keeps it as a MAY for servers with old clients)."""
FIRST_MODERN_VERSION = "2026-07-28"
"""Modern means "2026-07-28 and later" (SPEC ``basic/versioning.mdx`` §Terminology). Versions are
ISO dates, so a later one compares greater as a string; TS ``protocolEras.ts``
``isModernProtocolVersion`` decides the same way, so an unknown future version is modern and is
answered with ``-32022`` naming the supported ones."""

# -- JSON-RPC error codes ---------------------------------------------------------------------------

HEADER_MISMATCH = -32020
"""A header is missing, malformed, or disagrees with the body (SPEC ``streamable-http.mdx``
§Server Validation; schema ``HEADER_MISMATCH``)."""
MISSING_CAPABILITY = -32021
"""A request needs a client capability its ``_meta`` did not declare (SPEC ``basic/index.mdx``;
schema ``MissingRequiredClientCapabilityError``)."""
UNSUPPORTED_VERSION = -32022
"""The request's protocol version is not served (SPEC ``basic/versioning.mdx``; schema
``UnsupportedProtocolVersionError``, whose ``data`` carries ``supported`` and ``requested``)."""
METHOD_NOT_FOUND = -32601
"""JSON-RPC 2.0 §5.1."""
INVALID_PARAMS = -32602
"""JSON-RPC 2.0 §5.1; also the code for a request missing a required ``_meta`` field (SPEC
``basic/index.mdx`` §Per-request protocol fields)."""
SERVER_ERROR = -32000
"""JSON-RPC 2.0's implementation-defined range (2026-07-28 keeps -32000..-32019 for
implementations). Both SDKs answer the HTTP-level refusals (406, 415, 405, an unsupported legacy
version) with it (TS ``streamableHttp.ts``, ``createMcpHandler.ts``)."""

# -- Header and _meta names ------------------------------------------------------------------------

PROTOCOL_VERSION_HEADER = b"mcp-protocol-version"
METHOD_HEADER = b"mcp-method"
NAME_HEADER = b"mcp-name"
PARAM_HEADER_PREFIX = b"mcp-param-"
ROUTING_HEADERS = (PROTOCOL_VERSION_HEADER, METHOD_HEADER, NAME_HEADER)
"""The standard request headers, in the order SPEC ``streamable-http.mdx`` lists them (and the
order they are checked in)."""
_DISPLAY_NAMES = {
    PROTOCOL_VERSION_HEADER: "MCP-Protocol-Version",
    METHOD_HEADER: "Mcp-Method",
    NAME_HEADER: "Mcp-Name",
}

PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
REQUIRED_META_KEYS = (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY)
"""The ``_meta`` fields every modern request MUST carry (SPEC ``basic/index.mdx`` §Per-request
protocol fields; ``clientInfo`` is only a SHOULD, and CONF ``server-stateless`` checks that a
request without it is served)."""

NAME_SOURCES: Mapping[str, str] = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
"""Methods whose ``Mcp-Name`` header is required, and the ``params`` field it mirrors (SPEC
``streamable-http.mdx`` §Standard Request Headers)."""
TASK_NAME_SOURCES: Mapping[str, str] = {
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
"""The tasks extension (SEP-2663, not in the core spec) mirrors ``params.taskId`` into ``Mcp-Name``
(CONF ``src/connection/stateless.ts`` ``mcpNameForRequest``; scenario ``tasks-request-headers``
sends a mismatched one and expects ``-32020``). The header is checked when present, not required,
since the core spec does not require it."""

X_MCP_HEADER = "x-mcp-header"
"""The ``inputSchema`` property annotation naming a tool parameter's ``Mcp-Param-{Name}`` header
(SPEC ``server/tools.mdx`` §x-mcp-header)."""

# -- Header values ----------------------------------------------------------------------------------

_SENTINEL_PREFIX = "=?base64?"
_SENTINEL_SUFFIX = "?="
# RFC 9110 §5.5: a field value is visible ASCII, space and tab (obs-text, bytes 0x80-0xFF, is
# obsolete and, for these headers, "invalid characters": SPEC §Server Validation).
_FIELD_VALUE = re.compile(r"[\t\x20-\x7e]*")
# What a client may send without the base64 form: printable ASCII without edge spaces (SPEC
# §Value Encoding; a tab is a control character, so it is encoded too, as PY does).
_PLAIN_VALUE = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")
# RFC 9110 §5.5: optional whitespace around a field value is not part of it.
_OWS = " \t"
# RFC 9110 §5.6.2 token: what an x-mcp-header name may be (SPEC server/tools.mdx).
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# The only header values compared as numbers (SPEC: integers SHOULD compare numerically); TS and PY
# use the same gate, so "0x1a", "1e3" and " 42" never count as 42.
_DECIMAL = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
# RFC 9110 §12.4.2 qvalue, read leniently (up to three decimals, as written or not).
_QVALUE = re.compile(r"[01](?:\.[0-9]{0,3})?")


# -- The refusal ------------------------------------------------------------------------------------


@attrs.frozen
class HttpRefusal:
    """An HTTP error response whose body is a JSON-RPC error.

    Attributes:
        status: the HTTP status.
        code: the JSON-RPC error code.
        message: one sentence for the client.
        reason: a short machine-readable tag, sent as ``error.data.reason``.
        request_id: the id of the request refused, or ``None`` when there is none (a
            notification, a body that could not be read). Errors about a request carry its id
            (CONF ``sep-2575-http-server-error-jsonrpc-id``).
        data: more ``error.data`` fields (``supported`` and ``requested`` for ``-32022``).
        headers: more response headers (``Allow`` for a 405).
    """

    status: int = attrs.field(converter=int)
    code: int
    message: str
    reason: str
    request_id: RequestId | None = None
    data: Mapping[str, object] = attrs.field(factory=dict)
    headers: tuple[tuple[bytes, bytes], ...] = ()

    def body(self) -> bytes:
        """The response body: a JSON-RPC error response, ``id`` null when there is no request id.

        Null rather than absent, as both SDKs write it and JSON-RPC 2.0 §5 asks.
        """
        error = {"code": self.code, "message": self.message, "data": {**self.data, "reason": self.reason}}
        return encode({"jsonrpc": "2.0", "id": self.request_id, "error": error})

    def response_headers(self) -> list[tuple[bytes, bytes]]:
        """``Content-Type: application/json`` and :attr:`headers`."""
        return [(b"content-type", b"application/json"), *self.headers]


def method_not_allowed(allow: bytes = b"POST") -> HttpRefusal:
    """The 405 for an HTTP method the endpoint does not serve.

    SPEC ``streamable-http.mdx`` §Backward Compatibility: a modern-only server SHOULD answer GET
    and DELETE with 405 (``Allow: POST``); a legacy one answers other methods with 405 and
    ``Allow: GET, POST, DELETE`` (TS ``streamableHttp.ts`` ``handleUnsupportedRequest``).
    """
    return HttpRefusal(
        HTTPStatus.METHOD_NOT_ALLOWED,
        SERVER_ERROR,
        "Method Not Allowed",
        "method-not-allowed",
        headers=((b"allow", allow),),
    )


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
    return value.decode("latin-1").split(";", 1)[0].strip(_OWS).lower()


# -- The body ---------------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number {text[:40]!r} is out of range")
    return value


# Only for arrays (a 2025-03-26 batch): single messages go through channels._jsonrpc.decode. The
# same strictness as there: no NaN or Infinity, no number that overflows.
_BATCH_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


def parse_body(body: bytes) -> JSONObject | list[JSONObject] | HttpRefusal:
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
    if body.lstrip(b" \t\r\n")[:1] != b"[":
        try:
            return decode(body)
        except ProtocolError as exc:
            return _protocol_refusal(exc)
    try:
        text = body.decode("utf-8")
        batch = _BATCH_DECODER.decode(text)
        if "\\" in text:
            encode(batch)  # a lone surrogate (only an escape can make one) cannot be encoded
    except RecursionError:
        return _parse_error("JSON nested too deeply")
    except ValueError as exc:  # UnicodeDecodeError and UnicodeEncodeError included
        return _parse_error(str(exc))
    if not batch:
        return _invalid("an empty batch", "empty-batch")
    for element in batch:
        try:
            validate(element)
        except InvalidMessage as exc:
            return _protocol_refusal(exc)
    return batch  # type: ignore[no-any-return]


def _protocol_refusal(exc: ProtocolError) -> HttpRefusal:
    prefix = "Parse error" if exc.rpc_code == PARSE_ERROR else "Invalid Request"
    request_id = exc.request_id if is_request_id(exc.request_id) else None
    return HttpRefusal(HTTPStatus.BAD_REQUEST, exc.rpc_code, f"{prefix}: {exc}", exc.reason, request_id)


def _parse_error(detail: str) -> HttpRefusal:
    return HttpRefusal(HTTPStatus.BAD_REQUEST, PARSE_ERROR, f"Parse error: {detail}", "parse-error")


def _invalid(detail: str, reason: str, request_id: RequestId | None = None) -> HttpRefusal:
    return HttpRefusal(
        HTTPStatus.BAD_REQUEST, INVALID_REQUEST, f"Invalid Request: {detail}", reason, request_id
    )


# -- The era ----------------------------------------------------------------------------------------


def is_modern_version(version: str) -> bool:
    """Whether a protocol version belongs to the modern era (see :data:`FIRST_MODERN_VERSION`)."""
    return version >= FIRST_MODERN_VERSION


def era_of(message: JSONObject | list[JSONObject], headers: Headers) -> Literal["modern", "legacy"]:
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
    """
    header_modern = any(is_modern_version(value) for value in _texts(headers, PROTOCOL_VERSION_HEADER))
    if isinstance(message, list):
        return "modern" if header_modern or any(_claims(element) for element in message) else "legacy"
    if _method(message) == "initialize" and not _has_modern_claim(message):
        return "modern" if header_modern else "legacy"
    return "modern" if header_modern or _claims(message) else "legacy"


def _claims(message: Any) -> bool:
    meta = _meta_of(message)
    return meta is not None and PROTOCOL_VERSION_KEY in meta


def _has_modern_claim(message: Any) -> bool:
    """A complete modern claim: a modern version string and a capabilities object."""
    meta = _meta_of(message)
    if meta is None:
        return False
    version = meta.get(PROTOCOL_VERSION_KEY)
    return (
        isinstance(version, str)
        and is_modern_version(version)
        and isinstance(meta.get(CLIENT_CAPABILITIES_KEY), dict)
    )


def _meta_of(message: Any) -> dict[str, Any] | None:
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta if isinstance(meta, dict) else None


def _method(message: Any) -> str | None:
    method = message.get("method") if isinstance(message, dict) else None
    return method if isinstance(method, str) else None


def _texts(headers: Headers, name: bytes) -> list[str]:
    """Every value of header ``name``, as text (one character a byte), without its OWS."""
    return [value.decode("latin-1").strip(_OWS) for value in header_values(headers, name)]


def _shown(value: object) -> str:
    """A value for a message: its repr, cut short."""
    try:
        text = repr(value)
    except ValueError:  # an integer past CPython's int_max_str_digits (only a message built locally)
        return f"<a {type(value).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."


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
    values = _texts(headers, PROTOCOL_VERSION_HEADER)
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
        f"Bad Request: Unsupported protocol version: {_shown(values[0])} "
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
    values = _texts(headers, PROTOCOL_VERSION_HEADER)
    version = values[0] if values else ASSUMED_VERSION
    if version != BATCH_VERSION:
        return _invalid(
            f"JSON-RPC batches exist only in protocol version {BATCH_VERSION}, not {_shown(version)}",
            "batch-not-allowed",
        )
    if any(_method(message) == "initialize" for message in batch):
        return _invalid("initialize must not be part of a batch", "initialize-in-batch")
    return None


# -- Modern -----------------------------------------------------------------------------------------


def check_modern_request(
    message: JSONObject | list[JSONObject],
    headers: Headers,
    supported: Sequence[str] = MODERN_VERSIONS,
) -> HttpRefusal | None:
    """Apply the 2026-07-28 rules to a POST that :func:`era_of` found modern.

    Every refusal is 400 and carries the request's id. In order, the first failure wins:

    1. The body is one request or notification, never a batch or a response (SPEC
       ``streamable-http.mdx`` §Sending Messages item 4): ``-32600``.
    2. An ``initialize`` without a complete modern claim but with a modern version header: the
       legacy handshake sent as modern, ``-32020`` (TS ``inboundClassification.ts``,
       ``initialize-with-modern-header``).
    3. A request's ``params._meta`` holds ``io.modelcontextprotocol/protocolVersion`` (a string)
       and ``io.modelcontextprotocol/clientCapabilities`` (an object): ``-32602`` (SPEC
       ``basic/index.mdx``). Checked before the headers: CONF ``server-stateless`` sends a
       correct ``MCP-Protocol-Version`` header with a missing ``_meta`` and expects ``-32602``.
    4. ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` appear at most once and hold only
       field-value characters (RFC 9110 §5.5): ``-32020`` (SPEC §Server Validation: "A header
       value contains invalid characters"; a second copy would let two readers disagree, PY
       ``find_duplicated_routing_header``).
    5. A request's ``MCP-Protocol-Version`` is present and equals the ``_meta`` version: ``-32020``
       (SPEC §Protocol Version Header).
    6. A request's ``Mcp-Method`` is present and equals ``method``, case-sensitively: ``-32020``.
    7. For ``tools/call`` and ``prompts/get`` (``params.name``) and ``resources/read``
       (``params.uri``), ``Mcp-Name`` is present when the body has the value, and equals it
       after decoding the ``=?base64?...?=`` form; an invalid base64 form, or a header for a
       value the body lacks, is a mismatch too: ``-32020``. The tasks extension's
       ``params.taskId`` (:data:`TASK_NAME_SOURCES`) is compared when the header is present.
    8. The version is in ``supported``: ``-32022``, ``data`` ``{"supported", "requested"}``.

    Header checks (4-7) come before the version check (8), as in PY ``inbound.py``: a client
    whose header and body disagree is told that, not that one of them is unsupported. CONF
    ``server-stateless`` sends header ``2026-07-28`` with ``_meta`` ``v999.0.0`` and expects
    ``-32020``; header and ``_meta`` both ``v999.0.0`` and expects ``-32022``.

    A notification has no required headers ("header requirements for notification POSTs are
    not defined by this revision", SPEC §Sending Messages): those present must agree with the
    body, its version is its ``_meta`` version or else its header's, and that must be served.

    Header names are case-insensitive (``headers`` has them lower-case, as h11 gives them),
    values case-sensitive (SPEC §Case Sensitivity); optional whitespace around a value is not
    part of it (RFC 9110 §5.5; CONF ``ServerAcceptsWhitespaceHeaderValue``).

    Args:
        message: what :func:`parse_body` returned.
        headers: the request's headers.
        supported: the modern versions served (the child's ``supportedVersions``).
    """
    if isinstance(message, list):
        return _invalid(
            "a JSON-RPC batch; in protocol version 2026-07-28 a POST carries one request or notification",
            "batch-not-allowed",
        )
    try:
        kind = validate(message)
    except InvalidMessage as exc:
        return _protocol_refusal(exc)
    if kind is Kind.RESPONSE:
        return _invalid(
            "a JSON-RPC response; in protocol version 2026-07-28 a client posts requests and notifications",
            "response-not-allowed",
        )
    is_request = kind is Kind.REQUEST
    request_id: RequestId | None = message["id"] if is_request else None
    method: str = message["method"]
    meta = _meta_of(message)

    if (
        method == "initialize"
        and not _has_modern_claim(message)
        and any(is_modern_version(value) for value in _texts(headers, PROTOCOL_VERSION_HEADER))
    ):
        return _mismatch(
            "an initialize request (the legacy handshake) sent with a modern MCP-Protocol-Version header",
            "initialize-with-modern-header",
            request_id,
            PROTOCOL_VERSION_HEADER,
        )

    refusal = _check_meta(meta, is_request, request_id)
    if refusal is not None:
        return refusal

    values: dict[bytes, str] = {}
    for name in ROUTING_HEADERS:
        texts = _texts(headers, name)
        if len(texts) > 1:
            return _mismatch(
                f"more than one {_DISPLAY_NAMES[name]} header", "duplicate-header", request_id, name
            )
        if texts:
            if not _FIELD_VALUE.fullmatch(texts[0]):
                return _mismatch(
                    f"the {_DISPLAY_NAMES[name]} header holds invalid characters",
                    "invalid-header-value",
                    request_id,
                    name,
                )
            values[name] = texts[0]

    claimed = meta.get(PROTOCOL_VERSION_KEY) if meta is not None else None
    version_header = values.get(PROTOCOL_VERSION_HEADER)
    if version_header is None:
        if is_request:
            return _missing(PROTOCOL_VERSION_HEADER, request_id)
    elif claimed is not None and version_header != claimed:
        return _mismatch(
            f"the MCP-Protocol-Version header {_shown(version_header)} does not match "
            f"_meta {PROTOCOL_VERSION_KEY} {_shown(claimed)}",
            "protocol-version-mismatch",
            request_id,
            PROTOCOL_VERSION_HEADER,
        )
    version = claimed if claimed is not None else version_header

    method_header = values.get(METHOD_HEADER)
    if method_header is None:
        if is_request:
            return _missing(METHOD_HEADER, request_id)
    elif method_header != method:
        return _mismatch(
            f"the Mcp-Method header {_shown(method_header)} does not match the method {_shown(method)}",
            "method-mismatch",
            request_id,
            METHOD_HEADER,
        )

    if is_request:
        refusal = _check_name(message, method, values.get(NAME_HEADER), request_id)
        if refusal is not None:
            return refusal

    if version is not None and version not in supported:
        return HttpRefusal(
            HTTPStatus.BAD_REQUEST,
            UNSUPPORTED_VERSION,
            "Unsupported protocol version",
            "unsupported-protocol-version",
            request_id,
            {"supported": list(supported), "requested": version},
        )
    return None


def _check_meta(
    meta: dict[str, Any] | None, is_request: bool, request_id: RequestId | None
) -> HttpRefusal | None:
    if is_request:
        missing = [key for key in REQUIRED_META_KEYS if meta is None or key not in meta]
        if missing:
            where = "params._meta" if meta is None else f"params._meta {', '.join(missing)}"
            return HttpRefusal(
                HTTPStatus.BAD_REQUEST,
                INVALID_PARAMS,
                f"Invalid params: a request in protocol version 2026-07-28 needs {where}",
                "missing-meta",
                request_id,
                {"missing": missing},
            )
    if meta is None:
        return None
    if PROTOCOL_VERSION_KEY in meta and not isinstance(meta[PROTOCOL_VERSION_KEY], str):
        return HttpRefusal(
            HTTPStatus.BAD_REQUEST,
            INVALID_PARAMS,
            f"Invalid params: _meta {PROTOCOL_VERSION_KEY} must be a string",
            "invalid-meta",
            request_id,
        )
    if is_request and not isinstance(meta[CLIENT_CAPABILITIES_KEY], dict):
        return HttpRefusal(
            HTTPStatus.BAD_REQUEST,
            INVALID_PARAMS,
            f"Invalid params: _meta {CLIENT_CAPABILITIES_KEY} must be an object",
            "invalid-meta",
            request_id,
        )
    return None


def _check_name(
    message: JSONObject, method: str, header: str | None, request_id: RequestId | None
) -> HttpRefusal | None:
    field = NAME_SOURCES.get(method)
    required = field is not None
    if field is None:
        field = TASK_NAME_SOURCES.get(method)
        if field is None:
            return None
    params = message.get("params")
    body_value = params.get(field) if isinstance(params, dict) else None
    if header is None:
        if required and isinstance(body_value, str):
            return _missing(NAME_HEADER, request_id, f"params.{field}")
        return None
    decoded = decode_header_value(header)
    if decoded is None:
        return _mismatch(
            "the Mcp-Name header is not valid =?base64?...?= (standard alphabet, padded, UTF-8)",
            "invalid-header-value",
            request_id,
            NAME_HEADER,
        )
    if decoded != body_value:
        return _mismatch(
            f"the Mcp-Name header {_shown(decoded)} does not match params.{field} {_shown(body_value)}",
            "name-mismatch",
            request_id,
            NAME_HEADER,
        )
    return None


def _mismatch(detail: str, reason: str, request_id: RequestId | None, header: bytes | str) -> HttpRefusal:
    """A ``-32020`` refusal; ``header`` is a routing header's name, or a display name."""
    name = _DISPLAY_NAMES[header] if isinstance(header, bytes) else header
    return HttpRefusal(
        HTTPStatus.BAD_REQUEST,
        HEADER_MISMATCH,
        f"Header mismatch: {detail}",
        reason,
        request_id,
        {"header": name},
    )


def _missing(header: bytes, request_id: RequestId | None, source: str | None = None) -> HttpRefusal:
    because = f" (the body has {source})" if source else ""
    return _mismatch(
        f"the required {_DISPLAY_NAMES[header]} header is missing{because}",
        "missing-header",
        request_id,
        header,
    )


# -- Mcp-Param-{Name} -------------------------------------------------------------------------------

ParamPath = tuple[str, ...]
"""Where an annotated parameter sits in ``arguments``: the chain of ``properties`` keys from the
schema root (SPEC ``streamable-http.mdx`` §Schema Extension allows nested object properties)."""

# The JSON Schema types an x-mcp-header may sit on (SPEC server/tools.mdx: integer, string, boolean;
# "Parameters with type number are not permitted"). TS also takes "number", because CONF's client
# scenario http-custom-headers declares some; PY follows the spec, and so does this module.
_HEADER_TYPES = frozenset({"string", "integer", "boolean"})
# JSON Schema 2020-12 keywords holding subschemas the properties chain must not pass through (SPEC
# §Schema Extension: no items, composition, conditionals or $ref), by the shape of their value; the
# same lists as PY inbound.py. An annotation under any of them makes the tool definition invalid.
# Instance data (default, examples, const, enum) is never entered, and $ref is not followed.
_SUBSCHEMA_ONE = frozenset(
    {
        "items",
        "contains",
        "unevaluatedItems",
        "additionalProperties",
        "propertyNames",
        "unevaluatedProperties",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
_SUBSCHEMA_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SUBSCHEMA_MAP = frozenset({"patternProperties", "dependentSchemas", "$defs", "definitions"})


def x_mcp_headers(input_schema: Any) -> dict[str, ParamPath] | None:
    """The ``x-mcp-header`` annotations of one tool's ``inputSchema``: header name → parameter path.

    The name is the ``{Name}`` of ``Mcp-Param-{Name}`` as declared. ``None`` when an annotation
    breaks one of the constraints of SPEC ``server/tools.mdx`` §x-mcp-header: not a non-empty
    RFC 9110 token, not case-insensitively unique, not on a ``string``/``integer``/``boolean``
    property, or not reachable from the root through ``properties`` alone. Clients "MUST
    exclude the invalid tool" and so send no headers for it; there is nothing to check.
    """
    found: dict[str, ParamPath] = {}
    seen: set[str] = set()
    stack: list[tuple[ParamPath | None, Any]] = [((), input_schema)]
    while stack:  # a stack, not recursion: a schema may be nested deeper than the recursion limit
        path, node = stack.pop()
        if not isinstance(node, dict):
            continue
        if X_MCP_HEADER in node:
            name, kind = node[X_MCP_HEADER], node.get("type")
            if (
                not path
                or not isinstance(name, str)
                or not _TOKEN.fullmatch(name)
                or name.lower() in seen
                or not isinstance(kind, str)
                or kind not in _HEADER_TYPES
            ):
                return None
            seen.add(name.lower())
            found[name] = path
        children: list[tuple[ParamPath | None, Any]] = []
        for keyword, value in node.items():
            if keyword == "properties" and isinstance(value, dict):
                children.extend(
                    ((*path, key) if path is not None else None, sub) for key, sub in value.items()
                )
            elif keyword in _SUBSCHEMA_ONE:
                children.append((None, value))
            elif keyword in _SUBSCHEMA_LIST and isinstance(value, list):
                children.extend((None, sub) for sub in value)
            elif keyword in _SUBSCHEMA_MAP and isinstance(value, dict):
                children.extend((None, sub) for sub in value.values())
        stack.extend(reversed(children))  # depth first, in the schema's order
    return found


def tool_headers_from_list(result: JSONObject) -> dict[str, dict[str, ParamPath]]:
    """The ``x-mcp-header`` annotations of every valid tool in a ``tools/list`` result.

    Tool name → (header name → parameter path), for :func:`check_param_headers`. A tool whose
    annotations break the spec's constraints is left out (see :func:`x_mcp_headers`); a tool
    without annotations maps to ``{}``. One result is one page: merge the pages.
    """
    tools = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(tools, list):
        return {}
    found: dict[str, dict[str, ParamPath]] = {}
    for tool in tools:
        name = tool.get("name") if isinstance(tool, dict) else None
        if isinstance(name, str):
            declarations = x_mcp_headers(tool.get("inputSchema"))
            if declarations is not None:
                found[name] = declarations
    return found


def check_param_headers(
    message: JSONObject,
    headers: Headers,
    tool_headers: Mapping[str, Mapping[str, ParamPath | str]],
) -> HttpRefusal | None:
    """Check the ``Mcp-Param-{Name}`` headers of a ``tools/call`` against its ``arguments``.

    Only for a tool in ``tool_headers``; for each of its annotations (a path, or a top-level
    parameter name), with "present" meaning present and not ``null`` (SPEC
    ``streamable-http.mdx`` §Server Behavior for Custom Headers, its table):

    * argument present, header missing: refused ("Server MUST reject the request"; CONF
      ``ServerRejectsMissingCustomHeader``);
    * header present, argument absent or ``null``: refused, since no conforming client sends it
      and an intermediary may have routed on it (PY ``validate_mcp_param_headers``; TS lets it
      through);
    * both: the header value, without its optional whitespace, holds only field-value
      characters and, decoded from ``=?base64?...?=`` if in that form, equals the argument.
      Booleans compare as ``true``/``false``, numbers numerically when the header is a plain
      decimal (``42`` equals ``42.0``: SPEC §Server Validation "SHOULD compare ...
      numerically"), strings exactly (CONF ``ServerAcceptsValidBase64``,
      ``ServerRejectsInvalidBase64Padding`` and ``...Chars``, ``ServerLiteralMissingBase64Prefix``
      and ``...Suffix``); an object or array never matches;
    * the header twice: refused.

    Every refusal is 400 with ``-32020`` (SPEC: "MUST reject ... with a 400 Bad Request HTTP
    status and JSON-RPC error code -32020"). ``Mcp-Param-*`` headers for no annotation are
    ignored (the spec: servers that do not recognize one "MUST forward it and otherwise
    ignore it").
    """
    params = message.get("params") if isinstance(message, dict) else None
    if _method(message) != "tools/call" or not isinstance(params, dict):
        return None
    tool = params.get("name")
    declarations = tool_headers.get(tool) if isinstance(tool, str) else None
    if not declarations:
        return None
    request_id = message.get("id") if is_request_id(message.get("id")) else None
    arguments = params.get("arguments")
    if not isinstance(arguments, dict):
        arguments = {}
    for name, path in declarations.items():
        display = f"Mcp-Param-{name}"
        texts = _texts(headers, PARAM_HEADER_PREFIX + name.lower().encode("utf-8", "replace"))
        value = _value_at(arguments, (path,) if isinstance(path, str) else path)
        where = f"arguments {_shown('.'.join(path) if not isinstance(path, str) else path)}"
        if len(texts) > 1:
            return _mismatch(f"more than one {display} header", "duplicate-header", request_id, display)
        if value is None:
            if texts:
                return _mismatch(
                    f"a {display} header for {where}, which the body does not have",
                    "unexpected-param-header",
                    request_id,
                    display,
                )
            continue
        if not texts:
            return _mismatch(
                f"the {display} header is missing (the body has {where})",
                "missing-header",
                request_id,
                display,
            )
        if not _FIELD_VALUE.fullmatch(texts[0]):
            return _mismatch(
                f"the {display} header holds invalid characters", "invalid-header-value", request_id, display
            )
        decoded = decode_header_value(texts[0])
        if decoded is None:
            return _mismatch(
                f"the {display} header is not valid =?base64?...?= (standard alphabet, padded, UTF-8)",
                "invalid-header-value",
                request_id,
                display,
            )
        if not _same_value(decoded, value):
            return _mismatch(
                f"the {display} header {_shown(decoded)} does not match {where} {_shown(value)}",
                "param-mismatch",
                request_id,
                display,
            )
    return None


def _value_at(arguments: dict[str, Any], path: Sequence[str]) -> Any:
    node: Any = arguments
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _same_value(header: str, value: Any) -> bool:
    """Whether a decoded header value is the argument, as a client renders it (SPEC §Value Encoding)."""
    if isinstance(value, bool):
        return header == ("true" if value else "false")
    if isinstance(value, str):
        return header == value
    if isinstance(value, int | float) and _DECIMAL.fullmatch(header):
        try:  # exact: no float round trip, so integers past 2**53 compare too
            return Decimal(header) == Decimal(value if isinstance(value, int) else repr(value))
        except (InvalidOperation, ValueError):
            return False
    return False


# -- Statuses for a child's errors --------------------------------------------------------------------

_STATUS_FOR_CODE: Mapping[int, int] = {
    # SPEC streamable-http.mdx §Protocol Version Header: an unknown method "MUST respond with 404 Not
    # Found and a JSON-RPC error with code -32601"; CONF sep-2575-http-server-method-not-found-404
    # (also for initialize, ping, logging/setLevel, resources/subscribe and /unsubscribe).
    METHOD_NOT_FOUND: HTTPStatus.NOT_FOUND,
    # SPEC basic/index.mdx: a request missing a required _meta field, "On HTTP, the response status
    # MUST be 400" (CONF sep-2575-http-server-meta-invalid-400). Other -32602s (an unknown tool, a
    # resource not found) are 400 too, as in PY inbound.py ERROR_CODE_HTTP_STATUS, since one code
    # cannot tell them apart; TS keeps a handler's -32602 at 200.
    INVALID_PARAMS: HTTPStatus.BAD_REQUEST,
    # SPEC §Sending Messages item 5 ("an HTTP error status code (e.g., 400 Bad Request)"); both SDKs.
    INVALID_REQUEST: HTTPStatus.BAD_REQUEST,
    PARSE_ERROR: HTTPStatus.BAD_REQUEST,
    # SPEC §Server Validation: "MUST return HTTP status 400"; CONF http-header-validation.
    HEADER_MISMATCH: HTTPStatus.BAD_REQUEST,
    # SPEC basic/index.mdx: "On HTTP, the response status MUST be 400"; CONF
    # sep-2575-missing-capability-http-400 (raised by the server's tool, i.e. by the child here).
    MISSING_CAPABILITY: HTTPStatus.BAD_REQUEST,
    # SPEC §Protocol Version Header: "MUST respond with 400 Bad Request and an
    # UnsupportedProtocolVersionError"; CONF sep-2575-http-server-unsupported-version-400.
    UNSUPPORTED_VERSION: HTTPStatus.BAD_REQUEST,
}


def status_for_error(code: int) -> int:
    """The HTTP status for a modern-era JSON-RPC error response, by its code.

    ``-32601`` is 404; ``-32700``, ``-32600``, ``-32602``, ``-32020``, ``-32021`` and ``-32022``
    are 400 (the sources are by the table in the code). Any other code is 200: the spec gives
    them no status, and both SDKs send a handler's error, ``-32603`` included, in a 200 response
    whose body is the error (TS ``inboundClassification.ts`` ``httpStatusForErrorCode``, PY
    ``inbound.py``).
    """
    if not isinstance(code, int) or isinstance(code, bool):
        return int(HTTPStatus.OK)
    return int(_STATUS_FOR_CODE.get(code, HTTPStatus.OK))


# -- The =?base64?...?= form --------------------------------------------------------------------------


def encode_header_value(value: str) -> str:
    """A value as an ``Mcp-Name`` or ``Mcp-Param-{Name}`` header carries it (SPEC §Value Encoding).

    Printable ASCII without leading or trailing spaces is sent as it is; anything else (other
    characters, edge whitespace, the empty string) is ``=?base64?{base64 of its UTF-8}?=``, and
    so is a value that starts with ``=?base64?`` and ends with ``?=``, which would otherwise read
    as encoded. A lone surrogate (not text; never in a decoded message) is encoded as is, and so
    refused by a strict decoder, this module's included.
    """
    if _PLAIN_VALUE.fullmatch(value) and not _looks_encoded(value):
        return value
    payload = base64.b64encode(value.encode("utf-8", "surrogatepass")).decode("ascii")
    return f"{_SENTINEL_PREFIX}{payload}{_SENTINEL_SUFFIX}"


def decode_header_value(value: str) -> str | None:
    """The value an ``Mcp-Name`` or ``Mcp-Param-{Name}`` header stands for; ``None`` if invalid.

    A value in the ``=?base64?...?=`` form (the markers lower-case, not overlapping) is decoded:
    its payload must be canonical base64 (standard alphabet, padded, no stray bits: the encoder
    only writes that, and CONF ``http-custom-header-server-validation`` expects
    ``=?base64?SGVsbG8?=`` and ``=?base64?SGVs!!!bG8=?=`` refused) of UTF-8. Any other value is
    itself. Optional whitespace around a header value is the caller's to strip.
    """
    if len(value) < len(_SENTINEL_PREFIX) + len(_SENTINEL_SUFFIX) or not _looks_encoded(value):
        return value
    payload = value[len(_SENTINEL_PREFIX) : -len(_SENTINEL_SUFFIX)]
    try:
        raw = base64.b64decode(payload, validate=True)
        if base64.b64encode(raw).decode("ascii") != payload:
            return None
        return raw.decode("utf-8")
    except ValueError:  # binascii.Error, UnicodeDecodeError, a non-ASCII payload
        return None


def _looks_encoded(value: str) -> bool:
    return value.startswith(_SENTINEL_PREFIX) and value.endswith(_SENTINEL_SUFFIX)


def modern_request_headers(message: JSONObject) -> list[tuple[bytes, bytes]]:
    """The standard headers a client sends with a modern request (SPEC §Standard Request Headers).

    ``MCP-Protocol-Version`` from ``_meta``, ``Mcp-Method`` from ``method``, and ``Mcp-Name``
    (encoded by :func:`encode_header_value`) from the field :data:`NAME_SOURCES` or
    :data:`TASK_NAME_SOURCES` names. A version or method that is not printable ASCII, which no
    header can carry (only ``Mcp-Name`` and ``Mcp-Param-*`` have the base64 form), is left out,
    and the server will say the header is missing; a header never carries a line break.
    ``Mcp-Param-*`` headers are not made here.
    """
    headers: list[tuple[bytes, bytes]] = []
    meta = _meta_of(message)
    version = meta.get(PROTOCOL_VERSION_KEY) if meta is not None else None
    if isinstance(version, str) and _PLAIN_VALUE.fullmatch(version):
        headers.append((PROTOCOL_VERSION_HEADER, version.encode("ascii")))
    method = _method(message)
    if method is None:
        return headers
    if _PLAIN_VALUE.fullmatch(method):
        headers.append((METHOD_HEADER, method.encode("ascii")))
    field = NAME_SOURCES.get(method) or TASK_NAME_SOURCES.get(method)
    params = message.get("params")
    value = params.get(field) if field is not None and isinstance(params, dict) else None
    if isinstance(value, str):
        headers.append((NAME_HEADER, encode_header_value(value).encode("ascii")))
    return headers
