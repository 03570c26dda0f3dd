"""The ``--config`` file as a fleet: read for ``serve`` (again on SIGHUP) and ``check-config``.

:func:`read_config` reads the file into a :class:`~bridge._ops.plan.FleetPlan`, each server's
command (and sandbox) checked as the command line's is (:func:`check_command`);
:func:`listen_table` turns ``--listen http://HOST:PORT`` beside ``--config`` into the shared
listener every server of the file is mounted on (:func:`.mcp_servers.listen_on`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import urllib.parse
from typing import Any

import attrs

from .._child.process import ChildSpec
from .._errors import ConfigError
from .._ops.plan import FleetPlan
from .serve_parser import serve_parser

# The --listen URLs beside --config that become one shared listener: HTTP or WebSocket.
SHARED_SCHEMES = frozenset({"http", "https", "ws", "wss"})
# With --config and --listen URL: the options that configure that one shared listener (each is
# also the key of a [listeners.NAME] table); the token ones guard every server mounted on it too.
LISTEN_FLAGS = (
    "token_file",
    "token_env",
    "token_credential",
    "insecure_no_auth",
    "tls_cert",
    "tls_key",
    "tls_client_ca",
    "allow_host",
    "allow_origin",
    "trust_proxy",
)


def check_command(spec: ChildSpec) -> None:
    command = spec.argv[0]
    if "\0" in command:
        raise ConfigError(f"command {command!r} holds a NUL character")
    if os.sep in command:
        path = os.path.join(spec.cwd or os.getcwd(), command)
        if not os.access(path, os.X_OK) or os.path.isdir(path):
            raise ConfigError(f"command {command!r} is not an executable file")
    elif shutil.which(command, path=spec.environment(os.environ).get("PATH")) is None:
        raise ConfigError(f"command {command!r} not found in PATH")


def listen_table(options: argparse.Namespace) -> dict[str, Any] | None:
    """``--listen http://HOST:PORT[/PREFIX]`` (or ``ws://``...) as a shared listener's table, or ``None``."""
    if len(options.listen) != 1:
        return None
    url = urllib.parse.urlsplit(options.listen[0])
    if url.scheme not in SHARED_SCHEMES or not url.netloc or url.query or url.fragment:
        return None
    table: dict[str, Any] = {"kind": url.scheme, "address": url.netloc}
    if url.path not in ("", "/"):
        table["prefix"] = url.path.rstrip("/")
    defaults = vars(serve_parser().parse_args([]))
    for name in LISTEN_FLAGS:
        value = getattr(options, name)
        if value != defaults.get(name):
            table[name] = list(value) if isinstance(value, (list, tuple)) else value
    return table


def read_config(
    path: str,
    socket_dir: str,
    tap: str | None = None,
    *,
    listen: dict[str, Any] | None = None,
    strict: bool = False,
) -> FleetPlan:
    """The file's servers, each command (and sandbox) checked as the command line's is.

    A sandboxed child does not see the file itself, nor the tap: they may hold secrets. A server
    mounted on a shared listener whose command is not there is left out, as ``unavailable``, so
    that the others serve (unless ``strict``, as ``check-config`` is).

    Raises:
        ConfigError: the file or a value in it cannot work.
    """
    # The file's reader (cattrs, tomllib and the schema) loads only for a --config FILE.
    from . import config as config_file

    fleet = config_file.plan(config_file.read(path, socket_dir, listen))
    configs = dict(fleet.servers)
    unavailable = {}
    for name, config in configs.items():
        sandbox = config.child.sandbox
        if sandbox is not None:
            own = [os.path.abspath(item) for item in (path, tap) if item]
            sandbox = attrs.evolve(sandbox, hide=[*sandbox.hide, *own])
            config = configs[name] = attrs.evolve(config, child=attrs.evolve(config.child, sandbox=sandbox))
        try:
            check_command(config.child)
        except ConfigError as exc:
            if strict or name not in fleet.mounts:
                raise ConfigError(f"servers.{name}.command: {exc}") from None
            unavailable[name] = str(exc)
            continue
        if sandbox is not None:
            from .._child.bwrap import check_sandbox  # loads only where a server is sandboxed

            check_sandbox(sandbox, f"servers.{name}.sandbox", f"servers.{name}.sandbox.bwrap")
    return attrs.evolve(fleet, servers=configs, unavailable=unavailable)
