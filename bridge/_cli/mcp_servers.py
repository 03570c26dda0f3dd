"""A desktop client's ``mcpServers`` JSON, read as a configuration file.

``{"mcpServers": {"name": {"command": ..., "args": [...], "env": {...}}}}``: each server gets a
Unix socket ``SOCKET_DIR/NAME.sock``. :func:`from_mcp_servers` turns it into the TOML file's shape,
which :mod:`.schema` then structures like any other.

With ``--listen http://HOST:PORT`` beside ``--config``, :func:`listen_on` serves every server of
the file (either form) on that one port instead, at ``/servers/NAME/mcp``: a shared listener named
``listen`` that each server is mounted on.
"""

from __future__ import annotations

import os
from typing import Any

from .._errors import ConfigError

# Where the servers of an imported mcpServers file get their sockets, unless told otherwise.
DEFAULT_SOCKET_DIR = "/run/mcp-bridge"
# The shared listener ``--listen URL`` beside ``--config`` declares (``[listeners.listen]``).
LISTEN_NAME = "listen"
# The keys of a desktop client's mcpServers entries that mean something for a launched server.
MCP_SERVERS_KEYS = frozenset({"command", "args", "env", "cwd", "disabled", "type"})


def from_mcp_servers(data: Any, socket_dir: str, *, unix: bool = True) -> dict[str, Any]:
    """Turn ``{"mcpServers": {...}}`` into the TOML file's shape (``unix``: a socket each)."""
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
            "listeners": [{"kind": "unix", "path": os.path.join(socket_dir, f"{name}.sock")}] if unix else [],
        }
        if "cwd" in entry:
            servers[name]["cwd"] = entry["cwd"]
    return {"servers": servers}


def listen_on(data: Any, table: dict[str, Any]) -> Any:
    """Add the shared listener ``table`` as ``[listeners.listen]`` and mount every server on it.

    ``table`` holds ``kind``, ``address`` (and ``prefix``, TLS files, tokens...); the token keys
    guard each server too. Shapes that are wrong are left for :mod:`.schema` to name.
    """
    if not isinstance(data, dict) or not isinstance(data.get("servers"), dict):
        return data
    listeners = data.setdefault("listeners", {})
    if isinstance(listeners, dict) and LISTEN_NAME in listeners:
        raise ConfigError(f"listeners.{LISTEN_NAME}: the name --listen gives its listener; rename this one")
    guard = {
        key: value for key, value in table.items() if key.startswith("token_") or key == "insecure_no_auth"
    }
    if table.get("kind") in ("ws", "wss"):  # no index to guard: the tokens are the servers' alone
        table = {key: value for key, value in table.items() if key not in guard}
    if isinstance(listeners, dict):
        listeners[LISTEN_NAME] = table
    for server in data["servers"].values():
        if isinstance(server, dict):
            own = server.setdefault("listeners", [])
            if isinstance(own, list):
                own.append({"shared": LISTEN_NAME, **guard})
    return data
