"""What the listener fuzz tests share: the example budget, an echo server, the log watch, mutations.

Each fuzz example runs in a ``trio.run`` of its own against a fresh listener on loopback, served
by :func:`channels.serve` with :func:`echo`, so an example cannot leak into the next and a failure
shrinks to one input. The invariant every target checks is h11's: any input ends in a clean HTTP
4xx or a close, a JSON-RPC error, or normal processing; never an exception out of the serving
nursery, never a record with a traceback or at ERROR in the log, never a hang past the read
deadline, never a reply on another connection (a well-behaved client runs alongside and must get
exactly its own replies, and its marker must never reach the fuzzed connection).

Inputs are mostly *almost valid*: a valid request, frame or line, then a few mutations
(:func:`mutated`), so that the fuzzer gets past the first parser check and into the states behind.

The budget: :data:`EXAMPLES` examples per target, a few hundred in all in CI; the environment
variable ``MCP_BRIDGE_FUZZ_EXAMPLES`` sets the count per target for a long run (docs/design.md §8).
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import attrs
import trio
import trio.testing
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import channels
from channels import ListenOptions, MessageChannel, ProtocolError

# Examples per target: enough in CI to pass every branch of the generators several times (the
# whole fuzz set stays under ~40 s on two cores); a long run sets MCP_BRIDGE_FUZZ_EXAMPLES.
DEFAULT_EXAMPLES = 60
EXAMPLES = int(os.environ.get("MCP_BRIDGE_FUZZ_EXAMPLES", "0")) or DEFAULT_EXAMPLES


def fuzz_settings(share: float = 1.0) -> settings:
    """Hypothesis settings for one target: ``share`` of :data:`EXAMPLES`, no per-example deadline
    (an example waits for real deadlines), and no complaint that generating bytes is slow."""
    return settings(
        max_examples=max(1, int(EXAMPLES * share)),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        print_blob=True,
    )


# The marker of the well-behaved client: it must come back to it, and never to anyone else.
MARKER = "well-behaved-5f3c9a"
LEGACY = "2025-06-18"


# -- the server ----------------------------------------------------------------------------------


def echo_reply(message: dict[str, Any]) -> dict[str, Any]:
    """The echo server's result for a request: its method and params, and for ``initialize`` a
    ``protocolVersion`` (the requested one), so that an HTTP listener keeps the session."""
    params = message.get("params")
    result: dict[str, Any] = {"method": message["method"], "params": params}
    if message["method"] == "initialize":
        requested = params.get("protocolVersion") if isinstance(params, dict) else None
        result["protocolVersion"] = requested if isinstance(requested, str) else LEGACY
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


async def echo(channel: MessageChannel) -> None:
    """Answer every request with :func:`echo_reply` and every bad message with its JSON-RPC error,
    until the peer ends or breaks the channel (a peer going away is normal)."""
    while True:
        try:
            message = await channel.receive()
        except ProtocolError as exc:
            error = {"code": exc.rpc_code, "message": str(exc), "data": {"reason": exc.reason}}
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": exc.request_id, "error": error}
        except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError):
            return
        else:
            if "method" not in message or "id" not in message:
                continue
            reply = echo_reply(message)
        try:
            await channel.send(reply)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return


# -- the log watch -------------------------------------------------------------------------------


class LogWatch(logging.Handler):
    """Every record of every logger while installed; :meth:`faults` are the ones the invariant
    forbids (a traceback, or ERROR and above)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def faults(self) -> list[str]:
        return [
            f"{record.levelname} {record.name}: {record.getMessage()}"
            + (f" [{record.exc_info[0].__name__ if record.exc_info[0] else ''}]" if record.exc_info else "")
            for record in self.records
            if record.exc_info or record.levelno >= logging.ERROR
        ]


@contextmanager
def watching_logs() -> Iterator[LogWatch]:
    """Install a :class:`LogWatch` on the root logger (at DEBUG) for the block."""
    root = logging.getLogger()
    watch = LogWatch()
    level = root.level
    root.addHandler(watch)
    root.setLevel(logging.DEBUG)
    try:
        yield watch
    finally:
        root.removeHandler(watch)
        root.setLevel(level)


# -- one example ---------------------------------------------------------------------------------


@asynccontextmanager
async def echo_listener(address: str, options: ListenOptions) -> AsyncIterator[str]:
    """Serve ``address`` with :func:`echo` for the block; yield the bound address."""
    async with trio.open_nursery() as nursery:
        bound = await nursery.start(channels.serve, echo, [address], options)
        yield bound[0]
        nursery.cancel_scope.cancel()


def run_example(
    address: str, options: ListenOptions, scenario: Callable[[str], Awaitable[None]], deadline: float
) -> None:
    """Serve ``address`` with the echo server in a fresh ``trio.run``, run ``scenario(bound)``
    within ``deadline`` seconds, and check that nothing was logged with a traceback or at ERROR.

    An exception out of the listener's tasks fails the example (it leaves ``trio.run``).
    """

    async def main() -> None:
        with trio.fail_after(deadline):
            async with echo_listener(address, options) as bound:
                await scenario(bound)

    run_logged(main)


