"""Channels: whole JSON-RPC messages over one kind of transport.

This package knows framing and the JSON-RPC shape, nothing about child processes, sessions or MCP
protocol eras. ``bridge`` imports it; it never imports ``bridge``.
"""

from . import _core, _http, _sockets, _ws
from ._core import *  # noqa: F403
from ._core.exports import fixup_module_metadata
from ._http import *  # noqa: F403
from ._sockets import *  # noqa: F403
from ._ws import *  # noqa: F403

__all__: list[str] = []
__all__ += _core.__all__
__all__ += _sockets.__all__
__all__ += _ws.__all__
__all__ += _http.__all__

fixup_module_metadata(__name__, __all__, globals())
del fixup_module_metadata
