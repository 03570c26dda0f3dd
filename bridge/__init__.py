"""mcp-bridge: serve a stdio MCP server over Unix sockets, TCP, TLS, WebSocket and Streamable HTTP.

Clients that speak only stdio reach it through ``mcp-bridge connect``. This package is the MCP-aware
layer: child processes, relaying, shared mode, the daemon, the command line. Transports live in the
``channels`` package, which this one imports and which never imports this one.

Layering (docs/design.md §2); each room imports only ``channels`` and the rooms before it:

- ``_version``, ``_errors`` and ``_limits``: the version (``bridge.__version__``); the errors the
  bridge sends and raises; every limit and timeout.
- ``_child``: a child process, its stderr, its supervisor, the warm pool.
- ``_relay``: one client to one child, and the channel wrappers (tap, metrics, read-ahead).
- ``_shared``: one child for every client: the sans-IO router, the mux, the era probe.
- ``_daemon``: listeners, children per connection or shared, graceful stop; ``open_bridge``.
- ``_ops``: the daemons of one process, the admin endpoint, metrics, systemd, logs.
- ``_cli``: the ``mcp-bridge`` command and the configuration file.

``example_server`` is the Quickstart's MCP server, standard library only.

The public names are those of the rooms' own ``__all__``, imported on first use (PEP 562): importing
``bridge`` (as ``mcp-bridge --version`` does, through ``bridge._cli``) loads no trio and no daemon.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__ as __version__

if TYPE_CHECKING:
    from ._child import *  # noqa: F403
    from ._daemon import *  # noqa: F403
    from ._errors import *  # noqa: F403
    from ._limits import *  # noqa: F403
    from ._relay import *  # noqa: F403

# Each room and its public names, as its own __all__ lists them (tests/test_exports.py checks).
_ROOMS: dict[str, tuple[str, ...]] = {
    "_child": (
        "ChildProcess",
        "ChildSpec",
        "CrashLoop",
        "RestartPolicy",
        "Sandbox",
        "describe_exit",
        "open_child",
    ),
    "_relay": ("Ending", "Relay", "ToolRule", "ToolScopes"),
    "_daemon": ("Daemon", "DaemonStatistics", "ServeConfig", "open_bridge", "stop_budget"),
    "_errors": (
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
    ),
    "_limits": ("Limits",),
}
_ROOM_OF = {name: room for room, names in _ROOMS.items() for name in names}

__all__ = [name for names in _ROOMS.values() for name in names]


def __getattr__(name: str) -> Any:
    """Import the room that exports ``name``, and keep all its public names here."""
    room = _ROOM_OF.get(name)
    if room is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{room}")
    from channels._core.exports import fixup_module_metadata

    values = {public: getattr(module, public) for public in _ROOMS[room]}
    fixup_module_metadata(__name__, values, values)
    globals().update(values)
    return values[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
