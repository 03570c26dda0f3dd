"""The ``mcp-bridge`` command line, run as a real process (``python -m bridge``).

Exit codes (``--help``): 0 stopped cleanly, 1 runtime failure, 2 usage error, 69 cannot connect,
78 configuration error. Logs go to stderr; stdout is reserved for protocol data (``stdio:``).
"""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType

import attrs
import pytest
import trio
from commands import run_bridge

from bridge._cli import connect_parser, serve_parser

from conftest import (
    REPO,
    LineClient,
    bridge_argv,
    bridge_process,
    call,
    example_server,
    process_exists,
    reap,
    request,
    result_text,
    wait_until_gone,
)

TIMEOUT = 20  # seconds for one test: a few interpreter start-ups and round trips
PY = sys.executable  # an existing command for the cases that must fail before it matters

EXIT_OK, EXIT_USAGE, EXIT_UNAVAILABLE, EXIT_CONFIG = 0, 2, 69, 78


def assert_clean_failure(result: subprocess.CompletedProcess[bytes], code: int, *fragments: str) -> None:
    stderr = result.stderr.decode()
    assert result.returncode == code, stderr
    assert result.stdout == b""
    assert "Traceback" not in stderr
    for fragment in fragments:
        assert fragment in stderr, stderr


# -- a bridge process whose log lines can be awaited ------------------------------------------------


@attrs.define(eq=False)
class Lines:
    """Lines of a pipe, collected by a task; others wait for a pattern (an event per line)."""

    lines: list[str] = attrs.field(factory=list)
    ended: trio.Event = attrs.field(factory=trio.Event)
    _changed: trio.Event = attrs.field(factory=trio.Event)

    async def collect(self, stream: trio.abc.ReceiveStream) -> None:
        buffer = b""
        try:
            async for chunk in stream:
                buffer += chunk
                *complete, buffer = buffer.split(b"\n")
                for raw in complete:
                    self.lines.append(raw.decode(errors="replace"))
                self._changed.set()
                self._changed = trio.Event()
        finally:
            if buffer:
                self.lines.append(buffer.decode(errors="replace"))
            self.ended.set()
            self._changed.set()

    async def wait_for(self, pattern: str) -> re.Match[str]:
        regex = re.compile(pattern)
        while True:
            changed = self._changed
            for line in self.lines:
                if match := regex.search(line):
                    return match
            if self.ended.is_set():
                raise AssertionError(f"no line matching {pattern!r}:\n" + "\n".join(self.lines))
            await changed.wait()

    def text(self) -> str:
        return "\n".join(self.lines)


@attrs.define(eq=False)
class Spawned:
    process: trio.Process
    stderr: Lines

    async def exit_code(self) -> int:
        code = await self.process.wait()
        await self.stderr.ended.wait()
        return code


@asynccontextmanager
async def spawned_bridge(
    *args: str, stdin: int = subprocess.DEVNULL, stdout: int = subprocess.DEVNULL
) -> AsyncIterator[Spawned]:
    """``python -m bridge ARGS`` with its stderr collected; SIGKILLed (group) and reaped on exit."""
    process = await trio.lowlevel.open_process(
        bridge_argv(*args),
        stdin=stdin,
        stdout=stdout,
        stderr=subprocess.PIPE,
        cwd=REPO,
        start_new_session=True,
    )
    spawned = Spawned(process, Lines())
    try:
        async with trio.open_nursery() as nursery:
            assert process.stderr is not None
            nursery.start_soon(spawned.stderr.collect, process.stderr)
            try:
                yield spawned
            finally:
                if process.returncode is None:
                    process.send_signal(signal.SIGTERM)
                    with trio.move_on_after(10):
                        await process.wait()
                    if process.returncode is None:
                        os.killpg(process.pid, signal.SIGKILL)
    finally:
        await reap(process)


# -- help and version -------------------------------------------------------------------------------


async def test_help_shows_usage_examples_and_exit_codes() -> None:
    with trio.fail_after(TIMEOUT):
        result = await run_bridge("--help")
    text = result.stdout.decode()
    assert result.returncode == EXIT_OK
    assert text.startswith("usage: mcp-bridge")
    assert "--listen ADDRESS" in text
    assert "examples:" in text and "mcp-bridge connect unix:" in text
    assert "exit codes:" in text
    for code in ("0 stopped cleanly", "2 usage error", "69 cannot connect", "78 configuration error"):
        assert code in text


