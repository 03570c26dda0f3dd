"""Fuzzing the newline channels: any bytes, in any chunks, into a real Unix or TCP listener.

Each example serves ``unix:`` or ``tcp:`` on loopback with the echo server of :mod:`fuzzing`, and
sends lines that are mostly almost valid (JSON-RPC requests, notifications, junk, over-long
lines, deep nesting, then a few byte edits), cut into chunks the server reads one by one, then
ends its side. A well-behaved client runs alongside on a connection of its own. The invariant
(h11's): every complete line that is exactly a valid request gets its echo, every other reply is
a JSON-RPC error, never more replies than lines, the server ends the connection once the client
has, nothing is logged with a traceback or at ERROR, and the other client gets exactly its own
replies.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from typing import Any

import trio
from fuzzing import (
    MARKER,
    chunked,
    cut_lists,
    edit_lists,
    fuzz_settings,
    mutated,
    mutations,
    read_until_closed,
    run_example,
    send_in_chunks,
)
from hypothesis import given
from hypothesis import strategies as st

from channels import ListenOptions

# A small limit, so that over-long lines cost little to send; the fuzzer generates lines around it.
MAX_MESSAGE = 2048
OPTIONS = ListenOptions(max_message_bytes=MAX_MESSAGE)
# Seconds one example may take (real sockets; the server ends each connection at its EOF at once).
EXAMPLE_DEADLINE = 10
ERROR_CODES = {-32700, -32600}

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63),
    st.text(max_size=20),
    st.floats(allow_nan=False, allow_infinity=False),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def lines(draw: st.DrawFn, index: int) -> tuple[bytes, bool]:
    """One line (without its newline) and whether it is a valid request with id ``index``."""
    method = draw(st.sampled_from(["ping", "tools/call", "tools/list", "initialize", "x" * 40]))
    params = draw(st.one_of(st.none(), st.dictionaries(st.text(max_size=8), json_values, max_size=3)))
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": index, "method": method}
    if params is not None:
        message["params"] = params
    kind = draw(st.sampled_from(["request", "request", "mutated", "notification", "junk", "long", "deep"]))
    if kind == "request":
        return json.dumps(message).encode(), True
    if kind == "mutated":
        return mutated(json.dumps(message).encode(), draw(edit_lists)), False
    if kind == "notification":
        return json.dumps({"jsonrpc": "2.0", "method": method}).encode(), False
    if kind == "long":
        padding = draw(st.integers(MAX_MESSAGE - 64, MAX_MESSAGE + 64))
        message["params"] = {"pad": "x" * padding}
        return json.dumps(message).encode(), False
    if kind == "deep":
        depth = draw(st.integers(1, 1000))
        return (
            b'{"jsonrpc":"2.0","id":%d,"method":"m","params":' % index + b"[" * depth + b"]" * depth + b"}",
            False,
        )
    return draw(st.binary(max_size=200)), False


@st.composite
def inputs(draw: st.DrawFn) -> tuple[bytes, dict[bytes, int]]:
    """The bytes a client sends, and the valid request lines it was built from (with their ids)."""
    drawn = [(draw(lines(index)), index) for index in range(draw(st.integers(0, 8)))]
    data = b"\n".join(line for (line, _), _ in drawn) + draw(st.sampled_from([b"\n", b"\r\n", b""]))
    data = mutated(data, draw(st.lists(mutations, max_size=1)))  # sometimes one edit across lines
    valid = {line: index for (line, ok), index in drawn if ok and len(line) <= MAX_MESSAGE}
    return data, valid


def expected_ids(data: bytes, valid: dict[bytes, int]) -> Counter[int]:
    """The ids that must be echoed: one per complete line that is exactly a valid request (one
    trailing ``\r`` removed, as the framer does)."""
    complete = data.split(b"\n")[:-1]
    return Counter(valid[line.removesuffix(b"\r")] for line in complete if line.removesuffix(b"\r") in valid)


async def well_behaved(address: str) -> None:
    """Three requests one after the other, each answered with exactly its own echo."""
    stream = await open_stream(address)
    async with stream:
        buffer = b""
        for number in range(3):
            request_id = f"good-{number}"
            message = {"jsonrpc": "2.0", "id": request_id, "method": "ping", "params": {"marker": MARKER}}
            await stream.send_all(json.dumps(message).encode() + b"\n")
            while b"\n" not in buffer:
                data = await stream.receive_some(1 << 16)
                assert data, "the well-behaved client was disconnected"
                buffer += data
            line, _, buffer = buffer.partition(b"\n")
            reply = json.loads(line)
            assert reply["id"] == request_id and reply["result"]["params"] == {"marker": MARKER}, reply


async def open_stream(address: str) -> trio.SocketStream:
    if address.startswith("unix:"):
        return await trio.open_unix_socket(address.removeprefix("unix:"))
    host, _, port = address.removeprefix("tcp:").rpartition(":")
    return await trio.open_tcp_stream(host, int(port))


def check_replies(received: bytes, data: bytes, valid: dict[bytes, int]) -> None:
    assert MARKER.encode() not in received, "another connection's reply reached the fuzzed one"
    assert received == b"" or received.endswith(b"\n"), received[-200:]
    replies = [json.loads(line) for line in received.splitlines()]
    results: Counter[Any] = Counter()
    for reply in replies:
        assert reply["jsonrpc"] == "2.0", reply
        if "error" in reply:
            assert reply["error"]["code"] in ERROR_CODES, reply
        else:
            results[json.dumps(reply["id"])] += 1
    for request_id, count in expected_ids(data, valid).items():
        assert results[json.dumps(request_id)] >= count, (request_id, replies)
    assert len(replies) <= data.count(b"\n") + 1, replies


def fuzz(address: str, data: bytes, valid: dict[bytes, int], cuts: list[int]) -> None:
    async def scenario(bound: str) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(well_behaved, bound)
            stream = await open_stream(bound)
            async with stream:
                nursery.start_soon(send_in_chunks, stream, chunked(data, cuts), True)
                received = await read_until_closed(stream)
        check_replies(received, data, valid)

    run_example(address, OPTIONS, scenario, EXAMPLE_DEADLINE)


@fuzz_settings()
@given(inputs(), cut_lists)
def test_no_bytes_in_any_chunks_break_a_tcp_listener_or_reach_another_connection(
    sent: tuple[bytes, dict[bytes, int]], cuts: list[int]
) -> None:
    fuzz("tcp:127.0.0.1:0", *sent, cuts)


@fuzz_settings()
@given(inputs(), cut_lists)
def test_no_bytes_in_any_chunks_break_a_unix_listener_or_reach_another_connection(
    sent: tuple[bytes, dict[bytes, int]], cuts: list[int]
) -> None:
    directory = tempfile.mkdtemp(prefix="mb-fz-", dir="/tmp")
    try:
        fuzz(f"unix:{directory}/s.sock", *sent, cuts)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
