"""Children started together: trio starts each in a worker thread, and those threads stay (idle) for
a while after, so the bridge bounds how many start at once (bridge/_child/process.py)."""

from __future__ import annotations

import sys
import threading

import trio

from bridge import ChildSpec, Limits, open_child
from bridge._child.process import SPAWN_CONCURRENCY

TIMEOUT = 30  # seconds: a handful of Python start-ups on a loaded machine
CHILDREN = 3 * SPAWN_CONCURRENCY  # enough to need more threads than the bound, were it not kept
WAITS_FOR_STDIN_EOF = (sys.executable, "-c", "import sys; sys.stdin.read()")


async def test_children_started_together_make_no_more_worker_threads_than_the_spawn_bound() -> None:
    before = threading.active_count()
    peak = before
    started = 0
    all_started = trio.Event()
    stop = trio.Event()

    async def one_child() -> None:
        nonlocal started, peak
        async with open_child(ChildSpec(WAITS_FOR_STDIN_EOF), Limits()):
            started += 1
            peak = max(peak, threading.active_count())
            if started == CHILDREN:
                all_started.set()
            await stop.wait()

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            for _ in range(CHILDREN):
                nursery.start_soon(one_child)
            await all_started.wait()
            stop.set()
    assert peak - before <= SPAWN_CONCURRENCY