async def test_connect_help_shows_examples_and_exit_codes() -> None:
    with trio.fail_after(TIMEOUT):
        result = await run_bridge("connect", "--help")
    text = result.stdout.decode()
    assert result.returncode == EXIT_OK
    assert text.startswith("usage: mcp-bridge connect")
    assert "examples:" in text and "mcp-bridge connect tcp:127.0.0.1:7300" in text
    assert "exit codes:" in text and "69 cannot connect" in text and "78 bad address" in text


# What the bridge serves today: --help names each of them (issue 14).
TRANSPORTS = ("Unix socket", "TCP", "TLS", "WebSocket", "Streamable HTTP")


def examples_as_written(module: ModuleType, constant: str) -> list[str]:
    """The example lines of an epilog as its source file spells them, from ``examples:`` to the blank line."""
    assert module.__file__ is not None
    lines = Path(module.__file__).read_text().split(f"{constant} = ", 1)[1].splitlines()
    start = next(index for index, line in enumerate(lines) if line.endswith("examples:")) + 1
    return lines[start : lines.index("", start)]


@pytest.mark.parametrize(
    ("prefix", "module", "constant"),
    [((), serve_parser, "SERVE_EPILOG"), (("connect",), connect_parser, "CONNECT_EPILOG")],
    ids=["serve", "connect"],
)
async def test_the_help_names_every_transport_and_its_examples_print_as_written(
    prefix: tuple[str, ...], module: ModuleType, constant: str
) -> None:
    with trio.fail_after(TIMEOUT):
        result = await run_bridge(*prefix, "--help")
    assert result.returncode == EXIT_OK
    text = result.stdout.decode()
    description = text.split("\n\n")[1]
    for transport in TRANSPORTS:
        assert transport in description, f"the description does not name {transport}: {description!r}"
    examples = examples_as_written(module, constant)
    assert len(examples) >= 3 and all(
        line.startswith("  mcp-bridge ") or line.startswith("   ") for line in examples
    )
    printed = text.splitlines()
    assert examples[0] in printed
    start = printed.index(examples[0])
    assert printed[start : start + len(examples)] == examples
    for line, following in itertools.pairwise(examples):
        if line.endswith(" \\"):  # a shell continuation: the next line lines up under the first option
            first_option = line.index("mcp-bridge ") + len("mcp-bridge ")
            assert len(following) - len(following.lstrip(" ")) == first_option, (line, following)
    for line in examples:
        command = line.strip().partition(" #")[0].rstrip()
        assert "  " not in command, f"stray spaces inside {line!r}"


@pytest.mark.parametrize("prefix", [(), ("connect",)], ids=["serve", "connect"])
async def test_version_prints_the_program_name_and_version_and_exits_0(prefix: tuple[str, ...]) -> None:
    with trio.fail_after(TIMEOUT):
        result = await run_bridge(*prefix, "--version")
    assert result.returncode == EXIT_OK
    assert re.fullmatch(r"mcp-bridge \S+\n", result.stdout.decode())


# -- usage and configuration errors -----------------------------------------------------------------


async def test_a_command_line_without_listen_is_a_usage_error_exiting_2() -> None:
    with trio.fail_after(TIMEOUT):
        result = await run_bridge("--", *example_server())
    assert_clean_failure(result, EXIT_USAGE, "usage: mcp-bridge", "--listen")


@pytest.mark.parametrize(
    ("option", "fragment"),
    [
        (("--socket-mode", "0666"), "--socket-mode"),
        (("--socket-mode", "0606"), "--socket-mode"),
        (("--socket-mode", "rw-------"), "--socket-mode"),
        (("--drain-timeout", "soon"), "--drain-timeout"),
        (("--max-message", "0"), "--max-message"),
        (("--max-connections", "0"), "--max-connections"),
        (("--log-level", "loud"), "--log-level"),
        (("--no-such-option",), "--no-such-option"),
    ],
    ids=lambda value: value if isinstance(value, str) else "-".join(value),
)
async def test_a_malformed_option_is_a_usage_error_exiting_2_naming_it(
    sock_dir: Path,
    option: tuple[str, ...],
    fragment: str,
) -> None:
    sock = sock_dir / "s.sock"
    with trio.fail_after(TIMEOUT):
        result = await run_bridge("--listen", f"unix:{sock}", *option, "--", *example_server())
    assert_clean_failure(result, EXIT_USAGE, "usage:", fragment)
    assert not sock.exists()


