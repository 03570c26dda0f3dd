"""Building a server's ServeConfig from command-line flags, or from a one-server configuration file.

For the tests of options that reach the ServeConfig by both ways (``--start on-demand`` and
``--idle-stop``, ``--probe-timeout``), without starting anything.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bridge import ServeConfig
from bridge._cli.serve import build_serve_config
from bridge._cli.serve_parser import serve_parser

LISTEN = ["--listen", "unix:/tmp/unused.sock"]


def serve_config(*flags: str) -> ServeConfig:
    """The ServeConfig that ``mcp-bridge --listen unix:... FLAGS -- python`` would serve."""
    return build_serve_config(serve_parser().parse_args([*LISTEN, *flags]), [sys.executable])


def server_file(path: Path, extra: str) -> Path:
    """Write, at ``path``, a file declaring one server ``a`` with ``extra`` (TOML lines) among its keys."""
    path.write_text(
        f'[servers.a]\ncommand = ["x"]\n{extra}[[servers.a.listeners]]\nkind = "unix"\npath = "/x"\n'
    )
    return path
