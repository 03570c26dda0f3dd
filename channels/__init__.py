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
public name is exported here, from the rooms' own ``__all__``.
"""

from . import _core, _http, _oauth, _sockets, _ws
from ._core import *  # noqa: F403
from ._core.exports import fixup_module_metadata
from ._http import *  # noqa: F403
from ._oauth import *  # noqa: F403
from ._sockets import *  # noqa: F403
from ._ws import *  # noqa: F403

__all__: list[str] = []
__all__ += _core.__all__
__all__ += _sockets.__all__
__all__ += _oauth.__all__
__all__ += _ws.__all__
__all__ += _http.__all__

fixup_module_metadata(__name__, __all__, globals())
del fixup_module_metadata
