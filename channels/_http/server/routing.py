"""Which paths a host shares out, and the request targets it refuses before routing (sans-IO).

A host (:class:`~channels.HttpHost`) serves several servers on one socket, each at its own
paths, so a target that could be read as another path than the one it spells must never reach a
route: routing is an exact, case-sensitive match of the path as sent, after refusing (in this
order) a target over :data:`MAX_TARGET_BYTES` (414), and dot segments or percent-encoded
slashes, backslashes or dots (400), which a proxy or a client library in front could normalise
into another server's path. Everything else that matches nothing is a 404 naming no server.

Mount paths and names are checked when mounted (:func:`check_mount_path`,
:func:`check_server_name`), so a path that passes them never needs a refusal here: the checks
run only for targets that matched no route, off the hot path.
"""

from __future__ import annotations

import re

from ..._mcp.admission import HttpRefusal

# A mounted server's name: one path segment, safe in URLs, logs and metric labels without
# escaping; at most 64 characters, as a DNS label (RFC 1035 §2.3.4), long enough for any name.
SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# The longest request target a host routes; longer ones get 414. Mount paths are far shorter
# (a prefix, a name and "/mcp"); 2 KiB leaves room for a query and is well under the head limit.
MAX_TARGET_BYTES = 2048
# The longest mount path (or prefix): a quarter of the target bound, leaving the rest to queries.
MAX_PATH_BYTES = 512
# One segment of a mount path: RFC 3986's unreserved characters, nothing to decode or normalise.
_SEGMENT = re.compile(r"[A-Za-z0-9._~-]+")
# Percent-encodings that decode to "/", "\", or "." (RFC 3986 §2.1: hex digits in either case).
_ENCODED = re.compile(r"%(2f|5c|2e)", re.IGNORECASE)
# Where well-known URIs live (RFC 8615): never a mount's own path.
WELL_KNOWN_ROOT = "/.well-known"


def not_found() -> HttpRefusal:
    """The 404 for a path no server is mounted at: its body names no server."""
    return HttpRefusal(404, -32000, "Not Found: no MCP server at this path", "not-found")


def unsafe_target(target: str) -> HttpRefusal | None:
    """The refusal of a target that could confuse routing, or ``None`` if it is only unknown.

    ``target`` is the request target as sent (path and query).
    """
    if len(target) > MAX_TARGET_BYTES:
        return HttpRefusal(
            414, -32000, f"URI Too Long: a request target is at most {MAX_TARGET_BYTES} bytes", "uri-too-long"
        )
    path = target.partition("?")[0]
    if _ENCODED.search(path):
        return HttpRefusal(
            400, -32000, "Bad Request: encoded slashes or dots in the path are not routed", "bad-path"
        )
    if any(segment in (".", "..") for segment in path.split("/")) or "\\" in path:
        return HttpRefusal(400, -32000, "Bad Request: dot segments in the path are not routed", "bad-path")
    return None


def check_server_name(name: str) -> str | None:
    """Why ``name`` cannot be a mounted server's name, or ``None`` if it can."""
    if SERVER_NAME.fullmatch(name):
        return None
    shown = name if len(name) <= 80 else name[:80] + "..."
    return (
        f"server name {shown!r} cannot be mounted: use 1 to 64 of letters, digits, '.', '_' and '-', "
        "starting with a letter or digit"
    )


def check_mount_path(path: str, what: str = "mount path") -> str | None:
    """Why ``path`` cannot be mounted (or be a prefix), or ``None`` if it can.

    Absolute, of unreserved characters only (nothing to decode), no empty or dot segment, no
    trailing slash, not under ``/.well-known``, at most :data:`MAX_PATH_BYTES` long.
    """
    if len(path) > MAX_PATH_BYTES:
        return f"{what} is over {MAX_PATH_BYTES} bytes"
    if not path.startswith("/") or path == "/":
        return f"{what} {path!r} must start with '/' and name something"
    segments = path[1:].split("/")
    if any(not _SEGMENT.fullmatch(segment) or segment in (".", "..") for segment in segments):
        return (
            f"{what} {path!r} must be '/'-separated segments of letters, digits, '.', '_', '~' and '-' "
            "(no empty, '.' or '..' segment, no trailing '/', nothing percent-encoded)"
        )
    if path == WELL_KNOWN_ROOT or path.startswith(WELL_KNOWN_ROOT + "/"):
        return f"{what} {path!r} is under {WELL_KNOWN_ROOT}, where the metadata documents live"
    return None


def legacy_base(path: str) -> str:
    """Where a mount at ``path`` has its 2024-11-05 ``sse`` and ``messages`` endpoints.

    ``dirname(path)``, as the single-server listener derives them (``/mcp`` has them at ``/sse``
    and ``/messages``, ``/servers/a/mcp`` at ``/servers/a/sse``...).
    """
    return path.rstrip("/").rpartition("/")[0]
