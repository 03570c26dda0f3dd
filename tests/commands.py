"""The bridge's commands run as real processes: ``mcp-bridge`` itself, ``connect``, and the admin endpoint's queries."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio
import trio.testing

from conftest import (
    REPO,
    bridge_argv,
    call,
    note_tracebacks,
    reap,
)


async def run_bridge(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """Run ``python -m bridge ARGS`` to completion, capturing both outputs (a traceback in its
    stderr fails the test: conftest.note_tracebacks)."""
    result = await trio.run_process(
        bridge_argv(*args), stdin=stdin, capture_stdout=True, capture_stderr=True, check=False, cwd=REPO
    )
    note_tracebacks(result.stderr.decode(errors="replace"))
    return result


TIMEOUT = 20  # seconds for one test: two interpreter start-ups and a few round trips


@attrs.define(eq=False)
class Connect:
    """A running ``mcp-bridge connect``: write requests to its stdin, read lines from its stdout."""

    process: trio.Process
    stderr: bytearray = attrs.field(factory=bytearray)
    stderr_done: trio.Event = attrs.field(factory=trio.Event)
    stdout_lines: list[bytes] = attrs.field(factory=list)
    """Every line read from stdout so far (raw, to check that each one is JSON-RPC)."""
    _buffer: bytes = b""

    async def send(self, *messages: dict[str, Any]) -> None:
        await self.send_raw(b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    async def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(data)

    async def close_stdin(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()

    async def _line(self) -> bytes | None:
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            data = await self.process.stdout.receive_some(1 << 20)
            if not data:
                assert self._buffer == b"", f"partial line at EOF: {self._buffer!r}"
                return None
            self._buffer += data
        line, _, self._buffer = self._buffer.partition(b"\n")
        self.stdout_lines.append(line)
        return line

    async def receive(self) -> dict[str, Any]:
        line = await self._line()
        if line is None:
            raise AssertionError(f"stdout ended; stderr:\n{self.stderr.decode(errors='replace')}")
        return json.loads(line)  # type: ignore[no-any-return]

    async def receive_until_eof(self) -> list[dict[str, Any]]:
        messages = []
        while (line := await self._line()) is not None:
            messages.append(json.loads(line))
        return messages

    async def call_echo(self, request_id: Any, text: str) -> dict[str, Any]:
        await self.send(call(request_id, "echo", text=text))
        reply = await self.receive()
        assert reply["id"] == request_id
        return reply

    async def exit_code(self) -> int:
        code = await self.process.wait()
        await self.stderr_done.wait()
        return code

    def stderr_text(self) -> str:
        return self.stderr.decode(errors="replace")

    def assert_stdout_is_only_jsonrpc(self) -> None:
        for line in self.stdout_lines:
            message = json.loads(line)
            assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", line

    async def _collect_stderr(self) -> None:
        assert self.process.stderr is not None
        try:
            async for chunk in self.process.stderr:
                self.stderr += chunk
        finally:
            self.stderr_done.set()


@asynccontextmanager
async def connect(address: str, *options: str) -> AsyncIterator[Connect]:
    """Start ``python -m bridge connect ADDRESS``; on exit kill it if still running and reap it."""
    process = await trio.lowlevel.open_process(
        bridge_argv("connect", address, *options),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    client = Connect(process)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client._collect_stderr)
            try:
                yield client
            finally:
                if process.returncode is None:
                    process.kill()
    finally:
        await reap(process)
        note_tracebacks(client.stderr_text())


async def http(port: int, raw: bytes) -> tuple[int, dict[str, str], str]:
    """Send ``raw`` (a whole request) and read the response until the server closes."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(raw)
        data = b""
        while chunk := await stream.receive_some(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    headers = {
        name.lower(): value.strip() for name, _, value in (line.partition(":") for line in header_lines)
    }
    return int(status_line.split()[1]), headers, body.decode()


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


def admin_port(lines: list[str]) -> int:
    for line in lines:
        if match := re.search(r"admin endpoint on tcp:127\.0\.0\.1:(\d+)", line):
            return int(match.group(1))
    raise AssertionError("no admin endpoint logged:\n" + "\n".join(lines))
