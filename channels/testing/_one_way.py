"""The one-way checks: what ``a`` sends, ``b`` receives, and every way that can end.

Each takes a fresh connected pair ``(a, b)``; :func:`~channels.testing.check_message_channel`
runs each in both directions. The oversized-message checks also take the receive limit.
"""

from __future__ import annotations

from typing import Any

import trio
from trio.testing import assert_checkpoints, wait_all_tasks_blocked

from .._core.channel import MessageChannel
from .._core.errors import MessageTooLarge
from ._support import (
    assert_end_of_channel,
    assert_raises,
    filler,
    message_of_size,
    receive_expecting,
    request,
    sample_messages,
)


async def check_messages_arrive_in_order(a: MessageChannel, b: MessageChannel) -> None:
    messages = sample_messages()

    async def send_all() -> None:
        for message in messages:
            with assert_checkpoints():
                await a.send(message)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_all)
        await receive_expecting(b, messages)


async def check_send_many_keeps_order(a: MessageChannel, b: MessageChannel) -> None:
    messages = sample_messages()

    async def send_in_batches() -> None:
        await a.send_many(messages[:3])
        await a.send_many([])
        await a.send(messages[3])
        await a.send_many(messages[4:])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_in_batches)
        await receive_expecting(b, messages)


async def check_close_ends_the_peers_channel(a: MessageChannel, b: MessageChannel) -> None:
    """What was sent before ``aclose`` arrives, then ``EndOfChannel``, again and again."""
    message = request(1)

    async def send_then_close() -> None:
        await a.send(message)
        await a.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_then_close)
        await receive_expecting(b, [message])
        await assert_end_of_channel(b)


async def check_local_close_makes_every_operation_fail(a: MessageChannel, b: MessageChannel) -> None:
    with assert_raises(trio.WouldBlock):
        a.receive_nowait()
    await a.aclose()
    with assert_raises(trio.ClosedResourceError):
        await a.send(request(1))
    with assert_raises(trio.ClosedResourceError):
        await a.send_many([request(2)])
    with assert_raises(trio.ClosedResourceError):
        await a.receive()
    with assert_raises(trio.ClosedResourceError):
        a.receive_nowait()
    await a.aclose()
    await a.aclose()
    with assert_raises(trio.EndOfChannel, trio.BrokenResourceError):
        await b.receive()


async def check_cancelled_aclose_still_closes(a: MessageChannel, b: MessageChannel) -> None:
    with trio.CancelScope() as scope:
        scope.cancel()
        await a.aclose()
    with assert_raises(trio.ClosedResourceError):
        await a.send(request(1))
    with assert_raises(trio.ClosedResourceError):
        await a.receive()
    with assert_raises(trio.EndOfChannel, trio.BrokenResourceError):
        await b.receive()


async def check_aclose_wakes_a_blocked_receive(a: MessageChannel, b: MessageChannel) -> None:
    async def receive_expecting_closed() -> None:
        with assert_raises(trio.ClosedResourceError):
            await b.receive()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receive_expecting_closed)
        await wait_all_tasks_blocked()
        await b.aclose()


async def check_cancelled_receive_loses_nothing(a: MessageChannel, b: MessageChannel) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(b.receive)
        await wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    message = request("after-cancel")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(a.send, message)
        await receive_expecting(b, [message])


async def check_concurrent_receives_are_busy(a: MessageChannel, b: MessageChannel) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(b.receive)
        await wait_all_tasks_blocked()
        with assert_raises(trio.BusyResourceError):
            await b.receive()
        nursery.cancel_scope.cancel()
    # The refused receive left the channel as it was.
    message = request("after-busy")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(a.send, message)
        await receive_expecting(b, [message])


def _unsendable_messages() -> list[Any]:
    """Values ``send`` must refuse with ``ValueError`` before writing anything."""
    return [
        {"hello": "world"},
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": True, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "both"}},
        [request(1)],
        {"jsonrpc": "2.0", "id": 1, "result": {"x": "\ud800"}},
    ]


async def check_invalid_messages_are_refused_unsent(a: MessageChannel, b: MessageChannel) -> None:
    for bad in _unsendable_messages():
        with assert_raises(ValueError):
            await a.send(bad)
    marker = request("marker")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(a.send, marker)
        await receive_expecting(b, [marker])  # the first thing b sees: nothing else was written


async def check_sending_to_a_closed_peer_breaks_for_good(a: MessageChannel, b: MessageChannel) -> None:
    await b.aclose()
    with assert_raises(trio.BrokenResourceError):
        while True:  # buffers may take a few messages before the transport notices
            await a.send(filler())
    with assert_raises(trio.BrokenResourceError):
        await a.send(request(1))


async def check_half_close(a: MessageChannel, b: MessageChannel) -> None:
    """After ``a.send_eof()``, ``b`` sees the end but can still answer ``a``."""
    before, reply = request(1), {"jsonrpc": "2.0", "id": 1, "result": {}}

    async def send_then_eof() -> None:
        await a.send(before)
        await a.send_eof()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_then_eof)
        await receive_expecting(b, [before])
        await assert_end_of_channel(b)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(b.send, reply)
        await receive_expecting(a, [reply])
    await b.send_eof()
    await assert_end_of_channel(a)


async def check_oversized_message_is_skipped(
    a: MessageChannel, b: MessageChannel, max_message_bytes: int
) -> None:
    """A message of exactly the limit passes; one byte more raises MessageTooLarge, once."""
    at_limit = message_of_size(max_message_bytes, request_id=1)
    over_limit = message_of_size(max_message_bytes + 1, request_id=2)
    after = request(3)

    async def send_all() -> None:
        for message in (at_limit, over_limit, after):
            await a.send(message)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_all)
        await receive_expecting(b, [at_limit])
        with assert_raises(MessageTooLarge):
            await b.receive()
        await receive_expecting(b, [after])


async def check_oversized_message_closes(
    a: MessageChannel, b: MessageChannel, max_message_bytes: int
) -> None:
    """A message of exactly the limit passes; one byte more breaks the receiver's channel.

    The sender's channel ends too.
    """
    at_limit = message_of_size(max_message_bytes, request_id=1)
    over_limit = message_of_size(max_message_bytes + 1, request_id=2)
    await a.send(at_limit)
    await receive_expecting(b, [at_limit])
    await a.send(over_limit)
    with assert_raises(trio.BrokenResourceError):
        await b.receive()
    with assert_raises(trio.BrokenResourceError, trio.EndOfChannel):
        await a.receive()
