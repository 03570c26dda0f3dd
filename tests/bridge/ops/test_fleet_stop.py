"""A stop signal that comes while the fleet is still starting its servers (``systemctl stop`` during
a slow start): it stops the servers being started too, without waiting for their start to end.

The real ``mcp-bridge`` process and a real child; the child writes its pid to a file once the era
probe has reached it (``--child auto``), and never answers it, so the server stays in its start
for the whole probe timeout, far past the test's deadline.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import trio

from bridge._cli.exits import EXIT_OK

from conftest import REPO, bridge_argv, deaf_child_pid, reap, shell_child, wait_until_gone

TIMEOUT = 20


async def test_a_stop_signal_during_a_servers_era_probe_stops_the_bridge_without_waiting_for_the_probe(
    sock_dir: Path,
) -> None:
    pid_file = sock_dir / "pid"
    # Never answers the probe; exits at its stdin's EOF; its stdout stays open until then.
    silent = shell_child(pid_file, "sh -c 'cat > /dev/null'")
    argv = bridge_argv(
        "--listen", f"unix:{sock_dir}/s.sock", "--child", "auto", "--probe-timeout", "10m", "--", *silent
    )
    log = sock_dir / "log"
    with log.open("wb") as stderr:
        process = await trio.lowlevel.open_process(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, cwd=REPO
        )
    try:
        with trio.fail_after(TIMEOUT):
            probed = await deaf_child_pid(pid_file)
            process.send_signal(signal.SIGTERM)
            assert await process.wait() == EXIT_OK, log.read_text()
            await wait_until_gone(probed)
    finally:
        if process.returncode is None:
            process.kill()
        await reap(process)
    assert "listening on" not in log.read_text()
