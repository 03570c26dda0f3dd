"""mcp-bridge: serve a stdio MCP server over Unix sockets, TCP, TLS and WebSocket.

Clients that speak only stdio reach it through ``mcp-bridge connect``. This package is the MCP-aware
layer: child processes, relaying, the daemon, the command line. Transports live in the
``channels`` package, which this one imports and which never imports this one.
"""

from ._api import open_bridge, stop_budget
from ._child import ChildProcess, ChildSpec, describe_exit, open_child
from ._daemon import Daemon, DaemonStatistics, ServeConfig
from ._errors import (
    CONNECTION_CLOSED,
    REPLY_TOO_LARGE,
    REQUEST_TIMEOUT,
    TOO_MANY_CONNECTIONS,
    TOO_MANY_REQUESTS,
    BridgeError,
    ChildStartError,
    ConfigError,
    error_response,
)
from ._limits import Limits
from ._relay import Ending, Relay
from ._supervisor import CrashLoop, RestartPolicy

__all__ = [
    "CONNECTION_CLOSED",
    "REPLY_TOO_LARGE",
    "REQUEST_TIMEOUT",
    "TOO_MANY_CONNECTIONS",
    "TOO_MANY_REQUESTS",
    "BridgeError",
    "ChildProcess",
    "ChildSpec",
    "ChildStartError",
    "ConfigError",
    "CrashLoop",
    "Daemon",
    "DaemonStatistics",
    "Ending",
    "Limits",
    "Relay",
    "RestartPolicy",
    "ServeConfig",
    "describe_exit",
    "error_response",
    "open_bridge",
    "open_child",
    "stop_budget",
]