CONFIG_ERRORS: list[tuple[str, Callable[[Path], list[str]], str]] = [
    ("unknown-address-kind", lambda d: ["--listen", "carrier-pigeon:/x", "--", PY], "unknown address kind"),
    ("tcp-without-port", lambda d: ["--listen", "tcp:127.0.0.1", "--", PY], "expected tcp:HOST:PORT"),
    (
        "tcp-port-out-of-range",
        lambda d: ["--listen", "tcp:127.0.0.1:70000", "--", PY],
        "expected tcp:HOST:PORT",
    ),
    ("unix-without-path", lambda d: ["--listen", "unix:", "--", PY], "expected unix:PATH"),
    (
        "allow-uid-unknown-user",
        lambda d: ["--allow-uid", "no-such-user-here", "--listen", f"unix:{d}/s.sock", "--", PY],
        "--allow-uid: no user named 'no-such-user-here'",
    ),
    (
        "allow-gid-unknown-group",
        lambda d: ["--allow-gid", "no-such-group-here", "--listen", f"unix:{d}/s.sock", "--", PY],
        "--allow-gid: no group named 'no-such-group-here'",
    ),
    ("nothing-after-dashes", lambda d: ["--listen", f"unix:{d}/s.sock", "--"], "no server command"),
    ("no-dashes-at-all", lambda d: ["--listen", f"unix:{d}/s.sock"], "no server command"),
    (
        "command-not-found",
        lambda d: ["--listen", f"unix:{d}/s.sock", "--", "mb-no-such-command-xyz"],
        "'mb-no-such-command-xyz' not found in PATH",
    ),
    (
        "path-not-executable",
        lambda d: ["--listen", f"unix:{d}/s.sock", "--", f"{d}/missing.py"],
        "missing.py' is not an executable file",
    ),
    ("cwd-missing", lambda d: ["--listen", f"unix:{d}/s.sock", "--cwd", f"{d}/nope", "--", PY], "--cwd"),
    (
        "env-without-equals",
        lambda d: ["--listen", f"unix:{d}/s.sock", "--env", "JUSTANAME", "--", PY],
        "--env 'JUSTANAME': expected NAME=VALUE",
    ),
    (
        "unknown-socket-group",
        lambda d: ["--listen", f"unix:{d}/s.sock", "--socket-group", "mb-no-such-group", "--", PY],
        "mb-no-such-group",
    ),
    ("socket-directory-missing", lambda d: ["--listen", f"unix:{d}/nope/s.sock", "--", PY], "does not exist"),
    (
        "socket-path-too-long",
        lambda d: ["--listen", f"unix:{d}/{'x' * 200}.sock", "--", PY],
        "the limit is 107",
    ),
    (
        "tls-listener-without-certificate",
        lambda d: ["--listen", "tls:127.0.0.1:0", "--", PY],
        "pass --tls-cert PATH and --tls-key PATH",
    ),
    (
        "tls-certificate-without-key",
        lambda d: ["--listen", "tls:127.0.0.1:0", "--tls-cert", f"{d}/cert.pem", "--", PY],
        "--tls-cert and --tls-key go together",
    ),
    (
        "tls-options-without-a-tls-listener",
        lambda d: ["--listen", f"unix:{d}/s.sock", "--tls-client-ca", f"{d}/ca.pem", "--", PY],
        "--tls-client-ca is for tls:, wss:// and https:// listeners",
    ),
    (
        "tokens-without-a-network-listener",
        lambda d: ["--listen", f"unix:{d}/s.sock", "--token-env", "HOME", "--", PY],
        "bearer tokens protect tcp:, tls:, ws://, wss://, http:// and https:// listeners",
    ),
    (
        "token-variable-unset",
        lambda d: ["--listen", "tcp:127.0.0.1:0", "--token-env", "MB_NO_SUCH_VARIABLE", "--", PY],
        "environment variable MB_NO_SUCH_VARIABLE is not set",
    ),
    (
        "token-file-missing",
        lambda d: ["--listen", "tcp:127.0.0.1:0", "--token-file", f"{d}/tokens", "--", PY],
        "No such file",
    ),
    (
        "token-credential-outside-systemd",
        lambda d: ["--listen", "tcp:127.0.0.1:0", "--token-credential", "mcp", "--", PY],
        "$CREDENTIALS_DIRECTORY is not set",
    ),
    (
        "allow-origin-without-websocket",
        lambda d: ["--listen", "tcp:127.0.0.1:0", "--allow-origin", "https://app.example", "--", PY],
        "--allow-origin is for ws://, wss://, http:// and https:// listeners",
    ),
    (
        "websocket-port-out-of-range",
        lambda d: ["--listen", "ws://127.0.0.1:99999/", "--", PY],
        "expected ws://HOST:PORT/PATH",
    ),
    ("websocket-with-query", lambda d: ["--listen", "ws://127.0.0.1:0/mcp?x=1", "--", PY], "takes no query"),
    (
        "websocket-beyond-loopback-unauthenticated",
        lambda d: ["--listen", "ws://0.0.0.0:0/", "--", PY],
        "--insecure-no-auth",
    ),
    ("fd-without-activation", lambda d: ["--listen", "fd:mcp", "--", PY], "FileDescriptorName=mcp"),
    (
        "http-options-without-an-http-listener",
        lambda d: ["--listen", "ws://127.0.0.1:0/", "--cors-origin", "https://app.example", "--", PY],
        "--cors-origin is for http:// and https:// listeners",
    ),
    (
        "oauth-metadata-not-json",
        lambda d: ["--listen", "http://127.0.0.1:0/mcp", "--oauth-metadata", "/etc/hostname", "--", PY],
        "--oauth-metadata '/etc/hostname': not JSON",
    ),
    (
        "https-listener-without-certificate",
        lambda d: ["--listen", "https://127.0.0.1:0/mcp", "--", PY],
        "pass --tls-cert PATH and --tls-key PATH",
    ),
    (
        "http-beyond-loopback-unauthenticated",
        lambda d: ["--listen", "http://0.0.0.0:0/mcp", "--", PY],
        "--insecure-no-auth",
    ),
]


