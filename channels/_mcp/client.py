"""What an MCP client puts in HTTP headers, and how HTTP outcomes become JSON-RPC replies (sans-IO).

HTTP is the one transport where ``channels`` must read MCP fields (docs/design.md §2): the session
and protocol-version headers of the legacy era, the routing headers of 2026-07-28
(``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``), and the ``_meta`` key that tells the two
eras apart. What a client must agree on with servers (those names, the era test, the
``=?base64?...?=`` form, the ``x-mcp-header`` rules) is :mod:`channels._mcp.headers`, by which
the bridge's own server checks requests; the client's modules take it from there, and keep here
only what is the client's alone.

Error replies: a request must never be left without an answer (docs/design.md §5.1), so every
HTTP outcome that carries no JSON-RPC reply becomes one, with the request's id:

=========================================  ===========  =====================================
outcome                                    code         ``data.reason``
=========================================  ===========  =====================================
an error status with a JSON-RPC error      the body's   the body's (its id set to the request's)
401 or 403 without one                     -31004       ``unauthorized`` / ``forbidden``
413 without one                            -32600       ``message-too-large``
another error status without one           -32000       ``http-error``
a 2xx with no reply (202, a stream that    -32000       ``no-reply``
ended, an unexpected content type)
no connection, a connection lost           -32000       ``connection-failed``
too many requests waiting for a connection -31002       ``too-many-requests``
the legacy session could not be renewed    -32000       ``session-lost``
=========================================  ===========  =====================================

``-32000`` is the code the SDKs use for transport conditions (python-sdk ``CONNECTION_CLOSED``, the
TypeScript SDK's HTTP transport errors) and the bridge's own for a request that gets no reply.
Every error carries ``data.status`` when an HTTP status was involved.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .._core.auth import UNAUTHORIZED
from .._core.errors import INVALID_REQUEST, ProtocolError
from .._core.jsonrpc import JSONObject, RequestId, decode, is_request_id
from .headers import DISPLAY_NAMES, PROTOCOL_VERSION_HEADER, modern_request_headers

SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = DISPLAY_NAMES[PROTOCOL_VERSION_HEADER]
"""``MCP-Protocol-Version``, which a legacy session's requests carry too."""
ACCEPT_BOTH = "application/json, text/event-stream"

TRANSPORT_ERROR = -32000
"""A request the server did not answer: HTTP error, connection lost, session lost (``data.reason``
says which)."""

TOO_MANY_REQUESTS = -31002
"""A request refused because too many were already waiting for a connection (the bridge's own code
for its in-flight limit, with the same meaning)."""

# A session id must be visible ASCII (2025-11-25 transports, "Session Management").
_SESSION_ID = re.compile(r"[\x21-\x7e]+")


def modern_headers(message: JSONObject, version: str) -> list[tuple[str, str]]:
    """The standard headers of a 2026-07-28 POST, with ``version`` as ``MCP-Protocol-Version``.

    Those of :func:`channels._mcp.headers.modern_request_headers` (the rules the bridge's server
    checks), with the names written as the spec writes them.
    """
    return [
        (DISPLAY_NAMES[name], value.decode("ascii"))
        for name, value in modern_request_headers(message, version)
    ]


def valid_session_id(value: str | None) -> str | None:
    """The session id if it is one a client may echo (visible ASCII), else ``None``."""
    return value if value is not None and _SESSION_ID.fullmatch(value) else None


def request_key(request_id: RequestId) -> tuple[type, RequestId]:
    """A dictionary key for a request id that keeps ``1`` and ``"1"`` apart."""
    return (type(request_id), request_id)


def is_reply_to(message: JSONObject, request_id: RequestId) -> bool:
    """Whether ``message`` is the response to the request ``request_id`` (same value, same type)."""
    if "method" in message or "id" not in message:
        return False
    reply_id = message["id"]
    return is_request_id(reply_id) and request_key(reply_id) == request_key(request_id)


def error_reply(
    request_id: RequestId | None, code: int, message: str, reason: str, **data: Any
) -> JSONObject:
    """A JSON-RPC error response with ``data.reason`` and any further ``data`` fields."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": code, "message": message, "data": {"reason": reason, **data}},
    }


def no_reply(request_id: RequestId, detail: str, *, reason: str = "no-reply", **data: Any) -> JSONObject:
    """The answer to a request whose exchange ended without the server's reply."""
    return error_reply(request_id, TRANSPORT_ERROR, "No reply from the server", reason, detail=detail, **data)


def too_many_requests(request_id: RequestId, limit: int) -> JSONObject:
    """The answer to a request refused because ``limit`` requests were already queued."""
    return error_reply(request_id, TOO_MANY_REQUESTS, "Too many requests", "too-many-requests", limit=limit)


def status_reply(
    request_id: RequestId, status: int, phrase: str, body: bytes | None, media: str
) -> JSONObject:
    """The answer to a request that got an error status.

    The body's JSON-RPC error if it has one (with the request's id), otherwise one built from the
    status.
    """
    if body and media == "application/json":
        try:
            message = decode(body)
        except ProtocolError:
            pass
        else:
            if "error" in message and "method" not in message:
                message["id"] = request_id
                return message
    text = f"HTTP {status} {phrase}".rstrip()
    if status in (401, 403):
        reason = "unauthorized" if status == 401 else "forbidden"
        return error_reply(request_id, UNAUTHORIZED, f"Access denied ({text})", reason, status=status)
    if status == 413:
        return error_reply(
            request_id, INVALID_REQUEST, f"Message too large ({text})", "message-too-large", status=status
        )
    return error_reply(
        request_id, TRANSPORT_ERROR, f"The server answered {text}", "http-error", status=status
    )


def media_type(headers: Sequence[tuple[bytes, bytes]]) -> str:
    """The ``Content-Type`` without parameters, lower-cased (``""`` if absent)."""
    for name, value in headers:
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower().decode("latin-1")
    return ""


def header(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> str | None:
    """The first value of header ``name`` (lower-case bytes), decoded as Latin-1, or ``None``."""
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None
