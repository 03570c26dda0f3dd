"""What the checks share: messages to send, and ways to expect what comes back.

Like the rest of :mod:`channels.testing`, this depends on trio only: :func:`assert_raises` stands
in for ``pytest.raises``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import trio
from trio.testing import assert_checkpoints

from .._core.channel import MessageChannel
from .._core.jsonrpc import JSONObject, encode

# What a "clogging" sender writes per message while it waits for its sends to block.
FILLER_BYTES = 16 * 1024


@contextmanager
def assert_raises(*expected: type[BaseException]) -> Iterator[None]:
    """Expect one of ``expected``, unwrapped (this module does not depend on pytest)."""
    __tracebackhide__ = True
    try:
        yield
    except expected:
        return
    raise AssertionError(f"expected {' or '.join(e.__name__ for e in expected)}")


def request(request_id: Any, method: str = "ping", **params: Any) -> JSONObject:
    message: JSONObject = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params:
        message["params"] = params
    return message


def notification(method: str, **params: Any) -> JSONObject:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def sample_messages() -> list[JSONObject]:
    """One of each kind, with both id types and text that needs escaping."""
    return [
        request(1, "initialize", protocolVersion="2025-06-18", capabilities={}),
        request("1", "tools/list"),
        notification("notifications/initialized"),
        {"jsonrpc": "2.0", "id": 0, "result": {}},
        {"jsonrpc": "2.0", "id": "x", "error": {"code": -32601, "message": "no such method"}},
        {"jsonrpc": "2.0", "id": -7, "result": {"text": 'a\nb\r\n\u2028\x85"q"\\é😀\x00'}},
        request(2**53 + 1, "big/id"),
        {"jsonrpc": "2.0", "method": "positional", "params": [1, 2.5, None, True, False, [], {}]},
    ]


def assert_same_message(got: JSONObject, expected: JSONObject) -> None:
    """Equal, and the id kept its JSON type (``1`` stays a number, ``"1"`` a string)."""
    assert got == expected, f"received {got!r}, expected {expected!r}"
    assert type(got.get("id")) is type(expected.get("id")), f"id changed type: {got!r}"


def filler() -> JSONObject:
    return notification("filler", pad="f" * FILLER_BYTES)


async def receive_expecting(channel: MessageChannel, expected: Sequence[JSONObject]) -> None:
    for message in expected:
        with assert_checkpoints():
            got = await channel.receive()
        assert_same_message(got, message)


async def assert_end_of_channel(channel: MessageChannel) -> None:
    """``EndOfChannel`` now and on the next call too."""
    for _ in range(2):
        with assert_raises(trio.EndOfChannel):
            await channel.receive()


async def send_until_blocked_forever(channel: MessageChannel) -> None:
    """Send fillers until a send blocks; the caller cancels this task or closes the channel."""
    while True:
        await channel.send(filler())


def message_of_size(size: int, *, request_id: int) -> JSONObject:
    """A request whose JSON text (without a line ending) is exactly ``size`` bytes."""
    message = request(request_id, "pad", pad="")
    overhead = len(encode(message)) - 1
    message["params"]["pad"] = "p" * (size - overhead)
    return message
