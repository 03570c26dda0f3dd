r"""What a 2026-07-28 request carries in HTTP headers, for the server and the client alike (sans-IO).

The Streamable HTTP transport of 2026-07-28 mirrors body fields into headers, so that
intermediaries can route a request without reading its body: ``MCP-Protocol-Version`` (the
``_meta`` version), ``Mcp-Method``, ``Mcp-Name`` and the ``Mcp-Param-{Name}`` headers a tool's
``x-mcp-header`` annotations ask for. The server checks them (:mod:`channels._mcp.modern`,
:mod:`channels._mcp.paramcheck`); the client writes them (:mod:`channels._mcp.client`,
:mod:`channels._mcp.params`). Both take from here what they must agree on: the versions and the
era test, the header and ``_meta`` names, the ``=?base64?...?=`` form of a value, the standard
headers of a request, and which annotations of a tool's ``inputSchema`` count.

Sources are cited by the short names of :mod:`channels._mcp.admission` (SPEC, TS, PY, CONF).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Mapping
from typing import Any

from .._core.guard import Headers, header_values
from .._core.jsonrpc import JSONObject

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


def is_modern_version(version: str) -> bool:
    """Whether a protocol version belongs to the modern era (see :data:`FIRST_MODERN_VERSION`)."""
    return version >= FIRST_MODERN_VERSION


# -- Header and _meta names -------------------------------------------------------------------------

PROTOCOL_VERSION_HEADER = b"mcp-protocol-version"
METHOD_HEADER = b"mcp-method"
NAME_HEADER = b"mcp-name"
PARAM_HEADER_PREFIX = b"mcp-param-"
ROUTING_HEADERS = (PROTOCOL_VERSION_HEADER, METHOD_HEADER, NAME_HEADER)
"""The standard request headers, in the order SPEC ``streamable-http.mdx`` lists them (and the
order they are checked in)."""
_ROUTING_NAMES = frozenset(ROUTING_HEADERS)
DISPLAY_NAMES: Mapping[bytes, str] = {
    PROTOCOL_VERSION_HEADER: "MCP-Protocol-Version",
    METHOD_HEADER: "Mcp-Method",
    NAME_HEADER: "Mcp-Name",
    PARAM_HEADER_PREFIX: "Mcp-Param-",
}
"""How SPEC writes each name (and the prefix), which is how the client sends them; a name is
case-insensitive (SPEC §Case Sensitivity), so the server looks them up lower-case."""

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
sends a mismatched one and expects ``-32020``). A client sends it (SEP-2663: the client "MUST set
the ``Mcp-Name`` header to the value of ``params.taskId``"); a server checks it when present, but
does not require it, since the core spec does not."""

X_MCP_HEADER = "x-mcp-header"
"""The ``inputSchema`` property annotation naming a tool parameter's ``Mcp-Param-{Name}`` header
(SPEC ``server/tools.mdx`` §x-mcp-header)."""

# -- Reading a message and its headers --------------------------------------------------------------

# RFC 9110 §5.5: optional whitespace around a field value is not part of it.
OWS = " \t"


def meta_of(message: Any) -> dict[str, Any] | None:
    """A message's ``params._meta``, if it is an object."""
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta if isinstance(meta, dict) else None


def method_of(message: Any) -> str | None:
    """A message's ``method``, if it is a string."""
    method = message.get("method") if isinstance(message, dict) else None
    return method if isinstance(method, str) else None


def claimed_version(message: Any) -> str | None:
    """The protocol version a message's ``_meta`` claims, if it is a string.

    A request that claims one carries per-request metadata, and is served statelessly, by the
    modern rules (SPEC ``basic/versioning.mdx`` §Backward Compatibility): a client sends it with
    the headers of :func:`modern_request_headers` and no session, whatever the version, so that
    a server that does not serve the version can say so (``-32022``, naming the ones it does).
    """
    meta = meta_of(message)
    version = meta.get(PROTOCOL_VERSION_KEY) if meta is not None else None
    return version if isinstance(version, str) else None


def has_modern_claim(message: Any) -> bool:
    """Whether a message's ``_meta`` is a complete modern claim: a modern version, capabilities."""
    version = claimed_version(message)
    meta = meta_of(message)
    return (
        version is not None
        and is_modern_version(version)
        and meta is not None
        and isinstance(meta.get(CLIENT_CAPABILITIES_KEY), dict)
    )


def header_texts(headers: Headers, name: bytes) -> list[str]:
    """Every value of header ``name``, as text (one character a byte), without its OWS."""
    return [value.decode("latin-1").strip(OWS) for value in header_values(headers, name)]


