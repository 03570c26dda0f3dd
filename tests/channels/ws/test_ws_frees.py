"""A WebSocket channel that ended is freed by reference counts (channels/_ws/receiver.py).

Once the connection has ended, each ``receive`` raises a new exception like the one the channel
keeps, never that one: raised, it would keep the traceback of the raise, whose frames hold the
channel, a reference cycle that only a full collection frees (bridge/_ops/memory.py). The cycle
collector is off while the test runs, so only reference counts can free the channel.
"""

from __future__ import annotations

import socket
import weakref

import pytest
import trio
from garbage import cycle_collector_off
from test_ws_direct_read import server_channel

TIMEOUT = 10


async def test_a_websocket_channel_whose_peer_left_says_so_alike_each_time_and_is_freed_by_reference_counts() -> (
    None
):
    with cycle_collector_off():
        with trio.fail_after(TIMEOUT):
            ours, theirs = socket.socketpair()
            channel = server_channel(ours)
            theirs.close()  # the peer left without a close frame
            raised = []
            for _ in range(2):
                with pytest.raises(trio.BrokenResourceError) as error:
                    await channel.receive()
                raised.append((type(error.value), str(error.value)))
            assert raised[0] == raised[1]
            await channel.aclose()
            freed = weakref.ref(channel)
            del channel, error
            assert freed() is None
