"""A finished relay is freed by reference counts, not left to the cycle collector.

The parts that end a connection hold its :class:`~bridge._relay.ending.FirstEnding`, not the relay
that holds them (bridge/_relay/ending.py): a relay in a reference cycle would keep its client's
and its child's objects until the next full collection, tens of megabytes under a legacy HTTP
soak (bridge/_ops/memory.py). The cycle collector is off while the test runs, so only reference
counts can free the relay.
"""

from __future__ import annotations

import weakref

import trio
import trio.testing
from garbage import cycle_collector_off
from test_relay_keeps_no_batch import ping_answered

from bridge import ChildSpec, Limits, Relay, open_child
from channels import PeerInfo, StreamChannel

from conftest import example_server

TIMEOUT = 20


async def test_a_relay_whose_client_left_is_freed_by_reference_counts_alone() -> None:
    with cycle_collector_off():
        with trio.fail_after(TIMEOUT):
            left, right = trio.testing.memory_stream_pair()
            served = StreamChannel(right, peer=PeerInfo("memory"))
            async with open_child(ChildSpec(example_server(), name="freed"), Limits()) as process:
                relay = Relay(served, process, Limits())
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(relay.run)
                    await ping_answered(left)
                    await left.aclose()
                assert relay.ending is not None
                assert relay.ending.reason == "client-closed"
                freed = weakref.ref(relay)
                del relay
                assert freed() is None
