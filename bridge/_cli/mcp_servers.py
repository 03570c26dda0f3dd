"""A desktop client's ``mcpServers`` JSON, read as a configuration file.

``{"mcpServers": {"name": {"command": ..., "args": [...], "env": {...}}}}``: each server gets a
Unix socket ``SOCKET_DIR/NAME.sock``. :func:`from_mcp_servers` turns it into the TOML file's shape,
which :mod:`.schema` then structures like any other.
"""

from __future__ import annotations

import os
from typing import Any

from .._errors import ConfigError

# Where the servers of an imported mcpServers file get their sockets, unless told otherwise.
DEFAULT_SOCKET_DIR = "/run/mcp-bridge"
# The keys of a desktop client's mcpServers entries that mean something for a launched server.
MCP_SERVERS_KEYS = frozenset({"command", "args", "env", "cwd", "disabled", "type"})


def from_mcp_servers(data: Any, socket_dir: str) -> dict[str, Any]:
    """Turn ``{"mcpServers": {...}}`` into the TOML file's shape."""
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers"), dict):
        raise ConfigError('expected a JSON object with an "mcpServers" object in it')
    servers: dict[str, Any] = {}
    for name, entry in data["mcpServers"].items():
        where = f"mcpServers.{name}"
        if not name or "/" in name or name in (".", "..") or "\0" in name:
            raise ConfigError(f"{where}: a server name becomes a socket file name: no '/', not . or ..")
        if isinstance(entry, dict) and entry.get("disabled") is True:
            continue  # the clients' own switch: a disabled server is not served either
        if isinstance(entry, dict) and "url" in entry:
            raise ConfigError(
                f"{where}: a remote server (url) is not one mcp-bridge launches; remove it from the file"
            )
        if isinstance(entry, dict) and (unknown := set(entry) - MCP_SERVERS_KEYS):
            raise ConfigError(
                f"{where}: unknown keys ({', '.join(sorted(unknown))}); "
                f"expected {', '.join(sorted(MCP_SERVERS_KEYS))}"
            )
        if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
            if isinstance(entry, dict) and "url" in entry:
                raise ConfigError(
                    f"{where}: a remote server (url) is not one mcp-bridge launches; remove it from the file"
                )
            raise ConfigError(f"{where}.command: expected a string")
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
            raise ConfigError(f"{where}.args: expected a list of strings")
        servers[name] = {
            "command": [entry["command"], *args],
            "env": entry.get("env", {}),
            "listeners": [{"kind": "unix", "path": os.path.join(socket_dir, f"{name}.sock")}],
        }
        if "cwd" in entry:
            servers[name]["cwd"] = entry["cwd"]
    return {"servers": servers}
