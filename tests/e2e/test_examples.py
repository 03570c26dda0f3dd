"""The embedding examples (docs/embedding.md includes them as they are) run as documented."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from pathlib import Path

import trio

from channels.testing import check_message_channel

from conftest import REPO, pair_maker, reap

TIMEOUT = 30
EXAMPLES = REPO / "examples"
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


async def run_example(*args: str) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        [sys.executable, *args], cwd=REPO, env=ENV, check=False, capture_stdout=True, capture_stderr=True
    )


async def test_the_serve_and_client_examples_talk_to_each_other(sock_dir: Path) -> None:
    socket_path = sock_dir / "example.sock"
    with trio.fail_after(TIMEOUT):
        server = await trio.lowlevel.open_process(
            [sys.executable, str(EXAMPLES / "serve_unix.py"), str(socket_path)],
            cwd=REPO,
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert server.stdout is not None
            first_line = b""
            while b"\n" not in first_line:
                chunk = await server.stdout.receive_some(1024)
                assert chunk, "serve_unix.py exited before serving"
                first_line += chunk
            assert first_line.decode().startswith(f"serving on unix:{socket_path}")
            result = await run_example(str(EXAMPLES / "client.py"), f"unix:{socket_path}")
            assert result.returncode == 0, result.stderr.decode()
            assert result.stdout.decode().splitlines() == ["server: mcp-bridge-example", "echo: hello"]
            server.send_signal(signal.SIGINT)  # Ctrl-C: a graceful stop
            assert await server.wait() == 0
        finally:
            await reap(server)
    assert not socket_path.exists()  # the bridge removed its socket file


async def test_the_custom_channel_example_runs() -> None:
    with trio.fail_after(TIMEOUT):
        result = await run_example(str(EXAMPLES / "custom_channel.py"))
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode() == "echo: no file needed\n"


async def test_the_custom_channel_kind_keeps_the_channel_contract() -> None:
    spec = importlib.util.spec_from_file_location("custom_channel", EXAMPLES / "custom_channel.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # registers abstract:
    with trio.fail_after(TIMEOUT * 4):
        async with pair_maker(f"abstract:mcp-bridge-test-{os.getpid()}") as make_pair:
            await check_message_channel(make_pair, make_clogged_pair=make_pair, half_closeable=True)