UNICODE_DIGIT_PORT = pytest.param(
    lambda d: ["--listen", "tcp:127.0.0.1:\u00b2", "--", PY],
    "expected tcp:HOST:PORT",
    id="tcp-port-superscript-digit",
)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [pytest.param(*case[1:], id=case[0]) for case in CONFIG_ERRORS] + [UNICODE_DIGIT_PORT],
)
async def test_a_configuration_error_exits_78_with_a_clear_message(
    sock_dir: Path,
    args: Callable[[Path], list[str]],
    fragment: str,
) -> None:
    with trio.fail_after(TIMEOUT):
        result = await run_bridge(*args(sock_dir))
    assert_clean_failure(result, EXIT_CONFIG, fragment)
    assert list(sock_dir.iterdir()) == []  # no socket file left behind


async def test_a_non_loopback_tcp_listener_without_insecure_no_auth_exits_78_naming_the_flag() -> None:
    # Refused before anything is bound: nothing to connect to (and nothing is).
    with trio.fail_after(TIMEOUT):
        result = await run_bridge("--listen", "tcp:0.0.0.0:0", "--", *example_server())
    assert_clean_failure(result, EXIT_CONFIG, "tcp:0.0.0.0:0", "not a loopback address", "--insecure-no-auth")


async def test_a_refused_listener_removes_the_socket_files_of_listeners_opened_before_it(
    sock_dir: Path,
) -> None:
    sock = sock_dir / "s.sock"
    with trio.fail_after(TIMEOUT):
        result = await run_bridge(
            "--listen", f"unix:{sock}", "--listen", "tcp:0.0.0.0:0", "--", *example_server()
        )
    assert_clean_failure(result, EXIT_CONFIG, "--insecure-no-auth")
    assert not sock.exists()


