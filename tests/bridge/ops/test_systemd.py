"""systemd integration: sd_notify (READY, STATUS, STOPPING, WATCHDOG) to a test-owned datagram
socket, and socket activation end to end with the real ``systemd-socket-activate``."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from bridge._ops.systemd import Notifier
from channels._sockets.activation import _forget_activated_sockets, take_activated_sockets

from conftest import REPO, LineClient, bridge_process, example_server, poll, reap, result_text
from rawhttp import post

TIMEOUT = 20


class NotifySocket:
    """The service manager's end: a datagram socket collecting notifications."""

    def __init__(self, address: str) -> None:
        self.sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.address = address
        self.received: list[str] = []

    async def bind(self) -> None:
        await self.sock.bind(self.address)

    async def next_with(self, key: str) -> str:
        """The next notification holding line ``key`` (earlier ones are kept in ``received``)."""
        while True:
            message = (await self.sock.recv(4096)).decode()
            self.received.append(message)
            if key in message.splitlines():
                return message


async def test_ready_comes_once_listening_and_stopping_when_sigterm_begins_a_graceful_stop(
    sock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notify = NotifySocket(str(sock_dir / "notify"))
    await notify.bind()
    monkeypatch.setenv("NOTIFY_SOCKET", notify.address)
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--listen", f"unix:{sock_dir}/s.sock", "--child", "per-connection", "--", *example_server()
        ) as bridge:
            ready = await notify.next_with("READY=1")
            assert "STATUS=serving 0 clients, 0 children (per-connection)" in ready.splitlines()
            client = await LineClient.open(bridge.addresses[0])  # ready means it serves
            assert result_text(await client.call(1, "echo", text="up")) == "up"
            bridge.process.send_signal(signal.SIGTERM)
            stopping = await notify.next_with("STOPPING=1")
            assert any(line.startswith("STATUS=stopping") for line in stopping.splitlines())
            await client.aclose()
            assert await bridge.process.wait() == 0


async def test_an_abstract_notify_socket_is_used_as_given(
    sock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"mcp-bridge-notify-{os.getpid()}"
    notify = NotifySocket("\0" + name)
    await notify.bind()
    monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
    with trio.fail_after(TIMEOUT):
        async with bridge_process("--listen", f"unix:{sock_dir}/s.sock", "--", *example_server()):
            assert "READY=1" in (await notify.next_with("READY=1")).splitlines()


async def test_the_watchdog_is_fed_at_half_its_interval_while_healthy(
    sock_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notify = NotifySocket(str(sock_dir / "notify"))
    await notify.bind()
    monkeypatch.setenv("NOTIFY_SOCKET", notify.address)
    monkeypatch.setenv("WATCHDOG_USEC", "200000")  # 0.2 s: a ping every 0.1 s
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--listen", f"unix:{sock_dir}/s.sock", "--child", "shared", "--", *example_server()
        ):
            for _ in range(3):
                await notify.next_with("WATCHDOG=1")


def test_a_watchdog_meant_for_another_process_is_ignored() -> None:
    environ = {"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "1000000", "WATCHDOG_PID": "1"}
    notifier = Notifier.from_environment(environ)
    assert notifier.watchdog_interval is None and notifier.address == "/run/x"
    assert environ == {}  # read once, and gone: no child inherits them


def test_without_notify_socket_notifications_are_a_no_op() -> None:
    notifier = Notifier.from_environment({})
    notifier.ready("ready")  # nothing to send to, nothing raised
    notifier.stopping()
    assert notifier.address is None


def test_activated_sockets_are_read_once_by_name_and_removed_from_the_environment() -> None:
    _forget_activated_sockets()
    environ = {"LISTEN_PID": "4242", "LISTEN_FDS": "0", "LISTEN_FDNAMES": "", "PATH": "/bin"}
    try:
        assert take_activated_sockets(environ, pid=4242) == {}
        assert environ == {"PATH": "/bin"}
        _forget_activated_sockets()
        other = {"LISTEN_PID": "1", "LISTEN_FDS": "2", "LISTEN_FDNAMES": "a:b"}
        assert take_activated_sockets(other, pid=4242) == {}  # meant for another process
    finally:
        _forget_activated_sockets()


@pytest.mark.skipif(
    shutil.which("systemd-socket-activate") is None,
    reason="needs systemd-socket-activate (Debian package systemd)",
)
async def test_socket_activation_starts_the_bridge_on_the_first_connection_and_keeps_the_socket_file(
    sock_dir: Path,
) -> None:
    path = sock_dir / "activated.sock"
    argv = [
        "systemd-socket-activate",
        "-l",
        str(path),
        "--fdname=mcp",
        sys.executable,
        "-m",
        "bridge",
        "--listen",
        "fd:mcp",
        "--child",
        "per-connection",
        "--",
        *example_server(),
    ]
    with trio.fail_after(TIMEOUT):
        activator = await trio.lowlevel.open_process(
            argv, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            await poll(path.exists)
            client = await LineClient.open(f"unix:{path}")  # this starts the bridge
            assert result_text(await client.call(1, "echo", text="activated")) == "activated"
            await client.aclose()
            activator.send_signal(signal.SIGTERM)  # the same process: the tool execs the bridge
            assert await activator.wait() == 0
        finally:
            await reap(activator)
    assert path.exists()  # systemd's socket file: never removed by the bridge


@pytest.mark.skipif(
    shutil.which("systemd-socket-activate") is None,
    reason="needs systemd-socket-activate (Debian package systemd)",
)
async def test_an_activated_tcp_socket_serves_streamable_http_from_the_first_request() -> None:
    with socket.socket() as probe:  # a free loopback port for the activator to bind
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [
        "systemd-socket-activate",
        "-l",
        f"127.0.0.1:{port}",
        "--fdname=web",
        sys.executable,
        "-m",
        "bridge",
        "--listen",
        "http+fd:web/mcp",
        "--",
        *example_server(),
    ]
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    with trio.fail_after(TIMEOUT):
        activator = await trio.lowlevel.open_process(
            argv, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            while True:  # until the activator listens
                try:
                    response = await post(port, initialize)
                    break
                except OSError:
                    await trio.sleep(0.02)
            assert response.status == 200
            assert response.header("mcp-session-id")
            assert response.messages()[0]["result"]["serverInfo"]["name"] == "mcp-bridge-example"
            activator.send_signal(signal.SIGTERM)
            assert await activator.wait() == 0
        finally:
            await reap(activator)
