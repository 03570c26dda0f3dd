r"""The 2026-07-28 rules for a request's headers, as a server checks them (sans-IO).

A modern request mirrors its body into headers (:mod:`channels._mcp.headers`), and a server that
reads the body MUST refuse a request whose headers are missing, malformed or disagree with it, so
that an intermediary routing on the headers and the server acting on the body cannot be told two
different things (SPEC ``streamable-http.mdx`` §Server Validation). :func:`check_modern_request`
checks the ``_meta`` fields, ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name``;
:func:`~channels._mcp.paramcheck.check_param_headers` the ``Mcp-Param-{Name}`` headers of a
``tools/call``.

Sources are cited by the short names of :mod:`channels._mcp.admission` (SPEC, TS, PY, CONF).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from .._core.errors import InvalidMessage
from .._core.guard import Headers
from .._core.jsonrpc import JSONObject, Kind, RequestId, validate
from .headers import (
    CLIENT_CAPABILITIES_KEY,
    DISPLAY_NAMES,
    METHOD_HEADER,
    MODERN_VERSIONS,
    NAME_HEADER,
    NAME_SOURCES,
    OWS,
    PROTOCOL_VERSION_HEADER,
    PROTOCOL_VERSION_KEY,
    REQUIRED_META_KEYS,
    ROUTING_HEADERS,
    TASK_NAME_SOURCES,
    decode_header_value,
    has_modern_claim,
    is_modern_version,
    routing_header_texts,
)
from .refusal import (
    INVALID_PARAMS,
    UNSUPPORTED_VERSION,
    HttpRefusal,
    header_mismatch,
    invalid_request,
    missing_header,
    protocol_refusal,
    shown,
)

FIELD_VALUE = re.compile(r"[\t\x20-\x7e]*")
"""RFC 9110 §5.5: a field value is visible ASCII, space and tab (obs-text, bytes 0x80-0xFF, is
obsolete and, for these headers, "invalid characters": SPEC §Server Validation)."""
# The kinds, looked up once: reading a member off an Enum class costs about 1,700 instructions in
# Python 3.11 (cachegrind), twice per request here otherwise (as in channels._core.jsonrpc).
_REQUEST, _NOTIFICATION, _RESPONSE = Kind.REQUEST, Kind.NOTIFICATION, Kind.RESPONSE


# -- The standard headers and _meta -----------------------------------------------------------------


def check_modern_request(
    message: JSONObject | list[JSONObject],
    headers: Headers,
    supported: Sequence[str] = MODERN_VERSIONS,
    fields: Mapping[bytes, bytes] | None = None,
    validated: bool = False,
) -> HttpRefusal | None:
    """Apply the 2026-07-28 rules to a POST that :func:`~channels._mcp.admission.era_of` found modern.

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
        message: what :func:`~channels._mcp.admission.parse_body` returned.
        headers: the request's headers.
        supported: the modern versions served (the child's ``supportedVersions``).
        fields: the value of each header sent once, by name (the HTTP request's
            ``single_fields``), if the caller has it: when no name is repeated, the three routing
            headers are looked up in it, not scanned for in ``headers``; the answer is the same.
        validated: ``message`` is one message that :func:`~channels._core.jsonrpc.validate`
            passed already (the HTTP endpoint decodes a body with it): its kind is then read
            off its keys, not checked again.
    """
    if isinstance(message, list):
        return invalid_request(
            "a JSON-RPC batch; in protocol version 2026-07-28 a POST carries one request or notification",
            "batch-not-allowed",
        )
    if validated:  # validate()'s answer for a message it passed: a response has no method
        kind = (_REQUEST if "id" in message else _NOTIFICATION) if "method" in message else _RESPONSE
    else:
        try:
            kind = validate(message)
        except InvalidMessage as exc:
            return protocol_refusal(exc)
    if kind is _RESPONSE:
        return invalid_request(
            "a JSON-RPC response; in protocol version 2026-07-28 a client posts requests and notifications",
            "response-not-allowed",
        )
    is_request = kind is _REQUEST
    request_id: RequestId | None = message["id"] if is_request else None
    method: str = message["method"]
    params = message.get("params")  # meta_of(message), inlined: the message is an object
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict):
        meta = None

    version_header = method_header = name_header = None
    routing = None
    if fields is not None and len(fields) == len(headers):  # no name repeated: each looked up once
        raw = fields.get(PROTOCOL_VERSION_HEADER)
        if raw is not None:
            version_header = raw.decode("latin-1").strip(OWS)
        raw = fields.get(METHOD_HEADER)
        if raw is not None:
            method_header = raw.decode("latin-1").strip(OWS)
        raw = fields.get(NAME_HEADER)
        if raw is not None:
            name_header = raw.decode("latin-1").strip(OWS)
    else:
        routing = routing_header_texts(headers)
    if method == "initialize" and not has_modern_claim(message):
        if routing is not None:
            versions: Sequence[str] = routing.get(PROTOCOL_VERSION_HEADER, ())
        else:
            versions = () if version_header is None else (version_header,)
        if any(is_modern_version(value) for value in versions):
            return header_mismatch(
                "an initialize request (the legacy handshake) sent with a modern MCP-Protocol-Version header",
                "initialize-with-modern-header",
                request_id,
                PROTOCOL_VERSION_HEADER,
            )

    if not (  # _check_meta's usual answer, without the call: a request with both fields right
        is_request
        and meta is not None
        and type(meta.get(PROTOCOL_VERSION_KEY)) is str
        and type(meta.get(CLIENT_CAPABILITIES_KEY)) is dict
    ):
        refusal = _check_meta(meta, is_request, request_id)
        if refusal is not None:
            return refusal

    if routing is None:
        # Each value once: the three joined are field-value characters exactly when each is.
        if not FIELD_VALUE.fullmatch((version_header or "") + (method_header or "") + (name_header or "")):
            for name, text in zip(ROUTING_HEADERS, (version_header, method_header, name_header), strict=True):
                if text is not None and not FIELD_VALUE.fullmatch(text):  # the first one fails
                    return _invalid_characters(name, request_id)
    else:
        values: dict[bytes, str] = {}
        for name in ROUTING_HEADERS:  # in this order: the first failure wins
            texts = routing.get(name)
            if texts is None:
                continue
            if len(texts) > 1:
                return header_mismatch(
                    f"more than one {DISPLAY_NAMES[name]} header", "duplicate-header", request_id, name
                )
            if not FIELD_VALUE.fullmatch(texts[0]):
                return _invalid_characters(name, request_id)
            values[name] = texts[0]
        version_header = values.get(PROTOCOL_VERSION_HEADER)
        method_header = values.get(METHOD_HEADER)
        name_header = values.get(NAME_HEADER)

    claimed = meta.get(PROTOCOL_VERSION_KEY) if meta is not None else None
    if version_header is None:
        if is_request:
            return missing_header(PROTOCOL_VERSION_HEADER, request_id)
    elif claimed is not None and version_header != claimed:
        return header_mismatch(
            f"the MCP-Protocol-Version header {shown(version_header)} does not match "
            f"_meta {PROTOCOL_VERSION_KEY} {shown(claimed)}",
            "protocol-version-mismatch",
            request_id,
            PROTOCOL_VERSION_HEADER,
        )
    version = claimed if claimed is not None else version_header

    if method_header is None:
        if is_request:
            return missing_header(METHOD_HEADER, request_id)
    elif method_header != method:
        return header_mismatch(
            f"the Mcp-Method header {shown(method_header)} does not match the method {shown(method)}",
            "method-mismatch",
            request_id,
            METHOD_HEADER,
        )

    if is_request:
        refusal = _check_name(message, method, name_header, request_id)
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


def _invalid_characters(name: bytes, request_id: RequestId | None) -> HttpRefusal:
    return header_mismatch(
        f"the {DISPLAY_NAMES[name]} header holds invalid characters", "invalid-header-value", request_id, name
    )


def _check_meta(
    meta: dict[str, Any] | None, is_request: bool, request_id: RequestId | None
) -> HttpRefusal | None:
    if is_request and (
        meta is None or PROTOCOL_VERSION_KEY not in meta or CLIENT_CAPABILITIES_KEY not in meta
    ):
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
            return missing_header(NAME_HEADER, request_id, f"params.{field}")
        return None
    decoded = decode_header_value(header)
    if decoded is None:
        return header_mismatch(
            "the Mcp-Name header is not valid =?base64?...?= (standard alphabet, padded, UTF-8)",
            "invalid-header-value",
            request_id,
            NAME_HEADER,
        )
    if decoded != body_value:
        return header_mismatch(
            f"the Mcp-Name header {shown(decoded)} does not match params.{field} {shown(body_value)}",
            "name-mismatch",
            request_id,
            NAME_HEADER,
        )
    return None