async def test_a_unix_socket_in_use_by_a_live_bridge_exits_78_and_the_first_bridge_keeps_serving(
    sock_dir: Path,
) -> None:
    sock = sock_dir / "s.sock"
    with trio.fail_after(TIMEOUT):
        async with bridge_process("--listen", f"unix:{sock}", "--", *example_server()) as first:
            result = await run_bridge("--listen", f"unix:{sock}", "--", *example_server())
            assert_clean_failure(result, EXIT_CONFIG, f"unix:{sock}", "another server is listening")
            assert stat.S_ISSOCK(os.lstat(sock).st_mode)
            client = await LineClient.open(first.addresses[0])
            try:
                assert result_text(await client.call(1, "echo", text="still here")) == "still here"
            finally:
                await client.aclose()


async def test_a_stale_socket_file_left_by_a_killed_bridge_is_taken_over(sock_dir: Path) -> None:
    sock = sock_dir / "s.sock"
    with trio.fail_after(TIMEOUT):
        async with bridge_process("--listen", f"unix:{sock}", "--", *example_server()) as first:
            os.killpg(first.process.pid, signal.SIGKILL)
            assert await first.process.wait() == -signal.SIGKILL
        assert stat.S_ISSOCK(os.lstat(sock).st_mode)  # left behind by the killed bridge
        async with bridge_process("--listen", f"unix:{sock}", "--", *example_server()) as second:
            client = await LineClient.open(second.addresses[0])
            try:
                assert result_text(await client.call(1, "echo", text="taken over")) == "taken over"
            finally:
                await client.aclose()


async def test_a_unix_socket_path_held_by_a_regular_file_exits_78_and_leaves_the_file(sock_dir: Path) -> None:
    path = sock_dir / "precious.txt"
    path.write_text("do not delete")
    with trio.fail_after(TIMEOUT):
        result = await run_bridge("--listen", f"unix:{path}", "--", *example_server())
    assert_clean_failure(result, EXIT_CONFIG, "not a socket")
    assert path.read_text() == "do not delete"


async def test_a_tcp_port_already_in_use_exits_78_naming_the_address() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with trio.fail_after(TIMEOUT):
            result = await run_bridge("--listen", f"tcp:127.0.0.1:{port}", "--", *example_server())
    assert_clean_failure(result, EXIT_CONFIG, f"tcp:127.0.0.1:{port}")


# -- serving --------------------------------------------------------------------------------------


async def test_the_daemon_logs_listening_on_each_unix_and_tcp_address_with_the_real_port(
    sock_dir: Path,
) -> None:
    sock = sock_dir / "s.sock"
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--listen", f"unix:{sock}", "--listen", "tcp:127.0.0.1:0", "--", *example_server(), listeners=2
        ) as bridge:
            assert bridge.addresses[0] == f"unix:{sock}"
            match = re.fullmatch(r"tcp:127\.0\.0\.1:(\d+)", bridge.addresses[1])
            assert match and int(match.group(1)) != 0
            assert stat.S_IMODE(os.lstat(sock).st_mode) == 0o600
            for n, address in enumerate(bridge.addresses):
                client = await LineClient.open(address)
                try:
                    assert result_text(await client.call(n, "echo", text=address)) == address
                finally:
                    await client.aclose()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_stop_signal_exits_0_removes_the_socket_file_and_reaps_the_child(
    sock_dir: Path,
    signum: signal.Signals,
) -> None:
    sock = sock_dir / "s.sock"
    with trio.fail_after(TIMEOUT):
        # Per-connection mode, so that the log names this connection's child.
        async with spawned_bridge(
            "--child", "per-connection", "--listen", f"unix:{sock}", "--", *example_server()
        ) as bridge:
            await bridge.stderr.wait_for(r"listening on unix:")
            client = await LineClient.open(f"unix:{sock}")
            try:
                await client.send(request(1, "ping"))
                assert await client.receive() == {"jsonrpc": "2.0", "id": 1, "result": {}}
                child = int((await bridge.stderr.wait_for(r"connected; child pid (\d+)")).group(1))
                assert process_exists(child)
                bridge.process.send_signal(signum)
                assert await client.receive_until_eof() == []
            finally:
                await client.aclose()
            assert await bridge.exit_code() == EXIT_OK
            await wait_until_gone(child)
    assert not sock.exists()
    assert f"{signum.name} received: stopping gracefully" in bridge.stderr.text()


