"""How clients' messages reach a shared child: by its writer task, or at once by the sender.

The child's writer task (``ChildLink._write_queued``) writes what clients queued, so that the
requests of a scheduler pass reach the child in one write. A request to an idle child (no other
request in flight, nothing queued), small enough for the child's pipe to take whole
(``PIPE_BUF``), is written by its sender's task instead, sparing the writer's trip through the scheduler: one task step and one pass of the event
loop per call, a quarter of what a call to a shared child costs (``bench/passes.py bridge-shared``).
Real children and real sockets; the steps are counted by a trio instrument.
"""

from __future__ import annotations

import collections
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
        async with running_bridge(
            example_server(), [f"unix:{sock_dir}/s.sock"], child_mode="shared"
        ) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            assert await _calls(client, ["warm"]) == [(0, "warm")]
            counter = StepCounter()
            trio.lowlevel.add_instrument(counter)
            try:
                texts = [f"call {number}" for number in range(CALLS)]
                assert await _calls(client, texts) == list(enumerate(texts))
            finally:
                trio.lowlevel.remove_instrument(counter)
            assert counter.steps[WRITER] == 0, counter.steps


async def test_a_request_larger_than_a_pipe_takes_whole_reaches_the_shared_child_through_its_writer(
    sock_dir,
):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(), [f"unix:{sock_dir}/s.sock"], child_mode="shared"
        ) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            counter = StepCounter()
            trio.lowlevel.add_instrument(counter)
            try:
                texts = [f"{number}" * 100_000 for number in range(3)]  # over PIPE_BUF (4 KiB)
                assert await _calls(client, texts) == list(enumerate(texts))
            finally:
                trio.lowlevel.remove_instrument(counter)
            assert counter.steps[WRITER] >= len(texts), counter.steps


async def test_a_request_to_a_shared_child_busy_with_another_is_queued_for_its_writer(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(), [f"unix:{sock_dir}/s.sock"], child_mode="shared"
        ) as daemon:
            first, second = [await LineClient.open(daemon.addresses[0]) for _ in range(2)]
            params = {"name": "sleep", "arguments": {"seconds": 0.5}, "_meta": {"progressToken": "t"}}
            await first.send(request(1, "tools/call", params))
            assert (await first.receive())["method"] == "notifications/progress"  # the child has it
            counter = StepCounter()
            trio.lowlevel.add_instrument(counter)
            try:
                await second.send(call(1, "echo", text="behind"))
                assert result_text(await second.receive()) == "behind"
            finally:
                trio.lowlevel.remove_instrument(counter)
            assert result_text(await first.receive()) == "slept"
            assert counter.steps[WRITER] >= 1, counter.steps
