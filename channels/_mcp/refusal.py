"""An HTTP refusal with a JSON-RPC error body, and the HTTP status of each JSON-RPC error (sans-IO).

What the checks of :mod:`channels._mcp.admission` and :mod:`channels._mcp.modern` answer with when a
request is not to reach a child: an :class:`HttpRefusal`, built by the helpers below so that every
refusal of a kind reads the same. :func:`status_for_error` gives the status a child's own error is
sent with in the modern era.

Sources are cited by the short names of :mod:`channels._mcp.admission` (SPEC, TS, PY, CONF).
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus

import attrs

from .._core.errors import INVALID_REQUEST, PARSE_ERROR, ProtocolError
from .._core.jsonrpc import RequestId, encode, is_request_id
from .headers import DISPLAY_NAMES

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


# -- Refusals of a kind -----------------------------------------------------------------------------


def protocol_refusal(exc: ProtocolError) -> HttpRefusal:
    """The 400 for a message :mod:`channels._core.jsonrpc` could not read: ``-32700`` or ``-32600``."""
    prefix = "Parse error" if exc.rpc_code == PARSE_ERROR else "Invalid Request"
    request_id = exc.request_id if is_request_id(exc.request_id) else None
    return HttpRefusal(HTTPStatus.BAD_REQUEST, exc.rpc_code, f"{prefix}: {exc}", exc.reason, request_id)


def invalid_request(detail: str, reason: str, request_id: RequestId | None = None) -> HttpRefusal:
    """The 400 for JSON that is not an acceptable request (``-32600``)."""
    return HttpRefusal(
        HTTPStatus.BAD_REQUEST, INVALID_REQUEST, f"Invalid Request: {detail}", reason, request_id
    )


def header_mismatch(
    detail: str, reason: str, request_id: RequestId | None, header: bytes | str
) -> HttpRefusal:
    """A ``-32020`` refusal; ``header`` is a routing header's name, or a display name."""
    name = DISPLAY_NAMES[header] if isinstance(header, bytes) else header
    return HttpRefusal(
        HTTPStatus.BAD_REQUEST,
        HEADER_MISMATCH,
        f"Header mismatch: {detail}",
        reason,
        request_id,
        {"header": name},
    )


def missing_header(header: bytes, request_id: RequestId | None, source: str | None = None) -> HttpRefusal:
    """The ``-32020`` refusal for a required routing header that is not there."""
    because = f" (the body has {source})" if source else ""
    return header_mismatch(
        f"the required {DISPLAY_NAMES[header]} header is missing{because}",
        "missing-header",
        request_id,
        header,
    )


def shown(value: object) -> str:
    """A value for a message: its repr, cut short."""
    try:
        text = repr(value)
    except ValueError:  # an integer past CPython's int_max_str_digits (only a message built locally)
        return f"<a {type(value).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."


# -- Statuses for a child's errors ------------------------------------------------------------------

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
