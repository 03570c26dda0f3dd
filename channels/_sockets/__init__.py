"""Byte-stream channel kinds: Unix sockets, TCP, TLS, stdio and systemd socket activation.

Each module is one address kind (``unix:``, ``tcp:``, ``tls:``, ``stdio:``, ``fd:``) carrying the
newline framing of :mod:`channels._core.stream`; ``tcp`` also holds what every network listener
shares (the loopback rule, TCP listeners), and ``endpoint`` parses URL-shaped addresses (and
fills in an OAuth listener's default audience, its canonical URI).

Import rule: ``channels._core`` only.
"""

from .activation import (
    FdAddress,
    take_activated_sockets,
)
from .endpoint import (
    resolve_audience,
)
from .stdio import (
    StdioAddress,
    open_stdio_stream,
)
from .tcp import (
    TcpAddress,
)
from .tls import (
    TlsAddress,
)
from .unix import (
    UnixAddress,
)

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
