"""Streamable HTTP (and the 2024-11-05 HTTP+SSE transport): ``http://`` and ``https://``.

``address`` is the address kind; ``host`` one socket shared by several servers, each mounted at
its own path (``mount`` their listeners, ``binding`` its sockets, ``accepting`` the accept loop
both kinds share); ``sse`` the event-stream format both sides share; ``server/`` the
listener (one HTTP/1.1 connection, the routes, sessions and response streams); ``client/`` the
client channel ``mcp-bridge connect http://...`` uses.

Import rule: ``channels._core``, ``channels._sockets``, ``channels._mcp`` and ``channels._oauth``;
``server`` and ``client`` never import each other. The client (and h11, which only it uses) is
imported on first use: a bridge serving HTTP never connects as an HTTP client.
"""

from typing import TYPE_CHECKING

from .._core.exports import import_on_first_use
from .address import (
    HttpAddress,
    HttpFdAddress,
    HttpsAddress,
)
from .host import (
    HttpHost,
    HttpMountAddress,
)

if TYPE_CHECKING:
    from .client.channel import HttpClientChannel

# The public names imported on first use, and the module of each.
DEFERRED = {"HttpClientChannel": "client.channel"}

__all__ = [
    "HttpAddress",
    "HttpClientChannel",
    "HttpFdAddress",
    "HttpHost",
    "HttpMountAddress",
    "HttpsAddress",
]


__getattr__ = import_on_first_use(__name__, DEFERRED, globals())
