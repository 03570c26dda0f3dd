"""Errors the bridge itself sends, and the exceptions it raises.

Codes (docs/design.md §7, listed in docs/reference/error-codes.md): the JSON-RPC standard codes
where they fit; the SDKs' transport conventions (``-32000`` connection closed, ``-32001`` request
timeout) so clients recognise them; anything else bridge-specific outside ``-32768..-32000`` (MCP
2026-07-28 reserves that range).
Every error the bridge writes carries ``data.reason``, a stable machine-readable tag.
"""

from __future__ import annotations

from typing import Any

from channels import (
    INVALID_REQUEST,
    PARSE_ERROR,
    CloseReason,
    JSONObject,
    MessageTooLarge,
    ProtocolError,
    RequestId,
)

__all__ = [
    "CONNECTION_CLOSED",
    "INSUFFICIENT_SCOPE",
    "REPLY_TOO_LARGE",
    "REQUEST_TIMEOUT",
    "TOO_MANY_CONNECTIONS",
    "TOO_MANY_REQUESTS",
    "BridgeError",
    "ChildStartError",
    "ConfigError",
    "error_response",
]

CONNECTION_CLOSED = -32000  # python-sdk CONNECTION_CLOSED: child gone, connection ending, stopping
"""A request that will get no reply from the child: it exited, the connection is ending, or the
bridge is stopping (``data.reason`` says which)."""
REQUEST_TIMEOUT = -32001  # python-sdk REQUEST_TIMEOUT
"""A request that ran longer than ``Limits.request_timeout``."""
REPLY_TOO_LARGE = -31001  # the child's reply exceeded the child message limit and was dropped
"""The child's reply exceeded ``Limits.max_child_message`` and was dropped."""
TOO_MANY_REQUESTS = -31002  # the connection already has the maximum number of requests in flight
"""The connection already had ``Limits.max_in_flight`` requests in flight."""
TOO_MANY_CONNECTIONS = -31003  # sent with id null just before closing a connection over the cap
"""The bridge already served ``Limits.max_connections`` connections; the connection is closed."""
# UNAUTHORIZED = -31004 (channels._core.auth): a newline channel's first message carried no valid token
INSUFFICIENT_SCOPE = -31005  # a tools/call the caller's OAuth scopes do not allow; never forwarded
"""A ``tools/call`` of a tool whose per-tool scopes the caller's token lacks (``data.scope``)."""

# How a connection's ending (its data.reason tag) is told to a peer that understands close codes
# (WebSocket); endings not listed close normally.
_CLOSE_REASONS = {
    "shutting-down": CloseReason.GOING_AWAY,
    "child-exited": CloseReason.RESTART,
    "handshake-replay-failed": CloseReason.RESTART,
    "message-too-large": CloseReason.TOO_BIG,
    "too-many-invalid-messages": CloseReason.POLICY,
    "client-too-slow": CloseReason.POLICY,
    "too-many-connections": CloseReason.TRY_AGAIN_LATER,
    "child-start-failed": CloseReason.INTERNAL_ERROR,
    "internal-error": CloseReason.INTERNAL_ERROR,
}


def close_reason(ending: str) -> CloseReason:
    """The close reason for a connection that ended with ``data.reason`` tag ``ending``."""
    return _CLOSE_REASONS.get(ending, CloseReason.NORMAL)


def error_response(
    request_id: RequestId | None, code: int, message: str, reason: str, **data: Any
) -> JSONObject:
    """A JSON-RPC error response with ``data.reason`` (and any further ``data`` fields).

    Args:
        request_id: the request answered, or ``None`` for an error that names none.
        code: ``error.code``.
        message: ``error.message``, a short sentence.
        reason: ``error.data.reason``, a stable machine-readable tag.
        **data: further ``error.data`` fields (JSON data).
    """
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": code, "message": message, "data": {"reason": reason, **data}},
    }


def too_many_requests(request_id: RequestId, limit: int) -> JSONObject:
    """The answer to a request over the connection's ``max_in_flight`` (``-31002``)."""
    return error_response(
        request_id, TOO_MANY_REQUESTS, "Too many requests", "too-many-requests", limit=limit
    )


def insufficient_scope(request_id: RequestId, tool: Any, scope: str) -> JSONObject:
    """The answer to a ``tools/call`` the caller may not make (``-31005``).

    Args:
        request_id: the request's id.
        tool: the tool's name as the request gave it (JSON data).
        scope: the scopes it lacks, space-separated as in OAuth (RFC 6749 §3.3, RFC 6750 §3).
    """
    return error_response(
        request_id,
        INSUFFICIENT_SCOPE,
        "Insufficient scope",
        "insufficient-scope",
        tool=tool,
        scope=scope,
        detail=f"calling this tool needs the scope {scope}, which the caller's access token lacks",
    )


_PROTOCOL_ERROR_MESSAGES = {PARSE_ERROR: "Parse error", INVALID_REQUEST: "Invalid Request"}


def bad_input_reply(error: ProtocolError) -> JSONObject:
    """The answer to one bad message from a client: ``-32700`` or ``-32600``.

    It names the request when its id could be read, and carries ``data.detail`` (and
    ``data.limit`` for an over-long message).
    """
    if isinstance(error, MessageTooLarge):
        return error_response(
            error.request_id,
            error.rpc_code,
            "Message too large",
            error.reason,
            detail=str(error),
            limit=error.limit,
        )
    message = _PROTOCOL_ERROR_MESSAGES.get(error.rpc_code, "Invalid Request")
    return error_response(error.request_id, error.rpc_code, message, error.reason, detail=str(error))


class BridgeError(Exception):
    """Base of the bridge's own exceptions.

    They are :class:`ConfigError`, :class:`ChildStartError` and :class:`~bridge.CrashLoop`;
    transport errors are ``channels``' and trio's own.
    """


class ConfigError(BridgeError):
    """The configuration or command line cannot work; the message names the setting and the fix.

    Raised while the command line is turned into a configuration; the CLI then exits with
    :data:`bridge._cli.exits.EXIT_CONFIG` (78, ``EX_CONFIG``).
    """


class ChildStartError(BridgeError):
    """The child process could not be started (command not found, permission denied, ...).

    The message names the command and the cause. Also raised when the era probe finds that the
    child exited or closed its pipes before answering.
    """
