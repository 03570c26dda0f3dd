"""The soak's bookkeeping tells a request lost from one sent in the documented closing window.

The closing window (docs/design.md §5.1): a request a client writes once its per-connection child
died may reach the bridge after the bridge stopped reading, and goes unanswered by design. A
client that had nothing in flight when its child died sees no ``child-exited`` error before the
close, so the kill of its child (which the soak learns from the bridge's log) marks the window's
start. Virtual time (MockClock): these are the soak's own records, no sockets.
"""

from __future__ import annotations

import sys

import trio
import trio.testing

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
from soak_tally import CLOSE_WINDOW_S, Ledger, Tally

PEER = "127.0.0.1:40000"
# Within the closing window, as the soak's bridge takes it: it reads on for 0.2 s of quiet.
AFTER_S = 0.25


async def test_a_request_sent_after_its_connections_child_was_killed_is_in_the_closing_window_not_lost(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tally = Tally("tcp")
    ledger = Ledger(tally, PEER)
    tally.killed_peers[PEER] = trio.current_time()  # nothing in flight: no child-exited error
    await trio.sleep(AFTER_S)
    ledger.send(7, "echo", 0.0)
    await trio.sleep(AFTER_S)
    assert ledger.close() == 0
    assert (tally.lost, tally.in_close_window) == (0, 1)


async def test_a_request_sent_before_its_connections_child_was_killed_and_never_answered_is_lost(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tally = Tally("tcp")
    ledger = Ledger(tally, PEER)
    ledger.send(7, "echo", 0.0)
    await trio.sleep(AFTER_S)
    tally.killed_peers[PEER] = trio.current_time()
    tally.killed_peers["127.0.0.1:40001"] = trio.current_time() - CLOSE_WINDOW_S  # another's child
    await trio.sleep(AFTER_S)
    assert ledger.close() == 1
    assert (tally.lost, tally.in_close_window) == (1, 0)
