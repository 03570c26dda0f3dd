"""The things the benchmark talks to (``TARGET_NAMES``), behind one small interface.

Every target offers ``start()``, ``connect() -> Conn`` (a fresh session, not yet initialized),
``relay_pids()`` (the processes whose own CPU and memory are charged to the relay), ``server_pids()``
(the example-server processes), and ``stop() -> notes``.

* ``direct``: each session is a fresh example server on pipes; there is no relay.
* ``socat-*``: ``socat UNIX-LISTEN|TCP-LISTEN:...,fork,backlog=128 EXEC:...``. The relay is the
  listening socat plus its forked per-connection socat processes (found as the listener's children
  whose comm is ``socat``); the example servers those fork off are not counted. ``-d -d`` is added
  only so that socat logs ``listening on`` when it is ready.
* ``trio-unix``: ``bench/trio_relay.py``, a bare trio byte relay (no framing, no JSON): the floor
  of any trio relay here, for reading the bridge's figures. The relay is that process alone.
* ``bridge-prespawn``: ``bridge-unix`` with ``--prespawn 8``: eight children kept started ahead of
  connections (the warm pool), for the session-setup figure.
* ``bridge-auto``: ``bridge-unix`` with the default ``--child auto``, the Quickstart's command line:
  the era probe finds the example server dual-era and starts it shared, and each session, opening
  with ``initialize``, is a legacy client and gets a child of its own besides.
* ``bridge-shared``: ``bridge-unix`` with ``--child shared``: ONE example server for every session
  (the bridge rewrites ids and answers every ``initialize`` after the first from the first one's
  result); the example server answers one request at a time, so all sessions queue at that child.
* ``bridge-*``: ``python -m bridge --listen ... -- python bridge/example_server``. The relay is the
  bridge process alone (all its threads), never its example-server children. Ready when its stderr
  shows ``listening on unix:PATH`` / ``tcp:127.0.0.1:PORT`` / ``ws://127.0.0.1:PORT/`` /
  ``tls:127.0.0.1:PORT``; stopped with SIGTERM. ``bridge-tls`` gets a throwaway CA and certificate
  (ws_tls.TestCertificates) in the row's temporary directory, deleted when the row stops.
* ``bridge-http``: ``python -m bridge --listen http://127.0.0.1:0/mcp ...``: Streamable HTTP (see
  streamable_http.py for the client side), ready when its stderr shows
  ``listening on http://127.0.0.1:PORT/mcp``.
* ``bridge-http-2026``: ``bridge-http`` with ``--child shared``, its sessions in the 2026-07-28 era
  (no initialize, no session; per-request ``_meta`` and ``Mcp-*`` headers: http_modern.py).
* ``supergateway-ws``: supergateway's stdio→WebSocket gateway (ONE example server for all clients),
  installed by ``peers.ensure_npm_package`` with npm into the git-ignored ``bench/.node``; the relay
  is its node process. ``supergateway-ws-quiet`` adds ``--logLevel none``.
* Streamable HTTP peers (``peers.PeerTarget``), installed for the benchmark only, each taking a fixed
  port and ready when a TCP connect succeeds; the relay is the peer's own process (node or python),
  never the example server(s) it starts:

  - ``supergateway-http``: supergateway's stateful stdio→Streamable HTTP gateway, one example server
    per session, ``--logLevel none``;
  - ``mcp-proxy-npm``: punkpeye's ``mcp-proxy`` (npm), ONE example server behind an MCP client that
    every session's proxy server forwards to;
  - ``mcp-proxy-py``: sparfenyuk's ``mcp-proxy`` (PyPI, installed by ``peers.ensure_pypi_tool`` into
    the git-ignored venv ``bench/.pyvenv``), ONE example server likewise, ``--log-level WARNING``.
"""

from __future__ import annotations

from pathlib import Path

from peers import McpProxyNpmTarget, McpProxyPyTarget, SupergatewayTarget
from relays import PRESPAWN, DirectTarget, RelayTarget

BASELINE_SUFFIX = "@baseline"  # a bridge row served by another checkout's code (run.py --baseline)


def make_target(name: str, baseline: Path | None = None) -> DirectTarget | RelayTarget:
    if name.endswith(BASELINE_SUFFIX):
        if baseline is None:
            raise ValueError(f"{name}: a baseline row needs the baseline checkout")
        target = make_target(name.removesuffix(BASELINE_SUFFIX))
        assert isinstance(target, RelayTarget) and target.kind == "bridge", name
        target.name, target.cwd = name, baseline  # `python -m bridge` imports from its cwd first
        return target
    if name == "direct":
        return DirectTarget()
    # Each bridge row names its child mode: one child per session, as socat's fork+EXEC, except
    # where the row is about sharing one.
    per_connection = ("--child", "per-connection")
    if name == "bridge-prespawn":
        return RelayTarget(name, "unix", "bridge", (*per_connection, "--prespawn", str(PRESPAWN)))
    if name == "bridge-auto":
        return RelayTarget(name, "unix", "bridge", ("--child", "auto"))
    if name == "bridge-shared":
        return RelayTarget(name, "unix", "bridge", ("--child", "shared"))
    if name == "bridge-http-2026":
        return RelayTarget(name, "http", "bridge", ("--child", "shared"), modern=True)
    if name.startswith("supergateway-ws"):
        return SupergatewayTarget(name, "ws", quiet=name.endswith("-quiet"))
    if name == "supergateway-http":
        return SupergatewayTarget(name, "http", quiet=True)
    if name == "mcp-proxy-npm":
        return McpProxyNpmTarget(name)
    if name == "mcp-proxy-py":
        return McpProxyPyTarget(name)
    kind, transport = name.split("-")
    return RelayTarget(name, transport, kind, per_connection if kind == "bridge" else ())


TARGET_NAMES = (
    "direct",
    "socat-unix",
    "socat-tcp",
    "trio-unix",
    "bridge-unix",
    "bridge-tcp",
    "bridge-prespawn",
    "bridge-auto",
    "bridge-shared",
    "bridge-ws",
    "bridge-tls",
    "bridge-http",
    "bridge-http-2026",
    "supergateway-ws",
    "supergateway-ws-quiet",
    "supergateway-http",
    "mcp-proxy-npm",
    "mcp-proxy-py",
)
