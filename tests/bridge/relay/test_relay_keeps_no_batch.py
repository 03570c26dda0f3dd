"""What a waiting relay holds: nothing of the last batch, and no task it does not need.

A connection that goes quiet then holds no message, and a large reply is freed once written, not
when the child writes again (bridge/_relay/to_child.py, to_client.py); ``stop_now`` is watched by
``Relay.run``'s own task, not one of its own (every connection has a relay). The tasks and their
frames are read while every task waits; the child is the real example server.
"""

from __future__ import annotations

from collections.abc import Iterator

import trio
import trio.testing

from bridge import ChildSpec, Limits, Relay, open_child
from bridge._relay.to_child import ToChild
from bridge._relay.to_client import ToClient
from channels import PeerInfo, StreamChannel, decode, encode

from conftest import example_server

TIMEOUT = 20
PUMPS = {ToChild.run.__code__: "ToChild.run", ToClient.run.__code__: "ToClient.run"}
# What a pump names a batch and its parts by (to_child.py and to_client.py).
BATCH_LOCALS = {"items", "lines", "item", "line", "forward", "forward_lines", "out", "out_lines", "answered"}


def tasks_under(task: trio.lowlevel.Task) -> Iterator[trio.lowlevel.Task]:
    yield task
    for nursery in task.child_nurseries:
        for child in nursery.child_tasks:
            yield from tasks_under(child)


def batch_locals_of_pumps() -> dict[str, set[str]]:
    """Which names of BATCH_LOCALS each pump's frame holds now."""
    held = {}
    for task in tasks_under(trio.lowlevel.current_root_task()):
        frame = getattr(task.coro, "cr_frame", None)
        if frame is not None and frame.f_code in PUMPS:
            held[PUMPS[frame.f_code]] = BATCH_LOCALS & set(frame.f_locals)
    return held


def relay_task_names() -> list[str]:
    """The qualified names of the tasks a running relay (no timeouts) started, sorted."""
    for task in tasks_under(trio.lowlevel.current_root_task()):
        frame = getattr(task.coro, "cr_frame", None)
        if frame is not None and frame.f_code is Relay.run.__code__:
            return sorted(child.coro.__qualname__ for child in task.child_nurseries[0].child_tasks)
    raise AssertionError("no relay is running")


async def ping_answered(client: trio.abc.Stream) -> None:
    """A ping written on the client's end of a relay, and its reply read back (id 1)."""
    await client.send_all(encode({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
    buffer = bytearray()
    while b"\n" not in buffer:
        buffer += await client.receive_some()
    assert decode(bytes(buffer).rstrip(b"\n"))["id"] == 1


async def test_a_waiting_relays_pumps_hold_no_message_of_the_last_batch_and_it_runs_four_tasks() -> None:
    with trio.fail_after(TIMEOUT):
        left, right = trio.testing.memory_stream_pair()
        served = StreamChannel(right, peer=PeerInfo("memory"))
        async with open_child(ChildSpec(example_server(), name="quiet"), Limits()) as process:
            async with trio.open_nursery() as nursery:
                relay = Relay(served, process, Limits())
                nursery.start_soon(relay.run)
                await ping_answered(left)
                await trio.testing.wait_all_tasks_blocked()
                assert batch_locals_of_pumps() == {"ToChild.run": set(), "ToClient.run": set()}
                assert relay_task_names() == [
                    "Relay._watch_stop",
                    "ToChild.run",
                    "ToClient.run",
                    "ToClient.watch_child",
                ]
                await left.aclose()
