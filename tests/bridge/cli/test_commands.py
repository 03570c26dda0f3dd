"""What the daemon's command line runs beside serving (bridge/_cli/commands.py): here, the
collection of old cyclic garbage (bridge/_ops/memory.py); the heap's trim is test_heap.py's."""

from __future__ import annotations

import trio
import trio.testing
from garbage import cycle_collector_off, cyclic_garbage

from bridge._cli.commands import _serve_tended
from bridge._ops.memory import FULL_COLLECTION_PERIOD_S


async def test_the_daemon_collects_old_cyclic_garbage_beside_serving_within_a_period(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def serving() -> int:
        alive = cyclic_garbage()
        await trio.sleep(FULL_COLLECTION_PERIOD_S / 2)
        assert alive() is not None
        await trio.sleep(FULL_COLLECTION_PERIOD_S)
        return 0 if alive() is None else 1

    with cycle_collector_off():  # only the daemon's own collection may free the cycle
        assert await _serve_tended(None, serving) == 0
