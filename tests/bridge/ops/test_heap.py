"""The daemon keeps freed large blocks in glibc's heap through a burst of large messages and gives
them back to the system once the burst is over (bridge/_ops/heap.py)."""

from __future__ import annotations

import ctypes.util
import sys
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from bridge._ops.heap import TRIM_FROM_BYTES, TRIM_PERIOD_S, give_back_freed_memory

from conftest import (
    LineClient,
    bridge_process,
    example_server,
    python_output,
    resident_bytes,
    result_text,
)

needs_glibc = pytest.mark.skipif(
    sys.platform != "linux" or ctypes.util.find_library("c") is None,
    reason="the heap policy is glibc's (mallopt, mallinfo2, malloc_trim)",
)
MiB = 1 << 20
LARGE_LIMITS = ("--max-message", "32MiB", "--max-child-message", "32MiB")  # a 16 MiB echo fits


@attrs.define
class FakeHeap:
    """Free bytes set by the test; each trim recorded with the (virtual) time it happened at."""

    free: int = 0
    trims: list[float] = attrs.Factory(list)
    left_after_trim: int = 0

    def free_bytes(self) -> int:
        return self.free

    def trim(self) -> None:
        self.trims.append(trio.current_time())
        self.free = self.left_after_trim


async def watched(heap: FakeHeap, steps: list[tuple[float, int]]) -> list[float]:
    """Run the trimmer over ``heap`` while setting its free bytes at the given (virtual) times."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(give_back_freed_memory, heap.free_bytes, heap.trim)
        start = trio.current_time()
        for at, free in steps:
            await trio.sleep_until(start + at)
            heap.free = free
        await trio.sleep_until(start + 10 * TRIM_PERIOD_S)
        nursery.cancel_scope.cancel()
    return [round(at - start, 3) for at in heap.trims]


async def test_memory_freed_by_a_large_message_is_given_back_at_the_next_look(
    autojump_clock: trio.testing.MockClock,
) -> None:
    heap = FakeHeap(free=100_000, left_after_trim=90_000)
    # freed at half a period: the look at one period trims, and no later look trims again
    trims = await watched(heap, [(0.5 * TRIM_PERIOD_S, 100_000 + 16 * MiB)])
    assert trims == [TRIM_PERIOD_S]


async def test_the_heap_is_not_trimmed_for_less_than_the_threshold_freed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    heap = FakeHeap(free=100_000)
    trims = await watched(heap, [(0.5 * TRIM_PERIOD_S, TRIM_FROM_BYTES - 1)])
    assert trims == []


async def test_a_steady_flow_of_large_messages_is_trimmed_at_most_once_a_period(
    autojump_clock: trio.testing.MockClock,
) -> None:
    heap = FakeHeap(free=0)
    # 16 MiB freed every fifth of a period until just before the third look
    flow = [(k * TRIM_PERIOD_S / 5, 16 * MiB) for k in range(1, 15)]
    trims = await watched(heap, flow)
    assert trims == [TRIM_PERIOD_S, 2 * TRIM_PERIOD_S, 3 * TRIM_PERIOD_S]


@needs_glibc
@pytest.mark.parametrize(
    "mib",
    [16, 64],  # 64: over glibc's largest mmap threshold (32 MiB), as orjson's room to encode 4 MiB
    ids=["16 MiB", "64 MiB"],
)
async def test_a_freed_large_block_stays_in_the_process_until_the_trim_gives_it_back(mib: int) -> None:
    # in a fresh interpreter: the thresholds are the process's, and pytest's must stay as they are
    script = f"""if True:
        from bridge._ops.heap import Heap

        def rss():
            with open("/proc/self/status") as status:
                return int(status.read().split("VmRSS:")[1].split()[0]) * 1024

        heap = Heap.configure()
        before = rss()
        block = bytearray({mib} << 20)  # zeroed: every page touched
        grown = rss() - before
        del block
        kept = rss() - before
        heap.trim()
        print(grown, kept, rss() - before)
    """
    with trio.fail_after(30):
        grown, kept, after_trim = map(int, (await python_output(script)).split())
    assert grown >= (mib - 1) * MiB
    assert kept >= (mib - 1) * MiB  # freed, and still mapped: the next large block needs no page fault
    assert after_trim < 1 * MiB


@needs_glibc
@pytest.mark.parametrize("child", ["shared", "per-connection"])
async def test_the_daemon_gives_a_large_messages_memory_back_once_large_messages_stop(
    sock_dir: Path, child: str
) -> None:
    sock = sock_dir / "s.sock"
    text = "x" * (16 * MiB)
    with trio.fail_after(60):
        async with bridge_process(
            "--listen", f"unix:{sock}", "--child", child, *LARGE_LIMITS, "--", *example_server()
        ) as bridge:
            client = await LineClient.open(bridge.addresses[0])
            try:
                assert result_text(await client.call(1, "echo", text="warm")) == "warm"
                before = resident_bytes(bridge.process.pid)
                for call_id in (2, 3):  # the second reuses the first's pages
                    assert result_text(await client.call(call_id, "echo", text=text)) == text
                # Some 60 MiB of buffers were freed once the reply was written, and nothing of the
                # two messages may be held while the connection waits for more: within a trim
                # period (and a margin for a loaded machine) the process is back where it was.
                with trio.fail_after(2 * TRIM_PERIOD_S + 5):
                    while resident_bytes(bridge.process.pid) > before + 4 * MiB:
                        await trio.sleep(0.05)  # polls a condition: no event says memory was unmapped
            finally:
                await client.aclose()
