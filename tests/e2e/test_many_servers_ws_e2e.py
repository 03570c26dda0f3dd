"""Many servers on one WebSocket port, end to end: ``python -m bridge --config`` with a shared
``ws://`` listener, the project's own client and an independent one on two servers' paths.

    mcp-bridge connect --ws /servers/alpha/ws--\\                        /-- alpha: one shared child
                                              mcp-bridge (one ws port)
    trio-websocket ----ws /servers/beta/ws-----/  (a shared listener)  \\-- beta: a child per connection

A reload (SIGHUP to the process) that removes beta closes its client's WebSocket with 1001
(going away), leaves alpha's connection and the socket alone, and beta's path answers 404 after.
"""

from __future__ import annotations

import json
import re
import signal
import sys
from pathlib import Path

import pytest
import trio
from commands import connect
from trio_websocket import ConnectionClosed, ConnectionRejected, open_websocket_url

from conftest import EXAMPLE_SERVER, bridge_process, poll, request

TIMEOUT = 60  # a bridge process, two children, the connect process, a reload
SERVER = [sys.executable, str(EXAMPLE_SERVER)]
SETTINGS = {"alpha": 'child = "shared"', "beta": 'child = "per-connection"'}
INITIALIZE = request(
    1,
    "initialize",
    {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}},
)


def write_config(path: Path, servers: list[str]) -> None:
    text = '[listeners.sockets]\nkind = "ws"\naddress = "127.0.0.1:0"\n'
    for name in servers:
        text += (
            f"[servers.{name}]\ncommand = {json.dumps(SERVER)}\n{SETTINGS[name]}\n"
            f'[[servers.{name}.listeners]]\nshared = "sockets"\n'
        )
    path.write_text(text)


def stopped_after_removal(lines: list[str]) -> bool:
    """Whether a daemon stopped after beta's removal (the only one stopping: its line names none)."""
    removed = [i for i, line in enumerate(lines) if "[beta] removed from the configuration" in line]
    return bool(removed) and any(line.endswith("bridge.daemon: stopped") for line in lines[removed[0] :])


def base_url(lines: list[str]) -> str:
    for line in lines:
        if match := re.search(r"listening on (ws://127\.0\.0\.1:\d+)/servers/", line):
            return match.group(1)
    raise AssertionError("no mount logged:\n" + "\n".join(lines))


async def test_two_servers_on_one_websocket_port_serve_at_once_and_a_reload_closes_only_the_removed_ones(
    tmp_path: Path,
) -> None:
    config = tmp_path / "bridge.toml"
    write_config(config, ["alpha", "beta"])
    with trio.fail_after(TIMEOUT):
        async with bridge_process("--config", str(config), listeners=2) as bridge:
            base = base_url(bridge.stderr_lines)
            async with (
                connect(f"{base}/servers/alpha/ws") as alpha,
                open_websocket_url(f"{base}/servers/beta/ws", subprotocols=["mcp"]) as beta,
            ):
                await alpha.send(INITIALIZE)
                await beta.send_message(json.dumps(INITIALIZE))
                assert (await alpha.receive())["result"]["serverInfo"]
                assert json.loads(await beta.get_message())["result"]["serverInfo"]
                assert (await alpha.call_echo(2, "to alpha"))["result"]["content"][0]["text"] == "to alpha"
                await beta.send_message(
                    json.dumps(request(2, "tools/call", {"name": "echo", "arguments": {"text": "to beta"}}))
                )
                assert json.loads(await beta.get_message())["result"]["content"][0]["text"] == "to beta"

                write_config(config, ["alpha"])  # beta removed; alpha as it was
                bridge.process.send_signal(signal.SIGHUP)

                with pytest.raises(ConnectionClosed) as closed:
                    await beta.get_message()
                assert closed.value.reason.code == 1001
                # its daemon stopped: its listener closed, which unmounted it
                await poll(lambda: stopped_after_removal(bridge.stderr_lines))
                # the unchanged server's connection goes on, on the same socket
                assert (await alpha.call_echo(3, "after"))["result"]["content"][0]["text"] == "after"
            with pytest.raises(ConnectionRejected) as refused:
                async with open_websocket_url(f"{base}/servers/beta/ws"):
                    pass
            assert refused.value.status_code == 404
            assert b"beta" not in (refused.value.body or b"")
    opened = [line for line in bridge.stderr_lines if "shared listener sockets" in line]
    assert len(opened) == 1  # opened once: the reload neither closed nor re-opened the socket
    assert not any("[alpha]" in line and "stopping" in line for line in bridge.stderr_lines)