async def stop_twice_with_a_request_in_flight(sock: Path) -> tuple[int, list[dict[str, object]], str]:
    """A bridge whose every graceful path takes a minute (drain, child ignoring stdin EOF and
    SIGTERM) gets SIGTERM twice while a request is in flight; returns its exit code, the replies the
    client got before the connection ended, and the log. The child must be gone afterwards."""
    long = "60s"
    async with spawned_bridge(
        "--child",
        "per-connection",
        "--listen",
        f"unix:{sock}",
        "--drain-timeout",
        long,
        "--stop-stdin-timeout",
        long,
        "--stop-term-timeout",
        long,
        "--",
        *example_server("--ignore-stdin-eof", "--ignore-sigterm"),
    ) as bridge:
        await bridge.stderr.wait_for(r"listening on unix:")
        client = await LineClient.open(f"unix:{sock}")
        try:
            await client.send(request(1, "ping"))
            assert (await client.receive())["id"] == 1
            child = int((await bridge.stderr.wait_for(r"connected; child pid (\d+)")).group(1))
            # One write, so one read at the bridge: the echo's reply proves the sleep is in flight.
            await client.send(call(2, "echo", text="before"), call(3, "sleep", seconds=600))
            assert (await client.receive())["id"] == 2
            bridge.process.send_signal(signal.SIGTERM)
            await bridge.stderr.wait_for(r"stopping: 1 connections, 1 requests in flight")
            bridge.process.send_signal(signal.SIGTERM)
            await bridge.stderr.wait_for(r"SIGTERM received again")
            replies = await client.receive_until_eof()
        finally:
            await client.aclose()
        code = await bridge.exit_code()
        await wait_until_gone(child)
    assert not sock.exists()
    return code, replies, bridge.stderr.text()


async def test_a_second_stop_signal_stops_at_once_without_waiting_for_drain_or_child_timeouts(
    sock_dir: Path,
) -> None:
    with trio.fail_after(TIMEOUT):  # far below the minute any graceful path would take
        code, _, log = await stop_twice_with_a_request_in_flight(sock_dir / "s.sock")
    assert code == EXIT_OK, log


async def test_a_second_stop_signal_still_answers_the_requests_in_flight_with_an_error(
    sock_dir: Path,
) -> None:
    with trio.fail_after(TIMEOUT):
        _, replies, _ = await stop_twice_with_a_request_in_flight(sock_dir / "s.sock")
    assert len(replies) == 1
    assert replies[0]["id"] == 3
    assert replies[0]["error"]["code"] == -32000  # type: ignore[index]


async def test_logs_go_to_stderr_and_nothing_is_written_to_stdout(sock_dir: Path) -> None:
    sock = sock_dir / "s.sock"
    with trio.fail_after(TIMEOUT):
        async with spawned_bridge(
            "--log-level",
            "debug",
            "--child",
            "per-connection",
            "--listen",
            f"unix:{sock}",
            "--",
            *example_server("--stderr-flood", "5"),
            stdout=subprocess.PIPE,
        ) as bridge:
            assert bridge.process.stdout is not None
            stdout = Lines()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(stdout.collect, bridge.process.stdout)
                await bridge.stderr.wait_for(r"listening on unix:")
                client = await LineClient.open(f"unix:{sock}")
                try:
                    assert result_text(await client.call(1, "echo", text="hi")) == "hi"
                    await bridge.stderr.wait_for(r"example server: stderr line 4")
                finally:
                    await client.aclose()
                bridge.process.send_signal(signal.SIGTERM)
                assert await bridge.exit_code() == EXIT_OK
            assert stdout.lines == []
    log = bridge.stderr.text()
    for expected in ("INFO", "DEBUG", "listening on", "connected; child pid", "stopped"):
        assert expected in log


