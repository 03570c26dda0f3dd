"""``mcp-bridge --sandbox`` as a whole process: an MCP round trip with a venv's Python in the
sandbox, exit 78 without bwrap, sandbox options from the command line and the configuration file
(and ``check-config``'s report of them), and no process of the sandbox left after the daemon's own
SIGTERM, after it is SIGKILLed, or after its shared child crash-loops (exit 75)."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import uuid
from pathlib import Path

import pytest
import trio
from commands import run_bridge
from sandboxing import (
    bwrap_or_skip,
    processes_in,
    processes_with,
    until_namespace_is_empty,
    wait_for_sandbox_namespace,
)

from bridge._child.sandbox import Sandbox
from bridge._cli import config as config_file
from bridge._cli.serve import build_serve_config
from bridge._cli.serve_parser import serve_parser
from bridge._errors import ConfigError

from conftest import REPO, LineClient, bridge_process, poll, request

TIMEOUT = 20
VENV_BIN = os.path.dirname(sys.executable)
# `python3` is the venv's: the defaults make the venv and the Python it was made from visible.
CHILD_PATH = f"PATH={VENV_BIN}:/usr/local/bin:/usr/bin:/bin"
INITIALIZE = request(
    1,
    "initialize",
    {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
)


async def test_an_mcp_round_trip_works_through_a_sandboxed_venv_python_server(sock_dir: Path) -> None:
    bwrap_or_skip()
    address = f"unix:{sock_dir}/mcp.sock"
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--sandbox",
            "--listen",
            address,
            "--env",
            CHILD_PATH,
            "--",
            "python3",
            "-m",
            "bridge.example_server",
        ) as bridge:
            client = await LineClient.open(address)
            await client.send(INITIALIZE)
            assert (await client.receive())["result"]["serverInfo"]["name"] == "mcp-bridge-example"
            await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            reply = await client.call(2, "echo", text="from the box")
            assert "from the box" in reply["result"]["content"][0]["text"]
            namespace = await wait_for_sandbox_namespace(bridge.process.pid)
            await client.aclose()
            await until_namespace_is_empty(namespace)  # per-connection: its child went with it


async def test_a_missing_bwrap_exits_78_naming_the_option_and_the_fix(sock_dir: Path) -> None:
    with trio.fail_after(TIMEOUT):
        result = await run_bridge(
            "--sandbox",
            "--sandbox-bwrap",
            "/nonexistent/bwrap",
            "--listen",
            f"unix:{sock_dir}/mcp.sock",
            "--",
            sys.executable,
            "-c",
            "pass",
        )
    stderr = result.stderr.decode()
    assert result.returncode == 78, stderr
    assert "--sandbox" in stderr and "apt-get install bubblewrap" in stderr, stderr
    assert "Traceback" not in stderr
    assert list(sock_dir.iterdir()) == []  # nothing started, unsandboxed or not


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
async def test_no_process_of_a_shared_sandboxed_child_survives_the_daemon(
    sock_dir: Path, signum: int
) -> None:
    bwrap_or_skip()
    address = f"unix:{sock_dir}/mcp.sock"
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--sandbox", "--child", "shared", "--listen", address, "--env", CHILD_PATH,
            "--", "python3", "-m", "bridge.example_server",
        ) as bridge:  # fmt: skip
            namespace = await wait_for_sandbox_namespace(bridge.process.pid)
            assert processes_in(namespace)
            bridge.process.send_signal(signum)
            code = await bridge.process.wait()
            assert code == (0 if signum == signal.SIGTERM else -9), bridge.log()
            await until_namespace_is_empty(namespace)  # SIGKILL: bwrap's --die-with-parent


def test_sandbox_options_need_sandbox_and_existing_paths(tmp_path: Path) -> None:
    base = ["--listen", "unix:/tmp/x.sock"]
    with pytest.raises(ConfigError, match="--sandbox-rw applies to a sandboxed child: add --sandbox"):
        build_serve_config(
            serve_parser().parse_args([*base, "--sandbox-rw", str(tmp_path)]), [sys.executable]
        )
    with pytest.raises(ConfigError, match="no such file or directory"):
        build_serve_config(
            serve_parser().parse_args([*base, "--sandbox", "--sandbox-ro", str(tmp_path / "nope")]),
            [sys.executable],
        )


def test_the_command_line_sandbox_hides_the_token_files_and_the_tap(tmp_path: Path) -> None:
    bwrap_or_skip()
    tokens = tmp_path / "tokens"
    tokens.write_text("t" * 32 + "\n")
    tokens.chmod(0o600)
    argv = ["--listen", "tcp:127.0.0.1:0", "--token-file", str(tokens), "--tap", str(tmp_path / "tap")]
    argv += ["--sandbox", "--sandbox-rw", str(tmp_path), "--sandbox-network"]
    spec = build_serve_config(serve_parser().parse_args(argv), [sys.executable]).child
    assert spec.sandbox == Sandbox(
        network=True, read_write=(str(tmp_path),), hide=(str(tokens), str(tmp_path / "tap"))
    )


def test_a_configuration_file_sandbox_is_read_with_its_keys_and_hides_the_file(tmp_path: Path) -> None:
    bwrap_or_skip()
    data = tmp_path / "data"
    data.mkdir()
    path = tmp_path / "bridge.toml"
    path.write_text(
        f"""