def routing_header_texts(headers: Headers) -> dict[bytes, list[str]]:
    """:func:`header_texts` of each of :data:`ROUTING_HEADERS` present, in one pass over ``headers``.

    A header absent is not a key (a request carries them all: one pass, not one per name).
    """
    found: dict[bytes, list[str]] = {}
    for name, value in headers:
        if name in _ROUTING_NAMES:
            text = value.decode("latin-1").strip(OWS)
            texts = found.get(name)
            if texts is None:
                found[name] = [text]
            else:
                texts.append(text)
    return found


# -- The =?base64?...?= form ------------------------------------------------------------------------

_SENTINEL_PREFIX = "=?base64?"
_SENTINEL_SUFFIX = "?="
# What a client may send without the base64 form: printable ASCII without edge spaces, and not
# empty (SPEC §Value Encoding; a tab is a control character, so it is encoded too, as PY does).
_PLAIN_VALUE = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")


def encode_header_value(value: str) -> str:
    """A value as an ``Mcp-Name`` or ``Mcp-Param-{Name}`` header carries it (SPEC §Value Encoding).

    Printable ASCII without leading or trailing spaces is sent as it is; anything else (other
    characters, edge whitespace, the empty string) is ``=?base64?{base64 of its UTF-8}?=``, and
    so is any value that starts with ``=?base64?`` and ends with ``?=`` (the spec's test, which
    ``=?base64?=`` passes too), which would otherwise read as encoded. The empty string is not safe as it
    is: an empty field is dropped, or read as absent, by some HTTP software, and a ``tools/call``
    of a tool named ``""`` must still carry its ``Mcp-Name``. A lone surrogate (not text; never
    in a decoded message) is encoded as is, and so refused by a strict decoder, this module's
    included.
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


def modern_request_headers(message: JSONObject, version: str | None = None) -> list[tuple[bytes, bytes]]:
    """The standard headers a client sends with a modern request (SPEC §Standard Request Headers).

    ``MCP-Protocol-Version`` from ``_meta`` (or ``version``), ``Mcp-Method`` from ``method``, and
    ``Mcp-Name`` (encoded by :func:`encode_header_value`) from the field :data:`NAME_SOURCES` or
    :data:`TASK_NAME_SOURCES` names (SEP-2663: a client "MUST set the ``Mcp-Name`` header" of a
    ``tasks/*`` request to its ``taskId``). A version or method that is not printable ASCII,
    which no header can carry (only ``Mcp-Name`` and ``Mcp-Param-*`` have the base64 form), is
    left out, and the server will say the header is missing; a header never carries a line
    break. ``Mcp-Param-*`` headers are not made here.

    Args:
        message: the request (or notification).
        version: the version to send; ``None`` for the one the ``_meta`` claims. A notification
            need not carry ``_meta``, and a client sends it with the version of its requests.
    """
    headers: list[tuple[bytes, bytes]] = []
    if version is None:
        version = claimed_version(message)
    if version is not None and _PLAIN_VALUE.fullmatch(version):
        headers.append((PROTOCOL_VERSION_HEADER, version.encode("ascii")))
    method = method_of(message)
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


# -- x-mcp-header annotations -----------------------------------------------------------------------

ParamPath = tuple[str, ...]
"""Where an annotated parameter sits in ``arguments``: the chain of ``properties`` keys from the
schema root (SPEC ``streamable-http.mdx`` §Schema Extension allows nested object properties)."""

# The JSON Schema types an x-mcp-header may sit on (SPEC server/tools.mdx: integer, string, boolean;
# "Parameters with type number are not permitted"). TS also takes "number", because CONF's client
# scenario http-custom-headers declares some; PY follows the spec, and so does this module.
_HEADER_TYPES = frozenset({"string", "integer", "boolean"})
# RFC 9110 §5.6.2 token: what an x-mcp-header name may be (SPEC server/tools.mdx).
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
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


def tool_annotations(result: Any) -> Iterator[tuple[str, dict[str, ParamPath] | None]]:
    """Each named tool of a ``tools/list`` result, with :func:`x_mcp_headers` of its ``inputSchema``.

    In the listing's order; ``None`` for a tool whose annotations break the spec's constraints.
    Nothing for a result without a list of tools, nor for an entry without a string name.
    """
    tools = result.get("tools") if isinstance(result, dict) else None
    for tool in tools if isinstance(tools, list) else ():
        name = tool.get("name") if isinstance(tool, dict) else None
        if isinstance(name, str):
            yield name, x_mcp_headers(tool.get("inputSchema"))


def tool_headers_from_list(result: JSONObject) -> dict[str, dict[str, ParamPath]]:
    """The ``x-mcp-header`` annotations of every valid tool in a ``tools/list`` result.

    Tool name → (header name → parameter path), for
    :func:`~channels._mcp.paramcheck.check_param_headers`. A tool whose annotations break the spec's
    constraints is left out (see :func:`x_mcp_headers`); a tool without annotations maps to
    ``{}``. One result is one page: merge the pages.
    """
    return {name: found for name, found in tool_annotations(result) if found is not None}
