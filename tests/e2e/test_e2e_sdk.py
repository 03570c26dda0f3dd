"""End to end with the official ``mcp`` SDK (2.x) on both ends of the bridge.

The client is the SDK's ``Client`` over its stdio transport, the server is ``tests/sdk_server.py``
(an SDK ``MCPServer``). Neither was written against the bridge, so a pass means the bridge carries
real MCP traffic unchanged::

    SDK Client --stdio--> mcp-bridge connect unix:SOCK --unix socket--> mcp-bridge --listen unix:SOCK
                                                                         --stdio--> sdk_server.py

Each era is checked on its own daemon (a fresh child each time): the legacy era (``initialize``
handshake, ``mode="legacy"``), the modern stateless era pinned without a probe
(``mode="2026-07-28"``) and the SDK's default negotiation (``mode="auto"``: a ``server/discover``
probe, which the dual-era SDK server answers, so it settles on 2026-07-28).

The SDK is anyio-based and runs under trio directly (anyio picks the running backend), so these are
ordinary trio tests. The same checks also run with no bridge at all, SDK client straight to SDK
server, so a failure through the bridge can be told apart from an SDK or test problem.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path
from typing import IO, NamedTuple

import pytest
import trio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from sdkhttp import _bare_errors

REPO = Path(__file__).resolve().parents[2]  # tests/e2e/ -> the repository
SDK_SERVER = str(REPO / "tests" / "sdk_server.py")
PYTHON = sys.executable

TEST_TIMEOUT = 30  # seconds for a whole test: two or three Python start-ups plus a few round trips
STOP_TIMEOUT = 5  # seconds the daemon gets to exit after SIGTERM before it is killed

ECHO_TEXT = "hello through the bridge\nsecond line, é ✓"  # a newline and non-ASCII inside the JSON string


class BridgeCommands(NamedTuple):
    daemon: list[str]  # argv of the serving daemon, run with cwd=REPO
    connect: list[str]  # argv of the client end, run by the SDK's stdio transport with cwd=REPO
    ready: bytes  # what the daemon writes to stderr once it accepts connections


def real_bridge_commands(sock: str) -> BridgeCommands:
    return BridgeCommands(
        daemon=[PYTHON, "-m", "bridge", "--listen", f"unix:{sock}", "--", PYTHON, SDK_SERVER],
        connect=[PYTHON, "-m", "bridge", "connect", f"unix:{sock}"],
        ready=f"listening on unix:{sock}".encode(),
    )


def socat_stand_in_commands(sock: str) -> BridgeCommands:
    """The same topology with socat in the bridge's place; it validates the test, not the bridge."""
    return BridgeCommands(
        daemon=["socat", "-d", "-d", f"UNIX-LISTEN:{sock},fork", f"EXEC:{PYTHON} {SDK_SERVER}"],
        connect=["socat", "-", f"UNIX-CONNECT:{sock}"],
        ready=f'listening on AF=1 "{sock}"'.encode(),
    )


def bridge_commands(sock: str) -> BridgeCommands:
    return real_bridge_commands(sock)  # the socat stand-in: return socat_stand_in_commands(sock)


@contextmanager
def short_socket_path() -> Iterator[str]:
    """A Unix socket path well under the ~100-byte limit (pytest's tmp_path can exceed it)."""
    directory = tempfile.mkdtemp(prefix="mb", dir="/tmp")
    try:
        yield os.path.join(directory, "s")
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@asynccontextmanager
async def running_daemon(argv: list[str], ready: bytes) -> AsyncIterator[trio.Process]:
    """Start the daemon, return once its stderr says it is listening; always stop and reap it.

    Its stderr is read for the whole run, so it can never block on a full pipe, and is printed at
    the end: pytest shows it under "Captured stderr" when the test fails (timeouts included).
    """
    stderr = bytearray()
    settled = trio.Event()  # the daemon said it is listening, or closed its stderr first
    process = await trio.lowlevel.open_process(
        argv,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, so that leftovers can be swept at the end
    )

    async def read_stderr() -> None:
        assert process.stderr is not None
        async with process.stderr:
            while chunk := await process.stderr.receive_some():
                stderr.extend(chunk)
                if ready in stderr:
                    settled.set()
        settled.set()

    try:
        async with _bare_errors(), trio.open_nursery() as nursery:
            nursery.start_soon(read_stderr)
            try:
                await settled.wait()
                if ready not in stderr:
                    await process.wait()
                    pytest.fail(f"the daemon exited with {process.returncode} before it was listening")
                yield process
            finally:
                with trio.CancelScope(shield=True):
                    await _stop(process)
                nursery.cancel_scope.cancel()
    finally:
        print(f"daemon {argv}, its stderr:\n{stderr.decode(errors='replace')}", file=sys.stderr)


async def _stop(process: trio.Process) -> None:
    """SIGTERM, a bounded wait, then SIGKILL; finally sweep the daemon's process group."""
    if process.returncode is None:
        process.terminate()
        with trio.move_on_after(STOP_TIMEOUT):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # e.g. socat's forked children, or a stray server


