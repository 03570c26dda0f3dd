"""``Mcp-Param-*`` headers: tool arguments a server wants to see in HTTP headers (2026-07-28, sans-IO).

A tool's ``inputSchema`` may mark a property with ``"x-mcp-header": "Region"``; an HTTP client
calling the tool MUST then mirror that argument into ``Mcp-Param-Region``, so that gateways can
route on it without reading bodies (2026-07-28 transports, "Custom Headers"), and servers reject a
call whose headers and arguments disagree (400, ``-32020``). A stdio client knows nothing of
headers, so the channel learns the annotations from the ``tools/list`` results it carries
(:meth:`ToolHeaders.learn`) and adds the headers to the ``tools/call`` requests it sends, as the
SDK clients do. A tool called before any listing of it passed through the channel gets no
``Mcp-Param-*`` headers.

The rules follow the spec and python-sdk's ``mcp.shared.inbound``: an annotation counts only on a
property reached from the schema's root through ``properties`` alone, of type string, integer or
boolean, named by an RFC 9110 token, unique without regard to case. A schema that breaks a rule is
invalid as a whole and gets no headers (the SDK clients drop such a tool from the listing; this
channel passes listings through unchanged, and a server does not check the headers of a schema it
considers invalid). Values: ``true``/``false`` for booleans, ``str()`` for numbers and strings, in
the ``=?base64?...?=`` form when not header-safe; an absent or ``null`` argument, no header.
"""

from __future__ import annotations

import re
from typing import Any

from ._clientmcp import encode_header_value

X_MCP_HEADER = "x-mcp-header"
PARAM_PREFIX = "Mcp-Param-"

MAX_TOOLS = 10_000
"""Tools whose annotations are remembered; past that, the oldest are forgotten (a listing is
bounded by the message size limit, but a server could list new names forever)."""

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 §5.6.2
_TYPES = frozenset({"string", "integer", "boolean"})
# JSON Schema keywords whose values hold subschemas (2020-12 applicators): an annotation under
# any of them is off the pure `properties` chain, which makes the schema invalid.
_ONE = frozenset(
    {"items", "contains", "unevaluatedItems", "additionalProperties", "propertyNames",
     "unevaluatedProperties", "not", "if", "then", "else", "contentSchema"}
)  # fmt: skip
_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_MAP = frozenset({"patternProperties", "dependentSchemas", "$defs", "definitions"})

Path = tuple[str, ...]


def header_map(input_schema: Any) -> dict[Path, str] | None:
    """The annotated properties of a tool's input schema (path from the root → header token).

    Returns ``None`` if an annotation breaks a rule (no headers for this tool); an empty map if
    there is none.
    """
    found: dict[Path, str] = {}
    seen: set[str] = set()
    stack: list[tuple[Path | None, Any]] = [((), input_schema)]
    while stack:
        path, schema = stack.pop()
        if not isinstance(schema, dict):
            continue
        if X_MCP_HEADER in schema:
            token = schema[X_MCP_HEADER]
            if (
                not path
                or not isinstance(token, str)
                or not _TOKEN.fullmatch(token)
                or schema.get("type") not in _TYPES
                or token.lower() in seen
            ):
                return None
            seen.add(token.lower())
            found[path] = token
        for keyword, value in schema.items():
            if keyword == "properties" and isinstance(value, dict):
                stack.extend(
                    ((*path, name) if path is not None else None, sub) for name, sub in value.items()
                )
            elif keyword in _ONE:
                stack.append((None, value))
            elif keyword in _LIST and isinstance(value, list):
                stack.extend((None, sub) for sub in value)
            elif keyword in _MAP and isinstance(value, dict):
                stack.extend((None, sub) for sub in value.values())
    return found


def param_headers(mapping: dict[Path, str], arguments: Any) -> list[tuple[str, str]]:
    """The ``Mcp-Param-*`` headers for a call with ``arguments``."""
    headers = []
    for path, token in mapping.items():
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, bool):
            rendered = "true" if value else "false"
        elif isinstance(value, (str, int, float)):
            rendered = str(value)
        else:
            continue
        headers.append((PARAM_PREFIX + token, encode_header_value(rendered)))
    return headers


class ToolHeaders:
    """What the channel learnt of each tool's ``x-mcp-header`` annotations."""

    def __init__(self) -> None:
        self._maps: dict[str, dict[Path, str]] = {}

    def learn(self, result: Any) -> None:
        """Take note of a ``tools/list`` result (one page of it)."""
        tools = result.get("tools") if isinstance(result, dict) else None
        for tool in tools if isinstance(tools, list) else ():
            name = tool.get("name") if isinstance(tool, dict) else None
            if not isinstance(name, str):
                continue
            self._maps.pop(name, None)
            mapping = header_map(tool.get("inputSchema"))
            if mapping:
                self._maps[name] = mapping
                if len(self._maps) > MAX_TOOLS:
                    del self._maps[next(iter(self._maps))]

    def headers_for(self, params: Any) -> list[tuple[str, str]]:
        """The ``Mcp-Param-*`` headers of a ``tools/call`` with these ``params``."""
        if not isinstance(params, dict) or not isinstance(params.get("name"), str):
            return []
        mapping = self._maps.get(params["name"])
        return param_headers(mapping, params.get("arguments")) if mapping else []
