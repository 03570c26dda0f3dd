"""Fuzzing a whole daemon: several clients' message streams, interleaved, into real children, in
shared mode and per connection (docs/design.md §5.1 to §5.3 and §8, end to end).

The router's property test (tests/bridge/shared/test_router.py) checks shared mode's id mapping
alone. This one runs the daemon in this process with the example server as its child, on a Unix
socket, and lets Hypothesis write what two to four clients send and in what order:

- calls whose ids collide between clients (numbers and strings, the same value as both types),
  progress tokens that collide too, 2026-07-28 calls, ``server/discover`` and
  ``subscriptions/listen`` (whose notifications carry the client's id);
- cancellations of a client's own requests and of ids it never sent, and an id sent again while
  it may still be in flight;
- ``initialize``, ``ping``, unknown methods, notifications, replies to requests nobody made, and
  lines that are not JSON-RPC.

Each client then ends its side and reads to the end, or vanishes at once without reading. Each
runs under one of :data:`SETTINGS`: default limits, tight ones, a shared child that crashes every
few requests, and both.

The invariant, for every client that stayed:

- each request gets exactly one reply per time it was sent (at most one once cancelled), with its
  id as sent, value and type;
- calls get their own results, or an error the setting allows;
- each bad line gets exactly one error;
- every progress and subscription notification names one of the client's own tokens or
  subscriptions, as many as the child sent for it;
- nothing else arrives.

And for the daemon: nothing logged with a traceback or at ERROR, no child wrote junk, the shared
child restarted only if made to crash, a client arriving afterwards is served, and once every
client has gone no request is left in flight, no connection open and no child of a connection's
left running.

Per connection with a crashing child, the child's exit ends its connection, and what the client
wrote after may go unanswered (docs/design.md §5.1): there everything holds at most once
(:func:`daemon_fuzzing.cut_short`).

A second test stops the daemon gracefully before a line Hypothesis picks: what a client wrote once
the bridge stopped reading may go unanswered (docs/design.md §5.1), so everything above holds at
most once, a call may get ``-32000`` instead, and once the daemon has returned no child is left.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
from daemon_fuzzing import (
    EXAMPLE_DEADLINE,
    MODES,
    SETTINGS,
    Expected,
    Script,
    Setting,
    check,
    check_left_clean,
    cut_short,
    fuzzed_daemon,
    lines_of,
    scripts,
)
from fuzzing import fuzz_settings, run_logged
from hypothesis import given
from hypothesis import strategies as st

from bridge import Limits

from conftest import LineClient, poll, result_text


async def run_clients(
    address: str,
    scripts: list[Script],
    order: list[int],
    errors: frozenset[int],
    stop: Callable[[], object] | None = None,
    stop_at: int = 0,
    *,
    cut: bool = False,
) -> None:
    """Connect a client per script, write their lines in ``order`` (a client's number per line),
    end each, read each that stayed to its end, and check what it got.

    With ``stop``, call it before the line at ``stop_at`` in ``order``: the bridge may then close
    a connection before its client is done writing (what it writes after is dropped here), as it
    may with ``cut`` (:func:`daemon_fuzzing.cut_short`).
    """
    cut = cut or stop is not None
    expected = [Expected() for _ in scripts]
    lines = [lines_of(number, script, expected[number]) for number, script in enumerate(scripts)]
    clients = [await LineClient.open(address) for _ in scripts]
    received: list[list[dict[str, Any]]] = [[] for _ in scripts]
    ignored = (trio.BrokenResourceError, trio.ClosedResourceError) if cut else ()

    async def read(number: int) -> None:
        received[number] = await clients[number].receive_until_eof()

    async def write(number: int, line: bytes | None) -> None:
        with contextlib.suppress(*ignored):
            if line is None:
                await clients[number].send_eof()
            else:
                await clients[number].send_raw(line)

    async with trio.open_nursery() as nursery:
        for number, script in enumerate(scripts):
            if not script.vanish:
                nursery.start_soon(read, number)
        pending = [iter(client_lines) for client_lines in lines]
        for index, number in enumerate(order):
            if stop is not None and index == stop_at:
                stop()
            line = next(pending[number], None)
            if line is not None:
                await write(number, line)
        if stop is not None and stop_at >= len(order):
            stop()
        for number, script in enumerate(scripts):
            for line in pending[number]:  # what the order left unsent
                await write(number, line)
            if script.vanish:
                await clients[number].aclose()
            else:
                await write(number, None)
    for number, script in enumerate(scripts):
        if not script.vanish:
            check(number, expected[number], received[number], errors, cut_short=cut)
            await clients[number].aclose()


async def served(address: str, errors: frozenset[int]) -> None:
    """A client arriving afterwards gets its echo, or one of ``errors`` (a timeout while the child
    starts, the child's crash)."""
    client = await LineClient.open(address)
    reply = await client.call("after", "echo", text="served")
    if not errors or "result" in reply:
        assert result_text(reply) == "served", reply
    else:
        assert reply["error"]["code"] in errors, reply
    await client.aclose()


def draw_order(data: st.DataObject, scripts: list[Script]) -> list[int]:
    """The order of every client's lines: a client's number per line."""
    total = sum(len(script.kinds) for script in scripts)
    return data.draw(
        st.lists(st.integers(0, len(scripts) - 1), min_size=total, max_size=total), label="order"
    )


def run_on_a_socket(main: Callable[[str], Awaitable[None]]) -> None:
    """Run ``main(address)``, a Unix socket address in a directory of its own, as
    :func:`fuzzing.run_logged` does."""
    with tempfile.TemporaryDirectory(prefix="mb-", dir="/tmp") as directory:
        run_logged(main, f"unix:{directory}/s.sock")


@pytest.mark.parametrize(("child_mode", "setting"), MODES)
@fuzz_settings(share=0.5)
@given(scripts=st.lists(scripts, min_size=2, max_size=4), data=st.data())
def test_any_clients_messages_get_exactly_their_own_replies_and_leave_nothing_behind(
    child_mode: str, setting: Setting, scripts: list[Script], data: st.DataObject
) -> None:
    order = draw_order(data, scripts)

    async def main(address: str) -> None:
        with trio.fail_after(EXAMPLE_DEADLINE):
            async with fuzzed_daemon(setting, child_mode, address) as daemon:
                await run_clients(
                    daemon.addresses[0], scripts, order, setting.errors, cut=cut_short(child_mode, setting)
                )
                await served(daemon.addresses[0], setting.errors)
                children_left = 1 if child_mode == "shared" else 0
                await poll(
                    lambda: (
                        (daemon.statistics().connections, daemon.statistics().children) == (0, children_left)
                    )
                )
                check_left_clean(daemon, setting)

    run_on_a_socket(main)


# A stop drains for this long at most: every call here is done in well under a second.
QUICK_DRAIN = Limits(drain_timeout=2.0)


@pytest.mark.parametrize("child_mode", ["shared", "per-connection"])
@fuzz_settings(share=0.5)
@given(scripts=st.lists(scripts, min_size=2, max_size=4), data=st.data())
def test_a_graceful_stop_amid_any_clients_messages_answers_each_request_at_most_once_and_stops_every_child(
    child_mode: str, scripts: list[Script], data: st.DataObject
) -> None:
    order = draw_order(data, scripts)
    stop_at = data.draw(st.integers(0, len(order)), label="stop at")

    async def main(address: str) -> None:
        with trio.fail_after(EXAMPLE_DEADLINE):
            async with fuzzed_daemon(SETTINGS[0], child_mode, address, QUICK_DRAIN) as daemon:
                await run_clients(daemon.addresses[0], scripts, order, frozenset(), daemon.stop, stop_at)
        assert daemon.statistics().children == 0

    run_on_a_socket(main)
