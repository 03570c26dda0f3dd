"""The 2026-07-28 era for the benchmark's Streamable HTTP sessions (``HttpSession(modern=True)``).

That era has no ``initialize`` handshake and no session (the MCP specification, revision
2026-07-28: ``basic/versioning.mdx``, ``basic/transports/streamable-http.mdx``): every request
carries its protocol version and client capabilities in ``params._meta``, and every POST the
headers ``MCP-Protocol-Version``, ``Mcp-Method`` and, for ``tools/call``, ``prompts/get`` and
``resources/read``, ``Mcp-Name`` (``params.name``, or ``params.uri``). The scenarios are written
for the legacy handshake (``wire.open_session``); :func:`modern_post` maps each message onto the
era:

* ``initialize`` becomes ``server/discover`` with the same id: the era's first contact (a client
  SHOULD send it before anything else), so the setup scenario times it; its result names
  ``supportedVersions`` where an initialize result names ``protocolVersion``, and
  ``wire.check_initialize`` accepts either;
* ``notifications/initialized`` is not sent (the era has no lifecycle);
* every other request gets the ``_meta`` members (a request's own ``_meta`` members stay), and
  every message the headers above. The usual shape (``wire.encode`` of a request whose params
  have no ``_meta``: ``{"jsonrpc":"2.0","id":...,"method":"...","params":{"name":"..."``) is
  spliced as bytes, a few µs less per call than decoding and encoding it again; anything else
  is decoded, completed and encoded. Both give the same bytes (tests/bench/test_bench_http.py).
"""

from __future__ import annotations

import base64
import json
import re

from wire import CLIENT_INFO, INITIALIZE, INITIALIZE_ID, INITIALIZED, encode

MODERN_VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
}
DISCOVER_BODY = encode(
    {
        "jsonrpc": "2.0",
        "id": INITIALIZE_ID,
        "method": "server/discover",
        "params": {"_meta": {**META, "io.modelcontextprotocol/clientInfo": CLIENT_INFO}},
    }
).rstrip(b"\n")
# The methods whose POST names its target in Mcp-Name, and the params member that holds it.
NAMED = {b"tools/call": "name", b"prompts/get": "name", b"resources/read": "uri"}
BASE64_SENTINEL = "=?base64?"  # how a header value that is not plain ASCII is marked

_INITIALIZE_BODY = INITIALIZE.rstrip(b"\n")
_INITIALIZED_BODY = INITIALIZED.rstrip(b"\n")
_META_MEMBER = b'"_meta":' + json.dumps(META, separators=(",", ":")).encode()
# wire.encode's request, up to and including the opening brace of its params object
_REQUEST_HEAD = re.compile(
    rb'\{"jsonrpc":"2\.0","id":(?:-?[0-9]+|"[^"\\]*"),"method":"([^"\\]+)","params":\{'
)
_NAME_MEMBER = re.compile(rb'"(name|uri)":"([^"\\]*)"')


def modern_post(body: bytes) -> tuple[bytes, bytes, bytes | None] | None:
    """What to POST for one message of a session written for the legacy era: ``(body, method,
    name)`` (``name`` None where no ``Mcp-Name`` goes), or None for a message the era does not
    send. ``method`` and ``name`` are already header values."""
    if body == _INITIALIZE_BODY:
        return DISCOVER_BODY, b"server/discover", None
    if body == _INITIALIZED_BODY:
        return None
    head = _REQUEST_HEAD.match(body)
    if head is not None and b'"_meta"' not in body:
        method, end = head.group(1), head.end()
        name = None
        if method in NAMED:
            member = _NAME_MEMBER.match(body, end)
            if member is None or member.group(1).decode() != NAMED[method]:
                return _decoded(body)
            name = header_value(member.group(2).decode())
        separator = b"" if body.startswith(b"}", end) else b","
        return body[:end] + _META_MEMBER + separator + body[end:], method, name
    return _decoded(body)


def _decoded(body: bytes) -> tuple[bytes, bytes, bytes | None] | None:
    """The slow path of :func:`modern_post`: decode, complete, encode."""
    try:
        message = json.loads(body)
    except ValueError:
        return body, b"", None  # not JSON: sent as it is, for the server to refuse
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return body, b"", None  # a response or not a message: the server's answer decides
    method = message["method"]
    params = message.get("params")
    if "id" in message and (params is None or isinstance(params, dict)):
        params = params or {}
        meta = {**META, **(params.get("_meta") or {})}
        params = {"_meta": meta, **{key: value for key, value in params.items() if key != "_meta"}}
        message["params"] = params  # _meta first, as the fast path splices it
        body = encode(message).rstrip(b"\n")
    name = None
    member = NAMED.get(method.encode())
    if member is not None and isinstance(params, dict) and isinstance(params.get(member), str):
        name = header_value(params[member])
    return body, header_value(method), name


def header_value(text: str) -> bytes:
    """``text`` as an HTTP header value: as it is when it is printable ASCII without surrounding
    space (and does not look like the sentinel), else ``=?base64?...?=`` of its UTF-8."""
    if (
        text.isascii()
        and text.isprintable()
        and text == text.strip()
        and not text.startswith(BASE64_SENTINEL)
    ):
        return text.encode()
    return f"{BASE64_SENTINEL}{base64.b64encode(text.encode()).decode()}?=".encode()
