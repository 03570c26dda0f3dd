"""Which paths a host shares out, and its refusals of targets before routing, as HTTP refusals (sans-IO).

The checks themselves are :mod:`channels._core.mounts`', shared with the WebSocket host: an
exact, case-sensitive match of the path as sent, after refusing an overlong target (414), dot
segments and encoded slashes or dots (400); a 404 naming no server otherwise. Here they become
:class:`~channels._mcp.admission.HttpRefusal` answers, and a mount's 2024-11-05 siblings are
derived (:func:`legacy_base`).
"""

from __future__ import annotations

from ..._core import mounts
from ..._core.guard import Rejection
from ..._mcp.admission import HttpRefusal

# The longest request target a host routes (channels/_core/mounts.py says why).
MAX_TARGET_BYTES = mounts.MAX_TARGET_BYTES

# RFC 9728 §3: the metadata of a resource lives at this path, followed by the resource's own path.
# Every service routes it (a document may be given without OAuth: --oauth-metadata).
WELL_KNOWN = "/.well-known/oauth-protected-resource"


def _refusal(rejection: Rejection) -> HttpRefusal:
    return HttpRefusal(rejection.status, -32000, rejection.message, rejection.reason)


def not_found() -> HttpRefusal:
    """The 404 for a path no server is mounted at: its body names no server."""
    return _refusal(mounts.NOT_FOUND)


def unsafe_target(target: str) -> HttpRefusal | None:
    """The refusal of a target that could confuse routing, or ``None`` if it is only unknown."""
    rejection = mounts.unsafe_target(target)
    return None if rejection is None else _refusal(rejection)


def legacy_base(path: str) -> str:
    """Where a mount at ``path`` has its 2024-11-05 ``sse`` and ``messages`` endpoints.

    ``dirname(path)``, as the single-server listener derives them (``/mcp`` has them at ``/sse``
    and ``/messages``, ``/servers/a/mcp`` at ``/servers/a/sse``...).
    """
    return path.rstrip("/").rpartition("/")[0]