async def test_json_logs_are_one_object_per_line_with_time_level_logger_and_message(
    sock_dir: Path,
) -> None:
    sock = sock_dir / "s.sock"
    with trio.fail_after(TIMEOUT):
        async with spawned_bridge(
            "--log-format",
            "json",
            "--child",
            "per-connection",
            "--listen",
            f"unix:{sock}",
            "--",
            *example_server("--stderr-flood", "3"),
        ) as bridge:
            await bridge.stderr.wait_for(r"listening on unix:")
            client = await LineClient.open(f"unix:{sock}")
            try:
                assert result_text(await client.call(1, "echo", text="hi")) == "hi"
                await bridge.stderr.wait_for(r"example server: stderr line 2")
            finally:
                await client.aclose()
            bridge.process.send_signal(signal.SIGTERM)
            assert await bridge.exit_code() == EXIT_OK
    entries = [json.loads(line) for line in bridge.stderr.lines if line]
    assert {entry["level"] for entry in entries} >= {"info"}
    assert all(set(entry) >= {"time", "level", "logger", "message"} for entry in entries)
    assert any(entry["message"].startswith("listening on unix:") for entry in entries)
    assert entries[0]["time"].endswith("+00:00")


async def test_serving_stdio_puts_only_json_rpc_on_stdout_and_exits_0_on_stdin_eof() -> None:
    requests = [request(1, "ping"), call("two", "echo", text="over stdio"), call(3, "sleep", seconds=0.2)]
    stdin = b"".join(json.dumps(message).encode() + b"\n" for message in requests)
    with trio.fail_after(TIMEOUT):
        result = await run_bridge(
            "--log-level",
            "debug",
            "--listen",
            "stdio:",
            "--",
            *example_server("--stderr-flood", "3"),
            stdin=stdin,
        )
    assert result.returncode == EXIT_OK, result.stderr.decode()
    replies = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert [reply["id"] for reply in replies] == [1, "two", 3]
    assert all(reply["jsonrpc"] == "2.0" and "result" in reply for reply in replies)
    assert result_text(replies[1]) == "over stdio"
    assert result_text(replies[2]) == "slept"
    stderr = result.stderr.decode()
    assert "listening on stdio:" in stderr and "example server: stderr line 2" in stderr


async def test_the_default_child_mode_is_auto_and_the_choice_is_logged_with_its_reason(
    sock_dir: Path,
) -> None:
    sock = sock_dir / "s.sock"
    with trio.fail_after(TIMEOUT):
        async with spawned_bridge("--listen", f"unix:{sock}", "--", *example_server()) as bridge:
            line = await bridge.stderr.wait_for(r"child mode (\S+): (.*)")
            assert line.group(1) == "shared"
            assert "server/discover" in line.group(2)
            await bridge.stderr.wait_for(r"listening on unix:")
            bridge.process.send_signal(signal.SIGTERM)
            assert await bridge.exit_code() == EXIT_OK


async def test_tap_records_every_message_to_and_from_clients_in_a_private_file(sock_dir: Path) -> None:
    sock, tap = sock_dir / "s.sock", sock_dir / "tap.jsonl"
    with trio.fail_after(TIMEOUT):
        async with spawned_bridge(
            "--tap",
            str(tap),
            "--child",
            "per-connection",
            "--listen",
            f"unix:{sock}",
            "--",
            *example_server(),
        ) as bridge:
            await bridge.stderr.wait_for(r"listening on unix:")
            client = await LineClient.open(f"unix:{sock}")
            try:
                assert result_text(await client.call("a:1", "echo", text="tapped")) == "tapped"
                await client.send_raw(b"not json\n")
                assert (await client.receive())["error"]["code"] == -32700
            finally:
                await client.aclose()
            bridge.process.send_signal(signal.SIGTERM)
            assert await bridge.exit_code() == EXIT_OK
    assert stat.S_IMODE(os.stat(tap).st_mode) == 0o600
    records = [json.loads(line) for line in tap.read_text().splitlines()]
    assert [(r["direction"], r["message"].get("id")) for r in records] == [
        ("in", "a:1"),
        ("out", "a:1"),
        ("out", None),  # the bridge's own -32700 for the line that was not JSON
    ]
    assert records[0]["message"]["params"]["arguments"] == {"text": "tapped"}
    assert records[0]["client"].startswith(f"unix {sock}") and records[0]["client"].endswith("#1")


def test_a_tap_whose_file_fails_turns_itself_off_and_the_connection_goes_on() -> None:
    from bridge._relay.tap import Tap

    class FullDisk(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(28, "No space left on device")

    tap = Tap(FullDisk())
    tap.record("in", "client #1", [{"jsonrpc": "2.0", "method": "x"}])  # no exception
    assert tap.broken
    tap.record("out", "client #1", [{"jsonrpc": "2.0", "method": "y"}])  # and nothing more tried
