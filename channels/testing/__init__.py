"""A generic conformance suite for :class:`~channels.MessageChannel` implementations.

:func:`check_message_channel` is to message channels what ``trio.testing.check_two_way_stream`` is to
byte streams: hand it a function that makes a connected pair, and it checks the contract written on
:class:`~channels.MessageChannel` (ordering, end of channel, closing, trio's error vocabulary, the
size limit and its resynchronisation, a randomized duplex exchange). Every channel kind of this
project passes it; a new kind should too.

Like trio's checks it depends on trio only (no pytest), raises ``AssertionError`` (or
``trio.TooSlowError``) on the first violation, and names the failing check in an exception note.
Every check makes a fresh pair, runs under its own ``trio.fail_after``, and forcefully closes both
ends afterwards.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeAlias

import trio
from trio.testing import assert_checkpoints, wait_all_tasks_blocked

from ._core.channel import MessageChannel, PeerInfo
from ._core.errors import MessageTooLarge, SendTimeout
from ._core.jsonrpc import JSONObject, encode

__all__ = ["DEFAULT_CHECK_MAX_MESSAGE_BYTES", "PairMaker", "check_message_channel"]

PairMaker: TypeAlias = Callable[[int], Awaitable[tuple[MessageChannel, MessageChannel]]]
"""``make_pair(max_message_bytes)``: an async callable returning two connected channels ``(a, b)``,
each refusing messages from its peer longer than ``max_message_bytes``. The caller owns them."""

# The limit the checks run with unless told otherwise: small, so that an over-long message costs
# little to send, and large enough for the randomized duplex messages (at most an eighth of it).
DEFAULT_CHECK_MAX_MESSAGE_BYTES = 64 * 1024

# The deadline of one check. Generous, because some pairs run through real child processes; a
# conforming channel finishes each check in milliseconds, so hitting this means a hang.
CHECK_TIMEOUT = 20.0

# The randomized duplex exchange moves this many encoded bytes in each direction (as trio's does).
DUPLEX_TEST_BYTES = 2**20

# What a "clogging" sender writes per message while it waits for its sends to block.
FILLER_BYTES = 16 * 1024

# Text the duplex messages are drawn from: JSON escapes (quote, backslash, control characters), line
# separators that must not split a line (\u2028, \x85), multi-byte UTF-8 and an astral character.
_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789 "\\\n\r\t\x00\x85\u2028é€😀{}[]:,'

# At most this many encoded bytes per character of _ALPHABET ("\x00" becomes "\\u0000").
_MAX_ENCODED_BYTES_PER_CHAR = 6


async def check_message_channel(
    make_pair: PairMaker,
    *,
    make_clogged_pair: PairMaker | None = None,
    max_message_bytes: int = DEFAULT_CHECK_MAX_MESSAGE_BYTES,
    half_closeable: bool = False,
    oversized_closes: bool = False,
) -> None:
    """Check that a channel implementation keeps the :class:`~channels.MessageChannel` contract.

    Every one-way check runs twice, from ``a`` to ``b`` and from ``b`` to ``a``.

    Args:
        make_pair: makes a fresh connected pair ``(a, b)`` for each check; see :data:`PairMaker`.
            The checks close both channels; the maker's owner cleans up whatever else it started.
        make_clogged_pair: like ``make_pair``, but in its pairs a sender eventually blocks when
            nobody receives (bounded buffering, as over ``trio.testing.lockstep_stream_pair`` or a
            kernel socket). ``None`` skips the checks of concurrent sends and of closing during a
            blocked send. A pair over real sockets or pipes can pass ``make_pair`` again here.
        max_message_bytes: the receive limit passed to the makers; at least 1 KiB.
        half_closeable: whether ``send_eof()`` is supported; if so, half-close is checked too.
        oversized_closes: a message over the limit ends the connection (the receiver raises
            ``BrokenResourceError``, as a WebSocket closing with 1009 does) instead of being
            skipped with :class:`~channels.MessageTooLarge`.

    Raises:
        AssertionError: the contract is broken; a note names the check.
        trio.TooSlowError: a check hung past its deadline (``CHECK_TIMEOUT``).
        ValueError: ``max_message_bytes`` is less than 1024.
        Anything the makers or the channels raise unexpectedly, with the same note.
    """
    if max_message_bytes < 1024:
        raise ValueError("max_message_bytes must be at least 1024 for the checks' own messages")
    one_way: list[Callable[[MessageChannel, MessageChannel], Awaitable[None]]] = [
        _check_messages_arrive_in_order,
        _check_send_many_keeps_order,
        _check_close_ends_the_peers_channel,
        _check_local_close_makes_every_operation_fail,
        _check_cancelled_aclose_still_closes,
        _check_aclose_wakes_a_blocked_receive,
        _check_cancelled_receive_loses_nothing,
        _check_concurrent_receives_are_busy,
        _check_invalid_messages_are_refused_unsent,
        _check_sending_to_a_closed_peer_breaks_for_good,
    ]
    if half_closeable:
        one_way.append(_check_half_close)
    for flipped in (False, True):
        for check in one_way:
            async with _fresh_pair(check, make_pair, max_message_bytes, flipped) as (a, b):
                await check(a, b)
        oversized = (
            _check_oversized_message_closes if oversized_closes else _check_oversized_message_is_skipped
        )
        async with _fresh_pair(oversized, make_pair, max_message_bytes, flipped) as (a, b):
            await oversized(a, b, max_message_bytes)
        if make_clogged_pair is not None:
            for check in (
                _check_concurrent_sends_are_busy,
                _check_aclose_wakes_a_blocked_send,
                _check_send_timeout_breaks_the_channel,
            ):
                async with _fresh_pair(check, make_clogged_pair, max_message_bytes, flipped) as (a, b):
                    await check(a, b)
    async with _fresh_pair(_check_duplex_exchange, make_pair, max_message_bytes, False) as (a, b):
        await _check_duplex_exchange(a, b, max_message_bytes)


# -- scaffolding --------------------------------------------------------------------------------


@asynccontextmanager
async def _fresh_pair(
    check: Callable[..., Awaitable[None]],
    make_pair: PairMaker,
    max_message_bytes: int,
    flipped: bool,
) -> AsyncIterator[tuple[MessageChannel, MessageChannel]]:
    """Make a pair for one check, bound the check in time, name it on failure, close both ends."""
    name = f"{check.__name__.removeprefix('_check_')}{' (b to a)' if flipped else ''}"
    try:
        with trio.fail_after(CHECK_TIMEOUT):
            a, b = await make_pair(max_message_bytes)
            if flipped:
                a, b = b, a
            try:
                assert isinstance(a.peer, PeerInfo) and isinstance(b.peer, PeerInfo)
                yield a, b
            finally:
                await trio.aclose_forcefully(a)
                await trio.aclose_forcefully(b)
    except Exception as exc:
        exc.add_note(f"in check_message_channel: {name}")
        raise


@contextmanager
def _assert_raises(*expected: type[BaseException]) -> Iterator[None]:
    """Expect one of ``expected``, unwrapped (this module does not depend on pytest)."""
    __tracebackhide__ = True
    try:
        yield
    except expected:
        return
    raise AssertionError(f"expected {' or '.join(e.__name__ for e in expected)}")


def _request(request_id: Any, method: str = "ping", **params: Any) -> JSONObject:
    message: JSONObject = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params:
        message["params"] = params
    return message


def _notification(method: str, **params: Any) -> JSONObject:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def _sample_messages() -> list[JSONObject]:
    """One of each kind, with both id types and text that needs escaping."""
    return [
        _request(1, "initialize", protocolVersion="2025-06-18", capabilities={}),
        _request("1", "tools/list"),
        _notification("notifications/initialized"),
        {"jsonrpc": "2.0", "id": 0, "result": {}},
        {"jsonrpc": "2.0", "id": "x", "error": {"code": -32601, "message": "no such method"}},
        {"jsonrpc": "2.0", "id": -7, "result": {"text": 'a\nb\r\n\u2028\x85"q"\\é😀\x00'}},
        _request(2**53 + 1, "big/id"),
        {"jsonrpc": "2.0", "method": "positional", "params": [1, 2.5, None, True, False, [], {}]},
    ]


def _assert_same_message(got: JSONObject, expected: JSONObject) -> None:
    """Equal, and the id kept its JSON type (``1`` stays a number, ``"1"`` a string)."""
    assert got == expected, f"received {got!r}, expected {expected!r}"
    assert type(got.get("id")) is type(expected.get("id")), f"id changed type: {got!r}"


def _filler() -> JSONObject:
    return _notification("filler", pad="f" * FILLER_BYTES)


async def _receive_expecting(channel: MessageChannel, expected: Sequence[JSONObject]) -> None:
    for message in expected:
        with assert_checkpoints():
            got = await channel.receive()
        _assert_same_message(got, message)


async def _assert_end_of_channel(channel: MessageChannel) -> None:
    """``EndOfChannel`` now and on the next call too."""
    for _ in range(2):
        with _assert_raises(trio.EndOfChannel):
            await channel.receive()


async def _send_until_blocked_forever(channel: MessageChannel) -> None:
    """Send fillers until a send blocks; the caller cancels this task or closes the channel."""
    while True:
        await channel.send(_filler())


# -- one-way checks -----------------------------------------------------------------------------


async def _check_messages_arrive_in_order(a: MessageChannel, b: MessageChannel) -> None:
    messages = _sample_messages()

    async def send_all() -> None:
        for message in messages:
            with assert_checkpoints():
                await a.send(message)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_all)
        await _receive_expecting(b, messages)


async def _check_send_many_keeps_order(a: MessageChannel, b: MessageChannel) -> None:
    messages = _sample_messages()

    async def send_in_batches() -> None:
        await a.send_many(messages[:3])
        await a.send_many([])
        await a.send(messages[3])
        await a.send_many(messages[4:])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_in_batches)
        await _receive_expecting(b, messages)


async def _check_close_ends_the_peers_channel(a: MessageChannel, b: MessageChannel) -> None:
    """What was sent before ``aclose`` arrives, then ``EndOfChannel``, again and again."""
    message = _request(1)

    async def send_then_close() -> None:
        await a.send(message)
        await a.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_then_close)
        await _receive_expecting(b, [message])
        await _assert_end_of_channel(b)


async def _check_local_close_makes_every_operation_fail(a: MessageChannel, b: MessageChannel) -> None:
    with _assert_raises(trio.WouldBlock):
        a.receive_nowait()
    await a.aclose()
    with _assert_raises(trio.ClosedResourceError):
        await a.send(_request(1))
    with _assert_raises(trio.ClosedResourceError):
        await a.send_many([_request(2)])
    with _assert_raises(trio.ClosedResourceError):
        await a.receive()
    with _assert_raises(trio.ClosedResourceError):
        a.receive_nowait()
    await a.aclose()
    await a.aclose()
    with _assert_raises(trio.EndOfChannel, trio.BrokenResourceError):
        await b.receive()


async def _check_cancelled_aclose_still_closes(a: MessageChannel, b: MessageChannel) -> None:
    with trio.CancelScope() as scope:
        scope.cancel()
        await a.aclose()
    with _assert_raises(trio.ClosedResourceError):
        await a.send(_request(1))
    with _assert_raises(trio.ClosedResourceError):
        await a.receive()
    with _assert_raises(trio.EndOfChannel, trio.BrokenResourceError):
        await b.receive()


async def _check_aclose_wakes_a_blocked_receive(a: MessageChannel, b: MessageChannel) -> None:
    async def receive_expecting_closed() -> None:
        with _assert_raises(trio.ClosedResourceError):
            await b.receive()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receive_expecting_closed)
        await wait_all_tasks_blocked()
        await b.aclose()


async def _check_cancelled_receive_loses_nothing(a: MessageChannel, b: MessageChannel) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(b.receive)
        await wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    message = _request("after-cancel")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(a.send, message)
        await _receive_expecting(b, [message])


async def _check_concurrent_receives_are_busy(a: MessageChannel, b: MessageChannel) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(b.receive)
        await wait_all_tasks_blocked()
        with _assert_raises(trio.BusyResourceError):
            await b.receive()
        nursery.cancel_scope.cancel()
    # The refused receive left the channel as it was.
    message = _request("after-busy")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(a.send, message)
        await _receive_expecting(b, [message])


def _unsendable_messages() -> list[Any]:
    """Values ``send`` must refuse with ``ValueError`` before writing anything."""
    return [
        {"hello": "world"},
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": True, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "both"}},
        [_request(1)],
        {"jsonrpc": "2.0", "id": 1, "result": {"x": "\ud800"}},
    ]


async def _check_invalid_messages_are_refused_unsent(a: MessageChannel, b: MessageChannel) -> None:
    for bad in _unsendable_messages():
        with _assert_raises(ValueError):
            await a.send(bad)
    marker = _request("marker")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(a.send, marker)
        await _receive_expecting(b, [marker])  # the first thing b sees: nothing else was written


async def _check_sending_to_a_closed_peer_breaks_for_good(a: MessageChannel, b: MessageChannel) -> None:
    await b.aclose()
    with _assert_raises(trio.BrokenResourceError):
        while True:  # buffers may take a few messages before the transport notices
            await a.send(_filler())
    with _assert_raises(trio.BrokenResourceError):
        await a.send(_request(1))


async def _check_half_close(a: MessageChannel, b: MessageChannel) -> None:
    """After ``a.send_eof()``, ``b`` sees the end but can still answer ``a``."""
    before, reply = _request(1), {"jsonrpc": "2.0", "id": 1, "result": {}}

    async def send_then_eof() -> None:
        await a.send(before)
        await a.send_eof()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_then_eof)
        await _receive_expecting(b, [before])
        await _assert_end_of_channel(b)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(b.send, reply)
        await _receive_expecting(a, [reply])
    await b.send_eof()
    await _assert_end_of_channel(a)


async def _check_oversized_message_is_skipped(
    a: MessageChannel, b: MessageChannel, max_message_bytes: int
) -> None:
    """A message of exactly the limit passes; one byte more raises MessageTooLarge, once."""
    at_limit = _message_of_size(max_message_bytes, request_id=1)
    over_limit = _message_of_size(max_message_bytes + 1, request_id=2)
    after = _request(3)

    async def send_all() -> None:
        for message in (at_limit, over_limit, after):
            await a.send(message)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_all)
        await _receive_expecting(b, [at_limit])
        with _assert_raises(MessageTooLarge):
            await b.receive()
        await _receive_expecting(b, [after])


async def _check_oversized_message_closes(
    a: MessageChannel, b: MessageChannel, max_message_bytes: int
) -> None:
    """A message of exactly the limit passes; one byte more breaks the receiver's channel.

    The sender's channel ends too.
    """
    at_limit = _message_of_size(max_message_bytes, request_id=1)
    over_limit = _message_of_size(max_message_bytes + 1, request_id=2)
    await a.send(at_limit)
    await _receive_expecting(b, [at_limit])
    await a.send(over_limit)
    with _assert_raises(trio.BrokenResourceError):
        await b.receive()
    with _assert_raises(trio.BrokenResourceError, trio.EndOfChannel):
        await a.receive()


def _message_of_size(size: int, *, request_id: int) -> JSONObject:
    """A request whose JSON text (without a line ending) is exactly ``size`` bytes."""
    message = _request(request_id, "pad", pad="")
    overhead = len(encode(message)) - 1
    message["params"]["pad"] = "p" * (size - overhead)
    return message


# -- checks that need sends to block ------------------------------------------------------------


async def _check_concurrent_sends_are_busy(a: MessageChannel, b: MessageChannel) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_send_until_blocked_forever, a)
        await wait_all_tasks_blocked()  # the sender is now blocked inside a send
        with _assert_raises(trio.BusyResourceError):
            await a.send(_request(1))
        with _assert_raises(trio.BusyResourceError):
            await a.send_many([_request(2)])
        nursery.cancel_scope.cancel()


# A send_timeout short enough to keep the check fast, long enough not to fire on a healthy send.
SEND_TIMEOUT_CHECK = 0.2


async def _check_send_timeout_breaks_the_channel(a: MessageChannel, b: MessageChannel) -> None:
    """A send the peer does not accept within send_timeout raises SendTimeout.

    SendTimeout is a BrokenResourceError, and the channel stays broken.
    """
    if not _settable(a):
        return  # an implementation without send timeouts
    a.send_timeout = SEND_TIMEOUT_CHECK
    started = trio.current_time()
    with _assert_raises(SendTimeout):
        await _send_until_blocked_forever(a)
    assert trio.current_time() - started >= SEND_TIMEOUT_CHECK
    with _assert_raises(trio.BrokenResourceError):
        await a.send(_request("after the timeout"))


def _settable(channel: MessageChannel) -> bool:
    try:
        channel.send_timeout = channel.send_timeout
    except AttributeError:
        return False
    return True


async def _check_aclose_wakes_a_blocked_send(a: MessageChannel, b: MessageChannel) -> None:
    async def send_expecting_closed() -> None:
        with _assert_raises(trio.ClosedResourceError):
            await _send_until_blocked_forever(a)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_expecting_closed)
        await wait_all_tasks_blocked()
        await a.aclose()


# -- duplex -------------------------------------------------------------------------------------


def _random_messages(seed: int, total_bytes: int, max_message_bytes: int) -> list[JSONObject]:
    """Messages of random kinds and sizes whose encodings add up to at least ``total_bytes``."""
    r = random.Random(seed)
    max_chars = max_message_bytes // (2 * _MAX_ENCODED_BYTES_PER_CHAR)
    messages: list[JSONObject] = []
    sent = 0
    while sent < total_bytes:
        text = "".join(r.choices(_ALPHABET, k=r.randint(0, max_chars)))
        number = len(messages)
        shape = r.randrange(4)
        if shape == 0:
            message = _request(number, "tools/call", text=text)
        elif shape == 1:
            message = _request(str(number), "tools/call", text=text)
        elif shape == 2:
            message = _notification("notifications/message", text=text)
        else:
            message = {"jsonrpc": "2.0", "id": number, "result": {"text": text}}
        messages.append(message)
        sent += len(encode(message))
    return messages


async def _send_in_random_batches(channel: MessageChannel, messages: list[JSONObject], seed: int) -> None:
    r = random.Random(seed)
    position = 0
    while position < len(messages):
        count = r.randint(1, 4)
        batch = messages[position : position + count]
        if count == 1:
            await channel.send(batch[0])
        else:
            await channel.send_many(batch)
        position += len(batch)


async def _check_duplex_exchange(a: MessageChannel, b: MessageChannel, max_message_bytes: int) -> None:
    """A randomized 1 MiB each way, both directions at once, arrives intact and in order."""
    a_to_b = _random_messages(0, DUPLEX_TEST_BYTES, max_message_bytes)
    b_to_a = _random_messages(1, DUPLEX_TEST_BYTES, max_message_bytes)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_send_in_random_batches, a, a_to_b, 2)
        nursery.start_soon(_send_in_random_batches, b, b_to_a, 3)
        nursery.start_soon(_receive_expecting, b, a_to_b)
        nursery.start_soon(_receive_expecting, a, b_to_a)
    # and the end of one direction is seen as such
    async with trio.open_nursery() as nursery:
        nursery.start_soon(a.aclose)
        await _assert_end_of_channel(b)
