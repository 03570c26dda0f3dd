"""WebSocket channels (``ws://``, ``wss://``): one JSON-RPC message per text frame.

``address`` opens listeners and connections and runs the upgrade; ``channel`` moves messages over
an open WebSocket with the ``websockets`` library's sans-I/O core; ``frames`` reads and writes the
common frame shapes without the library's general parser.

Import rule: ``channels._core`` and ``channels._sockets``.
"""

from .address import (
    SecureWebSocketAddress,
    WebSocketAddress,
)
from .channel import (
    WebSocketChannel,
)

__all__ = [
    "SecureWebSocketAddress",
    "WebSocketAddress",
    "WebSocketChannel",
]
