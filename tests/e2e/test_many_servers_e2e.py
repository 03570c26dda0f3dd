"""Many servers on one port, end to end: ``python -m bridge --config`` with a shared listener, and
the official SDK's Streamable HTTP client on each server's path.

    SDK client --/servers/alpha/mcp--\\                       /-- alpha: one shared child
    SDK client --/servers/beta/mcp---- mcp-bridge (one port) ---- beta: a child per session
    SDK client --/servers/gamma/mcp--/   (a shared listener)   \\-- gamma: its own bearer token

The three servers are the bundled example server under three names with different settings. A
reload (SIGHUP to the process) that adds, removes and changes servers leaves the socket and the
unchanged server's session alone; a server whose command does not exist leaves the others serving.
"""

from __future__ import annotations

import json
import re
import signal
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from commands import admin_port
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from sdkhttp import sdk_client, texts

from conftest import EXAMPLE_SERVER, bridge_process, poll

TIMEOUT = 60  # a bridge process, a few children, three SDK clients, a reload
TOKEN = "many-servers-token-0123456789abcdef"
SERVER = [sys.executable, str(EXAMPLE_SERVER)]
SETTINGS = {
    "alpha": 'child = "shared"',
    "beta": 'child = "per-connection"',
    "gamma": 'child = "per-connection"',
    "delta": 'child = "shared"',
}


def write_config(path: Path, servers: dict[str, str], tokens: Path | None = None) -> None:
    """``servers``: name to its settings; gamma (if there) is guarded by ``tokens``."""
    text = '[listeners.public]\nkind = "http"\naddress = "127.0.0.1:0"\n'
    for name, settings in servers.items():
        guard = f"token_file = [{json.dumps(str(tokens))}]\n" if name == "gamma" and tokens else ""
        text += (
            f"[servers.{name}]\ncommand = {json.dumps(SERVER)}\n{settings}\n"
            f'[[servers.{name}.listeners]]\nshared = "public"\n{guard}'
        )
    path.write_text(text)


def token_file(directory: Path) -> Path:
    path = directory / "tokens"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return path


def base_url(lines: list[str]) -> str:
    for line in lines:
        if match := re.search(r"listening on (http://127\.0\.0\.1:\d+)/servers/", line):
            return match.group(1)
    raise AssertionError("no mount logged:\n" + "\n".join(lines))


def bearer() -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"})


async def echo(url: str, text: str, http: httpx2.AsyncClient | None = None) -> list[str]:
    """One SDK session at ``url``: one echo call."""
    async with sdk_client(streamable_http_client(url, http_client=http)) as sdk:
        return texts(await sdk.client.call_tool("echo", {"text": text}))


async def test_three_servers_on_one_port_with_their_own_settings_serve_three_sdk_clients_at_once(
    tmp_path: Path,
) -> None:
    config = tmp_path / "bridge.toml"
    write_config(config, {name: SETTINGS[name] for name in ("alpha", "beta", "gamma")}, token_file(tmp_path))
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--config", str(config), "--admin", "tcp:127.0.0.1:0", listeners=3
        ) as bridge:
            base = base_url(bridge.stderr_lines)
            results: dict[str, list[str]] = {}

            async def use(name: str) -> None:
                http = bearer() if name == "gamma" else None
                results[name] = await echo(f"{base}/servers/{name}/mcp", f"hello {name}", http)

            async with trio.open_nursery() as nursery:
                for name in ("alpha", "beta", "gamma"):
                    nursery.start_soon(use, name)
            assert results == {name: [f"hello {name}"] for name in ("alpha", "beta", "gamma")}
            async with httpx2.AsyncClient() as http:
                refused = await http.post(
                    f"{base}/servers/gamma/mcp", json={}, headers={"Accept": "application/json"}
                )
                assert refused.status_code == 401  # gamma's token; alpha and beta have none
                listing = await http.get(f"{base}/servers")
                assert listing.status_code == 200
                servers = {entry["name"]: entry for entry in listing.json()["servers"]}
                assert {name: (entry["path"], entry["state"]) for name, entry in servers.items()} == {
                    name: (f"/servers/{name}/mcp", "serving") for name in ("alpha", "beta", "gamma")
                }
                assert servers["alpha"]["mode"] == "shared" and servers["beta"]["mode"] == "per-connection"
                ready = await http.get(f"http://127.0.0.1:{admin_port(bridge.stderr_lines)}/readyz")
                assert ready.status_code == 200
                assert sorted(line.split(":")[0] for line in ready.text.splitlines()) == [
                    "alpha",
                    "beta",
                    "gamma",
                ]


