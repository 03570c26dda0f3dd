"""How clients' messages reach a shared child: by its writer task, or at once by the sender.

The child's writer task (``ChildLink._write_queued``) writes what clients queued, so that the
requests of a scheduler pass reach the child in one write. A request that comes alone to an idle
child (no other request in flight, nothing queued), small enough for the child's pipe to take whole
(``PIPE_BUF``), is written by its sender's task instead, sparing the writer's trip through the
scheduler: one task step and one pass of the event loop per call, a quarter of what a call to a
shared child costs (``bench/passes.py bridge-shared``).
Real children and real sockets; the steps are counted by a trio instrument.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterator
from typing import Any

import trio

from conftest import LineClient, call, example_server, request, result_text, running_bridge

TIMEOUT = 20
CALLS = 5
WRITER = "_write_queued"  # the child's writer task's function, as trio names the task


class StepCounter(trio.abc.Instrument):
    """Task steps, by the name of the task's function."""

    def __init__(self) -> None:
        self.steps: collections.Counter[str] = collections.Counter()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps[task.name.rsplit(".", 1)[-1]] += 1


@contextlib.contextmanager
def counting_steps() -> Iterator[collections.Counter[str]]:
    """The task steps taken inside the block, by the name of the task's function."""
    counter = StepCounter()
    trio.lowlevel.add_instrument(counter)
    try:
        yield counter.steps
    finally:
        trio.lowlevel.remove_instrument(counter)


def _shared_bridge(sock_dir):  # type: ignore[no-untyped-def]
    return running_bridge(example_server(), [f"unix:{sock_dir}/s.sock"], child_mode="shared")


async def _calls(client: LineClient, texts: list[str]) -> list[tuple[Any, str]]:
    """Each text echoed by one call at a time: ``(id, text)`` of each reply."""
    replies = []
    for number, text in enumerate(texts):
        await client.send(call(number, "echo", text=text))
        reply = await client.receive()
        replies.append((reply["id"], result_text(reply)))
    return replies


async def test_a_lone_request_to_an_idle_shared_child_is_written_by_its_client_without_waking_the_writer(
    sock_dir,
):
    with trio.fail_after(TIMEOUT):
        async with _shared_bridge(sock_dir) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            assert await _calls(client, ["warm"]) == [(0, "warm")]
            texts = [f"call {number}" for number in range(CALLS)]
            with counting_steps() as steps:
                assert await _calls(client, texts) == list(enumerate(texts))
            assert steps[WRITER] == 0, steps


async def test_a_request_larger_than_a_pipe_takes_whole_reaches_the_shared_child_through_its_writer(
    sock_dir,
):
    with trio.fail_after(TIMEOUT):
        async with _shared_bridge(sock_dir) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            texts = [f"{number}" * 100_000 for number in range(3)]  # over PIPE_BUF (4 KiB)
            with counting_steps() as steps:
                assert await _calls(client, texts) == list(enumerate(texts))
            assert steps[WRITER] >= len(texts), steps


async def test_a_request_to_a_shared_child_busy_with_another_is_queued_for_its_writer(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with _shared_bridge(sock_dir) as daemon:
            first, second = [await LineClient.open(daemon.addresses[0]) for _ in range(2)]
            params = {"name": "sleep", "arguments": {"seconds": 0.5}, "_meta": {"progressToken": "t"}}
            await first.send(request(1, "tools/call", params))
            assert (await first.receive())["method"] == "notifications/progress"  # the child has it
            with counting_steps() as steps:
                await second.send(call(1, "echo", text="behind"))
                assert result_text(await second.receive()) == "behind"
            assert result_text(await first.receive()) == "slept"
            assert steps[WRITER] >= 1, steps
