"""Channels: whole JSON-RPC messages over one kind of transport.

This package knows framing and the JSON-RPC shape, nothing about child processes, sessions or MCP
protocol eras (HTTP is the one exception: it must read MCP's headers, and keeps that knowledge in
``_mcp``). ``bridge`` imports it; it never imports ``bridge``.

Layering (docs/design.md §2); each room imports only the rooms before it in this list:

- ``_core``: errors, JSON-RPC values, framing, the Channel interface, the stream channel,
  listeners, addresses and their options, TLS contexts, tokens and the HTTP request guard.
  The sans-IO modules among them import no trio.
- ``_sockets``: ``unix:``, ``tcp:``, ``tls:``, ``stdio:`` and ``fd:`` (systemd socket activation).
- ``_oauth``: OAuth 2.1 access-token validation (imports ``_core`` only).
- ``_ws``: ``ws://`` and ``wss://``.
- ``_mcp``: the MCP-over-HTTP rules, sans-IO (imports ``_core`` only).
- ``_http``: ``http://`` and ``https://``: ``server/`` and ``client/``, which never import each
  other.

``testing`` is public: the conformance suite any channel implementation can run. Every other
public name is exported here, from the rooms' own ``__all__``: those of ``_core`` and ``_sockets``
at once (but ``MountAddress``, which ``_core`` defers, and the kinds of ``_sockets`` but ``unix:``,
which it defers), those of ``_oauth``, ``_ws`` and ``_http``
on first use (PEP 562), so that a process that serves only Unix sockets or TCP never loads
websockets, h11 or httptools. Their address kinds are
registered as deferred (``ws``, ``wss``, ``http``, ``https``, ``http+fd``): parsing such an
address imports the room that defines it.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING, Any

from . import _core, _sockets
from ._core.address import defer_address_kinds
from ._core.exports import fixup_module_metadata

# _core's and _sockets' names, except those they import on first use (their DEFERRED): a star
# import would load them.
_CORE_AT_ONCE = [name for name in _core.__all__ if name not in _core.DEFERRED]
globals().update({name: getattr(_core, name) for name in _CORE_AT_ONCE})
_SOCKETS_AT_ONCE = [name for name in _sockets.__all__ if name not in _sockets.DEFERRED]
globals().update({name: getattr(_sockets, name) for name in _SOCKETS_AT_ONCE})

if TYPE_CHECKING:
    from ._core import *  # noqa: F403

    # _core's and _sockets' deferred names, spelled out: a star import of names that module itself
    # imports only for type checkers is not followed by the API reference's reader (griffe).
    from ._core.auth import (  # noqa: F401
        AUTHENTICATE_METHOD,
        UNAUTHORIZED,
        CredentialError,
        TokenSet,
        authenticate_message,
        client_token_from_env,
        client_token_from_file,
        tokens_from_credential,
        tokens_from_env,
        tokens_from_file,
    )
    from ._core.oauth import OAuthSettings, Principal  # noqa: F401
    from ._http import *  # noqa: F403
    from ._http.client.channel import HttpClientChannel  # noqa: F401
    from ._oauth import *  # noqa: F403
    from ._sockets import *  # noqa: F403
    from ._sockets.activation import FdAddress, take_activated_sockets  # noqa: F401
    from ._sockets.endpoint import resolve_audience  # noqa: F401
    from ._sockets.stdio import StdioAddress, open_stdio_stream  # noqa: F401
    from ._sockets.tcp import TcpAddress  # noqa: F401
    from ._sockets.tls import TlsAddress  # noqa: F401
    from ._ws import *  # noqa: F403

# The rooms imported on first use, with their public names as their own __all__ lists them
# (tests/test_exports.py checks), and the address schemes each registers.
_LAZY_ROOMS: dict[str, tuple[str, ...]] = {
    "_oauth": ("Accepted", "Denied", "TokenVerifier", "challenge", "protected_resource_metadata"),
    "_ws": (
        "SecureWebSocketAddress",
        "WebSocketAddress",
        "WebSocketChannel",
        "WebSocketHost",
        "WebSocketMountAddress",
    ),
    "_http": (
        "HttpAddress",
        "HttpClientChannel",
        "HttpFdAddress",
        "HttpHost",
        "HttpMountAddress",
        "HttpsAddress",
    ),
}
_LAZY_SCHEMES = {"_ws": ("ws", "wss"), "_http": ("http", "https", "http+fd")}
_ROOM_OF = {name: room for room, names in _LAZY_ROOMS.items() for name in names}

__all__: list[str] = []
__all__ += _core.__all__
__all__ += _sockets.__all__
__all__ += _LAZY_ROOMS["_oauth"]
__all__ += _LAZY_ROOMS["_ws"]
__all__ += _LAZY_ROOMS["_http"]

fixup_module_metadata(__name__, [*_CORE_AT_ONCE, *_SOCKETS_AT_ONCE], globals())


def _load(room: str, wanted: str | None = None) -> None:
    """Import a lazy room and keep its public names here, shown under this package's name.

    Names the room itself imports on first use (its ``DEFERRED``) are taken only when ``wanted``.
    """
    module = importlib.import_module(f"{__name__}.{room}")
    deferred = getattr(module, "DEFERRED", {})
    names = [name for name in _LAZY_ROOMS[room] if name not in deferred or name == wanted]
    values = {name: getattr(module, name) for name in names}
    fixup_module_metadata(__name__, values, values)
    globals().update(values)


def _load_socket_kind(module: str) -> None:
    """Import a deferred module of ``_sockets`` and keep its public names here (``__getattr__``)."""
    for name, where in _sockets.DEFERRED.items():
        if where == module:
            __getattr__(name)


for _room, _schemes in _LAZY_SCHEMES.items():
    defer_address_kinds(_schemes, functools.partial(_load, _room))
for _scheme, _module in _sockets.DEFERRED_SCHEMES.items():
    defer_address_kinds((_scheme,), functools.partial(_load_socket_kind, _module))
del _room, _schemes, _scheme, _module


def __getattr__(name: str) -> Any:
    if name in _core.DEFERRED or name in _sockets.DEFERRED:
        values = {name: getattr(_core if name in _core.DEFERRED else _sockets, name)}
        fixup_module_metadata(__name__, values, values)
        globals().update(values)
        return values[name]
    room = _ROOM_OF.get(name)
    if room is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _load(room, name)
    return globals()[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