def run_logged(main: Callable[..., Awaitable[object]], *args: object) -> None:
    """``trio.run(main, *args)``, then check that nothing was logged with a traceback or at ERROR."""
    with watching_logs() as watch:
        trio.run(main, *args)
    assert not watch.faults(), watch.faults()


async def read_until_closed(stream: trio.abc.Stream) -> bytes:
    """Everything the server sends until it ends the connection (a reset counts as the end)."""
    received = bytearray()
    while True:
        try:
            data = await stream.receive_some(1 << 16)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return bytes(received)
        if not data:
            return bytes(received)
        received += data


async def send_in_chunks(stream: trio.abc.HalfCloseableStream, chunks: list[bytes], eof: bool) -> None:
    """Send ``chunks`` one write each, letting the server read between them (it runs in this
    process: ``wait_all_tasks_blocked`` returns once it waits for more), then EOF if asked.

    A server that closed early is normal: what was not sent is dropped.
    """
    try:
        for chunk in chunks:
            await stream.send_all(chunk)
            await trio.testing.wait_all_tasks_blocked(0.001)
        if eof:
            await stream.send_eof()
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


# -- almost valid inputs -------------------------------------------------------------------------

# Byte strings parsers tend to trip on: separators, digits at the edges of integer types,
# encodings, and the tokens of the grammars under test.
INTERESTING = [
    b"\r\n",
    b"\n",
    b"\r",
    b"\r\n\r\n",
    b"\x00",
    b" ",
    b"\t",
    b":",
    b",",
    b";",
    b"0",
    b"-1",
    b"18446744073709551616",
    b"2147483648",
    b"ffffffffffffffff",
    b"\xff",
    b"\xc3",
    b"\xed\xa0\x80",
    b"\xe2\x82",
    b"chunked",
    b"gzip",
    b"close",
    b"keep-alive",
    b"Upgrade",
    b"websocket",
    b"100-continue",
    b'"',
    b"\\",
    b"{",
    b"}",
    b"[",
    b"]",
    b"null",
    b"1e999",
    b"NaN",
    b"\\ud800",
    b"HTTP/1.0",
    b"HTTP/1.1",
    b"Content-Length: 5\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"content-length: 0\r\n",
    b"[" * 64,
]


@attrs.frozen
class Mutation:
    """One edit at ``where`` (a fraction of the length, 0..1023): ``kind`` with ``data``."""

    kind: str
    where: int
    size: int
    data: bytes

    def apply(self, value: bytes) -> bytes:
        at = self.where * (len(value) + 1) // 1024
        end = min(len(value), at + self.size)
        if self.kind == "flip" and at < len(value):
            return value[:at] + bytes([value[at] ^ (1 << (self.size % 8))]) + value[at + 1 :]
        if self.kind == "delete":
            return value[:at] + value[end:]
        if self.kind == "insert":
            return value[:at] + self.data + value[at:]
        if self.kind == "replace":
            return value[:at] + self.data + value[end:]
        if self.kind == "repeat":
            return value[:at] + value[at:end] * 3 + value[end:]
        if self.kind == "truncate":
            return value[:at]
        return value


mutations = st.builds(
    Mutation,
    kind=st.sampled_from(["flip", "delete", "insert", "replace", "repeat", "truncate"]),
    where=st.integers(0, 1023),
    size=st.integers(0, 64),
    data=st.one_of(st.sampled_from(INTERESTING), st.binary(max_size=16)),
)


def mutated(value: bytes, edits: list[Mutation]) -> bytes:
    for edit in edits:
        value = edit.apply(value)
    return value


# Mostly a few edits, often none (a valid input must be served normally too).
edit_lists = st.lists(mutations, max_size=4)


# SO_LINGER on, with a zero timeout: closing the socket resets the connection (RFC 793's abort).
LINGER_RESET = struct.pack("ii", 1, 0)
# Seconds every task must have been waiting before a vanished client's example ends: the server
# has then done all it will do about the reset.
SETTLE = 0.05


async def send_and_vanish(stream: trio.SocketStream, chunks: list[bytes]) -> None:
    """Send ``chunks`` and go without reading: whatever the server writes then meets a reset."""
    await send_in_chunks(stream, chunks, False)
    stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RESET)
    await stream.aclose()
    await trio.testing.wait_all_tasks_blocked(SETTLE)


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` cut at the given offsets (taken modulo its length, sorted, deduplicated)."""
    if not data:
        return []
    points = sorted({cut % len(data) for cut in cuts} | {0, len(data)})
    return [data[start:end] for start, end in itertools.pairwise(points) if end > start]


cut_lists = st.lists(st.integers(0, 1 << 20), max_size=6)
