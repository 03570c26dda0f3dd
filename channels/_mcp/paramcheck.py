r"""The ``Mcp-Param-{Name}`` headers of a 2026-07-28 ``tools/call``, as a server checks them (sans-IO).

A tool's ``x-mcp-header`` annotations (learnt from a ``tools/list`` result,
:func:`~channels._mcp.headers.tool_headers_from_list`) ask a client to mirror arguments into
headers; a server MUST refuse a call whose headers and arguments disagree (SPEC
``streamable-http.mdx`` §Server Behavior for Custom Headers). The standard headers are checked by
:mod:`channels._mcp.modern`, before these.

Sources are cited by the short names of :mod:`channels._mcp.admission` (SPEC, TS, PY, CONF).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .._core.guard import Headers
from .._core.jsonrpc import JSONObject, is_request_id
from .headers import PARAM_HEADER_PREFIX, ParamPath, decode_header_value, header_texts, method_of
from .modern import FIELD_VALUE
from .refusal import HttpRefusal, header_mismatch, shown

# The only header values compared as numbers (SPEC: integers SHOULD compare numerically); TS and PY
# use the same gate, so "0x1a", "1e3" and " 42" never count as 42.
_DECIMAL = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")


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
    if method_of(message) != "tools/call" or not isinstance(params, dict):
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
        texts = header_texts(headers, PARAM_HEADER_PREFIX + name.lower().encode("utf-8", "replace"))
        value = _value_at(arguments, (path,) if isinstance(path, str) else path)
        where = f"arguments {shown('.'.join(path) if not isinstance(path, str) else path)}"
        if len(texts) > 1:
            return header_mismatch(f"more than one {display} header", "duplicate-header", request_id, display)
        if value is None:
            if texts:
                return header_mismatch(
                    f"a {display} header for {where}, which the body does not have",
                    "unexpected-param-header",
                    request_id,
                    display,
                )
            continue
        if not texts:
            return header_mismatch(
                f"the {display} header is missing (the body has {where})",
                "missing-header",
                request_id,
                display,
            )
        if not FIELD_VALUE.fullmatch(texts[0]):
            return header_mismatch(
                f"the {display} header holds invalid characters", "invalid-header-value", request_id, display
            )
        decoded = decode_header_value(texts[0])
        if decoded is None:
            return header_mismatch(
                f"the {display} header is not valid =?base64?...?= (standard alphabet, padded, UTF-8)",
                "invalid-header-value",
                request_id,
                display,
            )
        if not _same_value(decoded, value):
            return header_mismatch(
                f"the {display} header {shown(decoded)} does not match {where} {shown(value)}",
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
        # Here only: decimal (with _decimal and numbers) is 0.33 MiB of a daemon's RSS, and only a
        # numeric argument mirrored in a header needs it.
        from decimal import Decimal, InvalidOperation

        try:  # exact: no float round trip, so integers past 2**53 compare too
            return Decimal(header) == Decimal(value if isinstance(value, int) else repr(value))
        except (InvalidOperation, ValueError):
            return False
    return False
