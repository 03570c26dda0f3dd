"""The soak's bookkeeping tells a request lost from one sent in the documented closing window.

The closing window (docs/design.md §5.1): a request a client writes once its per-connection child
died may reach the bridge after the bridge stopped reading, and goes unanswered by design. A
client that had nothing in flight when its child died sees no ``child-exited`` error before the
close, so the kill of its child (which the soak learns from the bridge's log) marks the window's
start; over Unix, where the log cannot say which connection a child served, the configuration's last
kill does. Virtual time (MockClock): these are the soak's own records, no sockets.
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


async def test_over_unix_a_request_sent_after_the_configurations_last_kill_is_in_the_closing_window_not_lost(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The case a fresh-clone CI run once counted as two lost requests: the bridge had written the
    # replies and stopped reading, and the lagging client's next two requests met the close.
    tally = Tally("unix-per-connection")
    ledger = Ledger(tally, None, child_unknown=True)
    tally.kills.append(trio.current_time())
    await trio.sleep(AFTER_S)
    ledger.send(97, "sleep", 1.0)
    ledger.send(98, "echo", 0.0)
    await trio.sleep(AFTER_S)
    assert ledger.close() == 0
    assert (tally.lost, tally.in_close_window) == (0, 2)


async def test_over_unix_a_request_sent_before_the_configurations_last_kill_and_never_answered_is_lost(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tally = Tally("unix-per-connection")
    ledger = Ledger(tally, None, child_unknown=True)
    ledger.send(7, "echo", 0.0)
    await trio.sleep(AFTER_S)
    tally.kills.append(trio.current_time())
    await trio.sleep(AFTER_S)
    assert ledger.close() == 1
    assert (tally.lost, tally.in_close_window) == (1, 0)


async def test_a_connection_whose_child_is_known_opens_no_window_at_another_connections_kill(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tally = Tally("tcp")
    ledger = Ledger(tally, PEER)
    tally.kills.append(trio.current_time())  # not this connection's child: killed_peers says whose
    await trio.sleep(AFTER_S)
    ledger.send(7, "echo", 0.0)
    await trio.sleep(AFTER_S)
    assert ledger.close() == 1
    assert tally.in_close_window == 0


async def test_a_lost_request_is_reported_with_its_send_time_against_the_close_and_the_last_kill(
    autojump_clock: trio.testing.MockClock,
) -> None:
    tally = Tally("unix-per-connection")
    ledger = Ledger(tally, None, child_unknown=True)
    ledger.send(7, "echo", 0.0)
    await trio.sleep(0.5)
    tally.kills.append(trio.current_time())
    await trio.sleep(0.25)
    ledger.close()
    [example] = tally.lost_examples
    assert "id 7 (echo): sent 0.75s before the close, -0.50s from the last kill" in example, example
