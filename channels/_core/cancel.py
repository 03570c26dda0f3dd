"""One small trio idiom: run a block until it ends or something else happens first.

Without it, each use is a nursery, a nested function that awaits the other thing and cancels the
nursery, and a cancel after the block so that function does not outlive it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import attrs
import trio

from .unwrap import single_exception


@attrs.define
class Cutoff:
    """What :func:`cancelled_when` yields: whether the awaited thing happened (and so cancelled the block)."""

    happened: bool = False


@asynccontextmanager
async def cancelled_when(wait: Callable[[], Awaitable[object]]) -> AsyncIterator[Cutoff]:
    """Run the block until it ends, or until ``wait()`` returns first, which cancels it.

    ``wait`` is awaited in a task of its own for as long as the block runs (``event.wait``,
    ``process.wait``), and cancelled when the block ends. The block's cancellation by it ends
    quietly here, as a ``move_on_after`` does; ``Cutoff.happened`` then says so. An exception
    from the block arrives as itself, not in the group the nursery wraps it in.
    """
    cutoff = Cutoff()
    with single_exception():
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                await wait()
                cutoff.happened = True
                nursery.cancel_scope.cancel()

            nursery.start_soon(watch)
            yield cutoff
            nursery.cancel_scope.cancel()