[servers.box]
command = ["{sys.executable}", "-c", "pass"]
sandbox = {{ rw = ["{data}"], ro = ["{REPO}"], network = true }}

[[servers.box.listeners]]
kind = "unix"
path = "{tmp_path}/box.sock"
"""
    )
    from bridge._cli.fleet_file import read_config

    sandbox = read_config(str(path), "/run/mcp-bridge").servers["box"].child.sandbox
    assert sandbox == Sandbox(
        network=True, read_write=(str(data),), read_only=(str(REPO),), hide=(str(path),)
    )
    path.write_text(path.read_text().replace("rw = [", "rw = 5, x = ["))
    with pytest.raises(ConfigError, match=r"servers\.box\.sandbox\.rw: expected a list"):
        config_file.read(str(path))


async def test_a_sandboxed_shared_child_crashing_at_start_up_makes_the_daemon_exit_75_leaving_no_sandbox(
    sock_dir: Path,
) -> None:
    bwrap_or_skip()
    marker = f"mb-crash-loop-{uuid.uuid4().hex}"  # in bwrap's, the server's and the grandchild's argv
    server = (
        "import subprocess, sys\n"
        "subprocess.Popen(['setsid', sys.executable, '-c', 'import time; time.sleep(300)', sys.argv[1]])\n"
        "sys.exit(1)\n"
    )
    with trio.fail_after(TIMEOUT):
        result = await run_bridge(
            "--sandbox", "--child", "shared", "--restart-limit", "1", "--listen", f"unix:{sock_dir}/s.sock",
            "--", sys.executable, "-c", server, marker,
        )  # fmt: skip
        stderr = result.stderr.decode()
        assert result.returncode == 75, stderr
        assert "exited with status 1; restarting in" in stderr, stderr
        assert "crash-looping: 2 unexpected exits within 60s (at most 1 allowed); last: pid" in stderr
        assert "Traceback" not in stderr
        await poll(lambda: processes_with(marker) == [])  # the sandboxes' orphans, once init reaps them


def sandboxed_config(tmp_path: Path, sandbox: str) -> Path:
    path = tmp_path / "bridge.toml"
    path.write_text(
        f"""
[servers.box]
command = ["{sys.executable}", "-c", "pass"]
sandbox = {sandbox}

[[servers.box.listeners]]
kind = "unix"
path = "{tmp_path}/box.sock"
"""
    )
    return path


async def test_check_config_reports_a_servers_sandbox(tmp_path: Path) -> None:
    bwrap_or_skip()
    data = tmp_path / "data"
    data.mkdir()
    path = sandboxed_config(tmp_path, f'{{ rw = ["{data}"], ro = ["{REPO}"], network = true }}')
    with trio.fail_after(TIMEOUT):
        result = await run_bridge("check-config", str(path))
    assert result.returncode == 0, result.stderr.decode()
    (line,) = result.stdout.decode().splitlines()
    bwrap = shutil.which("bwrap")
    assert line.endswith(
        f"(auto); sandboxed by {bwrap}: network, writable {data}, readable {REPO}, hidden {path}"
    ), line
    path = sandboxed_config(tmp_path, "{}")
    with trio.fail_after(TIMEOUT):
        result = await run_bridge("check-config", str(path))
    assert result.stdout.decode().endswith(f"; sandboxed by {bwrap}: no network, hidden {path}\n")


async def test_check_config_without_bwrap_exits_78_naming_the_servers_sandbox_key(tmp_path: Path) -> None:
    path = sandboxed_config(tmp_path, '{ bwrap = "/nonexistent/bwrap" }')
    with trio.fail_after(TIMEOUT):
        result = await run_bridge("check-config", str(path))
    stderr = result.stderr.decode()
    assert result.returncode == 78, stderr
    assert result.stdout == b""
    (line,) = stderr.splitlines()
    assert line.endswith(
        "servers.box.sandbox: bubblewrap's '/nonexistent/bwrap' was not found, and a sandboxed "
        "server is never started without it; install bubblewrap (apt-get install bubblewrap), or "
        "name its path with servers.box.sandbox.bwrap"
    ), line
