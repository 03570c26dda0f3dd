"""The checks that need a sender to block: over a pair whose buffers fill when nobody reads.

:func:`~channels.testing.check_message_channel` runs them only with a ``make_clogged_pair``.
"""

from __future__ import annotations

import trio
from trio.testing import wait_all_tasks_blocked

from .._core.channel import MessageChannel
from .._core.errors import SendTimeout
from ._support import assert_raises, request, send_until_blocked_forever


async def check_concurrent_sends_are_busy(a: MessageChannel, b: MessageChannel) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_until_blocked_forever, a)
        await wait_all_tasks_blocked()  # the sender is now blocked inside a send
        with assert_raises(trio.BusyResourceError):
            await a.send(request(1))
        with assert_raises(trio.BusyResourceError):
            await a.send_many([request(2)])
        nursery.cancel_scope.cancel()


# A send_timeout short enough to keep the check fast, long enough not to fire on a healthy send.
SEND_TIMEOUT_CHECK = 0.2


async def check_send_timeout_breaks_the_channel(a: MessageChannel, b: MessageChannel) -> None:
    """A send the peer does not accept within send_timeout raises SendTimeout.

    SendTimeout is a BrokenResourceError, and the channel stays broken.
    """
    if not _settable(a):
        return  # an implementation without send timeouts
    a.send_timeout = SEND_TIMEOUT_CHECK
    started = trio.current_time()
    with assert_raises(SendTimeout):
        await send_until_blocked_forever(a)
    assert trio.current_time() - started >= SEND_TIMEOUT_CHECK
    with assert_raises(trio.BrokenResourceError):
        await a.send(request("after the timeout"))


def _settable(channel: MessageChannel) -> bool:
    try:
        channel.send_timeout = channel.send_timeout
    except AttributeError:
        return False
    return True


async def check_aclose_wakes_a_blocked_send(a: MessageChannel, b: MessageChannel) -> None:
    async def send_expecting_closed() -> None:
        with assert_raises(trio.ClosedResourceError):
            await send_until_blocked_forever(a)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send_expecting_closed)
        await wait_all_tasks_blocked()
        await a.aclose()