@asynccontextmanager
async def sdk_client(argv: list[str], mode: str) -> AsyncIterator[Client]:
    """An SDK ``Client`` whose stdio transport runs ``argv``; the command's stderr is printed at the end.

    ``Client(StdioServerParameters(...))`` would do the same but send that stderr to ours; the
    explicit ``stdio_client`` transport takes an ``errlog`` file. The SDK transport passes only a few environment variables (HOME, PATH, ...) to the command,
    so ``cwd=REPO`` is what makes ``python -m bridge`` importable.
    """
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=REPO)
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
        try:
            async with _bare_errors(), Client(stdio_client(params, errlog=errlog), mode=mode) as client:
                yield client
        finally:
            print(f"stdio command {argv}, its stderr:\n{_read_all(errlog)}", file=sys.stderr)


def _read_all(file: IO[str]) -> str:
    file.flush()
    file.seek(0)
    return file.read()


async def check_tools(client: Client, expected_version: str) -> None:
    """The guarantees every path must give: the era, the tool list, and both tools' results."""
    assert client.protocol_version == expected_version

    listed = await client.list_tools()
    assert sorted(tool.name for tool in listed.tools) == ["add", "echo"]
    add_tool = next(tool for tool in listed.tools if tool.name == "add")
    assert add_tool.description == "Add two integers."
    assert set(add_tool.input_schema["properties"]) == {"a", "b"}

    added = await client.call_tool("add", {"a": 2, "b": 40})
    assert not added.is_error
    assert [block.model_dump(exclude_none=True) for block in added.content] == [
        {"type": "text", "text": "42"}
    ]
    assert added.structured_content == {"result": 42}

    echoed = await client.call_tool("echo", {"text": ECHO_TEXT})
    assert not echoed.is_error
    assert [block.model_dump(exclude_none=True) for block in echoed.content] == [
        {"type": "text", "text": ECHO_TEXT}
    ]


async def check_through_the_bridge(mode: str, expected_version: str) -> None:
    with trio.fail_after(TEST_TIMEOUT):
        with short_socket_path() as sock:
            commands = bridge_commands(sock)
            async with running_daemon(commands.daemon, commands.ready):
                async with sdk_client(commands.connect, mode) as client:
                    await check_tools(client, expected_version)


async def check_directly(mode: str, expected_version: str) -> None:
    with trio.fail_after(TEST_TIMEOUT):
        async with sdk_client([PYTHON, SDK_SERVER], mode) as client:
            await check_tools(client, expected_version)


# Without the bridge: SDK client straight to the SDK server over stdio.


async def test_sdk_client_lists_and_calls_tools_of_the_sdk_server_directly_in_the_legacy_era() -> None:
    await check_directly("legacy", "2025-11-25")


async def test_sdk_client_lists_and_calls_tools_of_the_sdk_server_directly_in_the_2026_07_28_era() -> None:
    await check_directly("2026-07-28", "2026-07-28")


async def test_sdk_client_in_auto_mode_negotiates_the_2026_07_28_era_with_the_sdk_server_directly() -> None:
    await check_directly("auto", "2026-07-28")


# Through `mcp-bridge connect` and the bridge daemon.


async def test_sdk_client_lists_and_calls_tools_through_connect_and_the_bridge_in_the_legacy_era() -> None:
    await check_through_the_bridge("legacy", "2025-11-25")


async def test_sdk_client_lists_and_calls_tools_through_connect_and_the_bridge_in_the_2026_07_28_era() -> (
    None
):
    await check_through_the_bridge("2026-07-28", "2026-07-28")


async def test_sdk_client_in_auto_mode_negotiates_the_2026_07_28_era_through_connect_and_the_bridge() -> None:
    await check_through_the_bridge("auto", "2026-07-28")


async def test_in_auto_mode_a_legacy_and_a_modern_sdk_client_are_served_at_once_by_the_sdk_server() -> None:
    # The SDK server fixes its era per process on the first request, so one shared child could
    # serve only one era: in auto mode the legacy client (it opens with initialize) gets a child of
    # its own and the modern one the shared child, and both work side by side.
    with trio.fail_after(TEST_TIMEOUT):
        with short_socket_path() as sock:
            daemon = [
                PYTHON,
                "-m",
                "bridge",
                "--child",
                "auto",
                "--listen",
                f"unix:{sock}",
                "--",
                PYTHON,
                SDK_SERVER,
            ]
            connect = [PYTHON, "-m", "bridge", "connect", f"unix:{sock}"]
            async with running_daemon(daemon, f"listening on unix:{sock}".encode()):
                async with (
                    sdk_client(connect, "legacy") as legacy,
                    sdk_client(connect, "2026-07-28") as modern,
                ):
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(check_tools, legacy, "2025-11-25")
                        nursery.start_soon(check_tools, modern, "2026-07-28")