async def test_a_reload_adds_removes_and_changes_servers_and_only_their_clients_notice(
    tmp_path: Path,
) -> None:
    config = tmp_path / "bridge.toml"
    write_config(config, {name: SETTINGS[name] for name in ("alpha", "beta", "gamma")})
    with trio.fail_after(TIMEOUT):
        async with bridge_process("--config", str(config), listeners=3) as bridge:
            base = base_url(bridge.stderr_lines)
            url = {name: f"{base}/servers/{name}/mcp" for name in SETTINGS}
            async with (
                sdk_client(streamable_http_client(url["alpha"])) as alpha,
                sdk_client(streamable_http_client(url["beta"])) as beta,
                sdk_client(streamable_http_client(url["gamma"])) as gamma,
            ):
                for sdk in (alpha, beta, gamma):
                    assert texts(await sdk.client.call_tool("echo", {"text": "before"})) == ["before"]
                # beta removed, gamma changed (a shared child now), delta added; alpha as it was
                write_config(
                    config,
                    {"alpha": SETTINGS["alpha"], "gamma": 'child = "shared"', "delta": SETTINGS["delta"]},
                )
                bridge.process.send_signal(signal.SIGHUP)
                await poll(lambda: any("[delta] started" in line for line in bridge.stderr_lines))
                await poll(lambda: any("[gamma] started" in line for line in bridge.stderr_lines))
                # the unchanged server's session goes on, on the same socket
                assert texts(await alpha.client.call_tool("echo", {"text": "after"})) == ["after"]
                for gone in (beta, gamma):  # unmounted: their sessions ended
                    with pytest.raises(MCPError):
                        await gone.client.call_tool("echo", {"text": "after"})
            assert await echo(url["gamma"], "new gamma") == ["new gamma"]
            assert await echo(url["delta"], "new delta") == ["new delta"]
            async with httpx2.AsyncClient() as http:
                removed = await http.post(
                    url["beta"], json={}, headers={"Accept": "application/json, text/event-stream"}
                )
                assert removed.status_code == 404
                assert "beta" not in removed.text
    assert not any("[alpha]" in line and "stopping" in line for line in bridge.stderr_lines)
    opened = [line for line in bridge.stderr_lines if "shared listener public" in line]
    assert len(opened) == 1  # opened once: the reload neither closed nor re-opened the socket
    assert any("[beta] removed from the configuration" in line for line in bridge.stderr_lines)


async def test_a_server_whose_command_does_not_exist_leaves_the_others_serving_and_readyz_names_it(
    tmp_path: Path,
) -> None:
    config = tmp_path / "bridge.toml"
    write_config(config, {"alpha": SETTINGS["alpha"], "broken": SETTINGS["beta"]})
    config.write_text(
        config.read_text().replace(
            f"[servers.broken]\ncommand = {json.dumps(SERVER)}",
            '[servers.broken]\ncommand = ["mb-no-such-command-xyz"]',
        )
    )
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--config", str(config), "--admin", "tcp:127.0.0.1:0", listeners=1
        ) as bridge:
            base = base_url(bridge.stderr_lines)
            assert await echo(f"{base}/servers/alpha/mcp", "still serving") == ["still serving"]
            admin = f"http://127.0.0.1:{admin_port(bridge.stderr_lines)}"
            async with httpx2.AsyncClient() as http:
                broken = await http.post(
                    f"{base}/servers/broken/mcp",
                    json={},
                    headers={"Accept": "application/json, text/event-stream"},
                )
                assert broken.status_code == 503, broken.text
                assert broken.headers["content-type"].startswith("application/json")
                ready = await http.get(f"{admin}/readyz")
                assert ready.status_code == 503
                assert "broken: failed: command 'mb-no-such-command-xyz' not found in PATH" in ready.text
                assert (await http.get(f"{admin}/readyz/alpha")).status_code == 200
                assert (await http.get(f"{admin}/readyz/broken")).status_code == 503
                states = {
                    entry["name"]: entry["state"]
                    for entry in (await http.get(f"{base}/servers")).json()["servers"]
                }
                assert states == {"alpha": "serving", "broken": "failed"}


async def test_a_clients_mcp_servers_json_is_served_on_one_port_with_listen_http(tmp_path: Path) -> None:
    desktop = tmp_path / "claude_desktop_config.json"
    servers: dict[str, Any] = {
        name: {"command": SERVER[0], "args": SERVER[1:]} for name in ("notes", "files")
    }
    desktop.write_text(json.dumps({"mcpServers": servers}))
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--config", str(desktop), "--listen", "http://127.0.0.1:0", listeners=2
        ) as bridge:
            base = base_url(bridge.stderr_lines)
            for name in ("notes", "files"):
                assert await echo(f"{base}/servers/{name}/mcp", name) == [name]
    assert not list(tmp_path.glob("*.sock"))
