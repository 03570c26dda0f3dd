"""The embedding entry point: run a bridge for the duration of an ``async with`` block."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from channels import single_exception

from .config import ServeConfig
from .daemon import STOP_GRACE, Daemon

# After the graceful stop's budget, how long a forced stop (requests answered with -32000,
# children SIGKILLed and reaped) may take before open_bridge gives up waiting.
FORCED_STOP_BUDGET = 5.0


def stop_budget(config: ServeConfig) -> float:
    """Seconds a graceful stop of ``config`` may take.

    That is the drain, the connections' last flush, and one child's stop in MCP order (children
    stop in parallel), plus a second of slack. A pure function of ``config.limits``.
    """
    limits = config.limits
    return limits.drain_timeout + STOP_GRACE + limits.stop_stdin_timeout + limits.stop_term_timeout + 1.0


@asynccontextmanager
async def open_bridge(config: ServeConfig) -> AsyncIterator[Daemon]:
    """Serve ``config`` while the block runs; yield the running :class:`Daemon`.

    The daemon is yielded once every listener is bound (``daemon.addresses`` has the real ports,
    ``daemon.statistics()`` the counters). Use as ``async with open_bridge(config) as daemon:``.
    The block owns nothing it must close: the listeners, the connections and the children are the
    bridge's, and all of them are closed or stopped when the block ends.

    However the block ends (normally, by an exception, or because an enclosing scope was
    cancelled), the bridge stops gracefully: it stops accepting, lets requests in flight finish
    within ``config.limits.drain_timeout``, then stops every child in MCP order. That stop is
    shielded from the cancellation and bounded by :func:`stop_budget`; past it, the stop is
    forced (``Daemon.stop_now``), and given 5 s more. Every child is reaped before this returns.
    Calling ``daemon.stop()`` inside the block starts the graceful stop early; the block then
    goes on running.

    A single exception (one of those below, or one raised in the block) arrives as itself; only
    several at once (rare: the block and the daemon failing together) arrive as an
    ``ExceptionGroup``.

    Raises:
        channels.ListenError: a listener could not be opened (nothing is left running).
        ChildStartError: in eager shared or auto mode, the child could not be started.
        CrashLoop: the shared child crash-looped while the block ran; the block is
            cancelled first.
    """
    daemon = Daemon(config)
    # The daemon runs shielded: a cancellation of the caller's scope must become a graceful stop,
    # not reach the daemon's tasks directly. Only the budget's end cancels it outright.
    shield = trio.CancelScope(shield=True)

    async def run(task_status: trio.TaskStatus[list[str]]) -> None:
        with shield:
            await daemon.run(task_status=task_status)

    with single_exception():
        async with trio.open_nursery() as nursery:
            await nursery.start(run)
            try:
                yield daemon
            finally:
                daemon.stop()
                with trio.CancelScope(shield=True):
                    with trio.move_on_after(stop_budget(config)):
                        await daemon.wait_stopped()
                    if not daemon.stopped:
                        daemon.stop_now()
                        with trio.move_on_after(FORCED_STOP_BUDGET):
                            await daemon.wait_stopped()
                    shield.cancel()  # a no-op unless even the forced stop overran
