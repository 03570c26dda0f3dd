"""``Mcp-Param-*`` headers: tool arguments a server wants to see in HTTP headers (2026-07-28, sans-IO).

A tool's ``inputSchema`` may mark a property with ``"x-mcp-header": "Region"``; an HTTP client
calling the tool MUST then mirror that argument into ``Mcp-Param-Region``, so that gateways can
route on it without reading bodies (2026-07-28 transports, "Custom Headers"), and servers reject a
call whose headers and arguments disagree (400, ``-32020``). A stdio client knows nothing of
headers, so the channel learns the annotations from the ``tools/list`` results it carries
(:meth:`ToolHeaders.learn`) and adds the headers to the ``tools/call`` requests it sends, as the
SDK clients do. A tool called before any listing of it passed through the channel gets no
``Mcp-Param-*`` headers.

Which annotations count is :func:`channels._mcp.headers.x_mcp_headers`, the rules the bridge's
server checks calls by: an annotation counts only on a property reached from the schema's root
through ``properties`` alone, of type string, integer or boolean, named by an RFC 9110 token,
unique without regard to case. A schema that breaks a rule is invalid as a whole and gets no
headers (the SDK clients drop such a tool from the listing; this channel passes listings through
unchanged, and a server does not check the headers of a schema it considers invalid). Values:
``true``/``false`` for booleans, ``str()`` for numbers and strings, in the ``=?base64?...?=`` form
when not header-safe; an absent or ``null`` argument, no header.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .headers import DISPLAY_NAMES, PARAM_HEADER_PREFIX, ParamPath, encode_header_value, tool_annotations

MAX_TOOLS = 10_000
"""Tools whose annotations are remembered; past that, the oldest are forgotten (a listing is
bounded by the message size limit, but a server could list new names forever)."""

_PREFIX = DISPLAY_NAMES[PARAM_HEADER_PREFIX]


def param_headers(declared: Mapping[str, ParamPath], arguments: Any) -> list[tuple[str, str]]:
    """The ``Mcp-Param-*`` headers for a call with ``arguments``.

    Args:
        declared: header name → parameter path, as :func:`~channels._mcp.headers.x_mcp_headers`
            gives them.
        arguments: the call's ``params.arguments``.
    """
    headers = []
    for name, path in declared.items():
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, bool):
            rendered = "true" if value else "false"
        elif isinstance(value, (str, int, float)):
            rendered = str(value)
        else:
            continue
        headers.append((_PREFIX + name, encode_header_value(rendered)))
    return headers


class ToolHeaders:
    """What the channel learnt of each tool's ``x-mcp-header`` annotations."""

    def __init__(self) -> None:
        self._maps: dict[str, dict[str, ParamPath]] = {}

    def learn(self, result: Any) -> None:
        """Take note of a ``tools/list`` result (one page of it)."""
        for name, declared in tool_annotations(result):
            self._maps.pop(name, None)
            if declared:
                self._maps[name] = declared
                if len(self._maps) > MAX_TOOLS:
                    del self._maps[next(iter(self._maps))]

    def headers_for(self, params: Any) -> list[tuple[str, str]]:
        """The ``Mcp-Param-*`` headers of a ``tools/call`` with these ``params``."""
        if not isinstance(params, dict) or not isinstance(params.get("name"), str):
            return []
        mapping = self._maps.get(params["name"])
        return param_headers(mapping, params.get("arguments")) if mapping else []
