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

The checks themselves live beside this module, by what they need: ``_one_way`` (one direction at a
time, every way a channel ends), ``_blocking`` (a sender that blocks), ``_duplex`` (both directions
at once); ``_support`` holds the messages and expectations they share.

Import rule: ``channels`` (its rooms), trio and the standard library; never pytest.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeAlias

import trio

from .._core.channel import MessageChannel, PeerInfo
from ._blocking import (
    check_aclose_wakes_a_blocked_send,
    check_concurrent_sends_are_busy,
    check_send_timeout_breaks_the_channel,
)
from ._duplex import check_duplex_exchange
from ._one_way import (
    check_aclose_wakes_a_blocked_receive,
    check_cancelled_aclose_still_closes,
    check_cancelled_receive_loses_nothing,
    check_close_ends_the_peers_channel,
    check_concurrent_receives_are_busy,
    check_half_close,
    check_invalid_messages_are_refused_unsent,
    check_local_close_makes_every_operation_fail,
    check_messages_arrive_in_order,
    check_oversized_message_closes,
    check_oversized_message_is_skipped,
    check_send_many_keeps_order,
    check_sending_to_a_closed_peer_breaks_for_good,
)

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
        Exception: anything the makers or the channels raise unexpectedly, with the same note
            naming the check.
    """
    if max_message_bytes < 1024:
        raise ValueError("max_message_bytes must be at least 1024 for the checks' own messages")
    one_way: list[Callable[[MessageChannel, MessageChannel], Awaitable[None]]] = [
        check_messages_arrive_in_order,
        check_send_many_keeps_order,
        check_close_ends_the_peers_channel,
        check_local_close_makes_every_operation_fail,
        check_cancelled_aclose_still_closes,
        check_aclose_wakes_a_blocked_receive,
        check_cancelled_receive_loses_nothing,
        check_concurrent_receives_are_busy,
        check_invalid_messages_are_refused_unsent,
        check_sending_to_a_closed_peer_breaks_for_good,
    ]
    if half_closeable:
        one_way.append(check_half_close)
    for flipped in (False, True):
        for check in one_way:
            async with _fresh_pair(check, make_pair, max_message_bytes, flipped) as (a, b):
                await check(a, b)
        oversized = check_oversized_message_closes if oversized_closes else check_oversized_message_is_skipped
        async with _fresh_pair(oversized, make_pair, max_message_bytes, flipped) as (a, b):
            await oversized(a, b, max_message_bytes)
        if make_clogged_pair is not None:
            for check in (
                check_concurrent_sends_are_busy,
                check_aclose_wakes_a_blocked_send,
                check_send_timeout_breaks_the_channel,
            ):
                async with _fresh_pair(check, make_clogged_pair, max_message_bytes, flipped) as (a, b):
                    await check(a, b)
    async with _fresh_pair(check_duplex_exchange, make_pair, max_message_bytes, False) as (a, b):
        await check_duplex_exchange(a, b, max_message_bytes)


# -- scaffolding --------------------------------------------------------------------------------


@asynccontextmanager
async def _fresh_pair(
    check: Callable[..., Awaitable[None]],
    make_pair: PairMaker,
    max_message_bytes: int,
    flipped: bool,
) -> AsyncIterator[tuple[MessageChannel, MessageChannel]]:
    """Make a pair for one check, bound the check in time, name it on failure, close both ends."""
    name = f"{check.__name__.removeprefix('check_')}{' (b to a)' if flipped else ''}"
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
