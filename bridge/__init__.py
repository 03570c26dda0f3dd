"""mcp-bridge: serve a stdio MCP server over Unix sockets, TCP, TLS, WebSocket and Streamable HTTP.

Clients that speak only stdio reach it through ``mcp-bridge connect``. This package is the MCP-aware
layer: child processes, relaying, shared mode, the daemon, the command line. Transports live in the
``channels`` package, which this one imports and which never imports this one.

Layering (docs/design.md §2); each room imports only ``channels`` and the rooms before it:

- ``_errors`` and ``_limits``: the errors the bridge sends and raises; every limit and timeout.
- ``_child``: a child process, its stderr, its supervisor, the warm pool.
- ``_relay``: one client to one child, and the channel wrappers (tap, metrics, read-ahead).
- ``_shared``: one child for every client: the sans-IO router, the mux, the era probe.
- ``_daemon``: listeners, children per connection or shared, graceful stop; ``open_bridge``.
- ``_ops``: the daemons of one process, the admin endpoint, metrics, systemd, logs.
- ``_cli``: the ``mcp-bridge`` command and the configuration file.

``example_server`` is the Quickstart's MCP server, standard library only.
"""

from channels._core.exports import fixup_module_metadata

from . import _child, _daemon, _errors, _limits, _relay
from ._child import *  # noqa: F403
from ._daemon import *  # noqa: F403
from ._errors import *  # noqa: F403
from ._limits import *  # noqa: F403
from ._relay import *  # noqa: F403

__all__: list[str] = []
__all__ += _child.__all__
__all__ += _relay.__all__
__all__ += _daemon.__all__
__all__ += _errors.__all__
__all__ += _limits.__all__

fixup_module_metadata(__name__, __all__, globals())
del fixup_module_metadata
