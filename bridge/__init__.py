"""mcp-bridge: serve a stdio MCP server over Unix sockets, TCP, TLS and WebSocket.

Clients that speak only stdio reach it through ``mcp-bridge connect``. This package is the MCP-aware
layer: child processes, relaying, the daemon, the command line. Transports live in the
``channels`` package, which this one imports and which never imports this one.
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
