"""WebSocket channels (``ws://``, ``wss://``): one JSON-RPC message per text frame.

``address`` is the two address kinds (listening, connecting); ``listener`` accepts connections
and establishes each in its own task; ``upgrade`` is the opening handshake's server side and
``dial`` its client side (loaded only by a client);
``channel`` moves messages over an open WebSocket with the ``websockets`` library's sans-I/O core,
building on its read path (``receiver``) and write path (``sender``); ``frames`` reads and writes
the common frame shapes without the library's general parser. ``host`` is one socket shared by
several servers, each mounted at its own path (``mount``: one server's mount and its listener).

Import rule: ``channels._core``, ``channels._sockets`` and ``channels._oauth``.
"""

from .address import (
    SecureWebSocketAddress,
    WebSocketAddress,
)
from .channel import (
    WebSocketChannel,
)
from .host import (
    WebSocketHost,
    WebSocketMountAddress,
)

__all__ = [
    "SecureWebSocketAddress",
    "WebSocketAddress",
    "WebSocketChannel",
    "WebSocketHost",
    "WebSocketMountAddress",
]
