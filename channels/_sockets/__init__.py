"""Byte-stream channel kinds: Unix sockets, TCP, TLS, stdio and systemd socket activation.

Each module is one address kind (``unix:``, ``tcp:``, ``tls:``, ``stdio:``, ``fd:``) carrying the
newline framing of :mod:`channels._core.stream`; ``tcp`` also holds what every network listener
shares (the loopback rule, TCP listeners), and ``endpoint`` parses URL-shaped addresses (and
fills in an OAuth listener's default audience, its canonical URI).

Only ``unix`` loads with the package. The other kinds load on first use: their public names
(:data:`DEFERRED`) are imported when first asked for (PEP 562), and the package ``channels``
registers their schemes as deferred (:data:`DEFERRED_SCHEMES`, so parsing ``tcp:...`` imports
``tcp``), so that a process serving Unix sockets does not hold them (about 0.2 MiB of code and
classes).

Import rule: ``channels._core`` only.
"""

from typing import TYPE_CHECKING

from .._core.exports import import_on_first_use
from .unix import (
    UnixAddress,
)

if TYPE_CHECKING:
    from .activation import FdAddress, take_activated_sockets
    from .endpoint import resolve_audience
    from .stdio import StdioAddress, open_stdio_stream
    from .tcp import TcpAddress
    from .tls import TlsAddress

# The public names imported on first use, and the module of each.
DEFERRED = {
    "FdAddress": "activation",
    "take_activated_sockets": "activation",
    "resolve_audience": "endpoint",
    "StdioAddress": "stdio",
    "open_stdio_stream": "stdio",
    "TcpAddress": "tcp",
    "TlsAddress": "tls",
}

# The schemes of the kinds imported on first use, and the module that registers each.
DEFERRED_SCHEMES = {"fd": "activation", "stdio": "stdio", "tcp": "tcp", "tls": "tls"}

__all__ = [
    "FdAddress",
    "StdioAddress",
    "TcpAddress",
    "TlsAddress",
    "UnixAddress",
    "open_stdio_stream",
    "resolve_audience",
    "take_activated_sockets",
]


__getattr__ = import_on_first_use(__name__, DEFERRED, globals())
