"""Admission to the shared child (bridge/_shared/admission.py), over a real socket and child."""

from __future__ import annotations

import sys

import trio
import trio.testing

from bridge._shared.handshake import HANDSHAKE_TIMEOUT

from conftest import LineClient, example_server, initialize, poll, running_bridge

# Well under HANDSHAKE_TIMEOUT: a later initialize must not wait that out to be answered.
TIMEOUT = 10
assert TIMEOUT < HANDSHAKE_TIMEOUT


async def test_a_clients_initialize_read_with_the_one_it_waits_for_is_answered_from_that_handshake(sock_dir):
    # The first initialize is the handshake the bridge owns; the second, read in the same batch,
    # waits for its result. Found by tests/e2e/test_fuzz_daemon.py: the first was held back until
    # the second was admitted, so both waited HANDSHAKE_TIMEOUT and the second got an error.
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(), [f"unix:{sock_dir}/s.sock"], child_mode="shared"
        ) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            await client.send(initialize(1), initialize(2))
            first, second = await client.receive(), await client.receive()
            await client.aclose()
    assert (first["id"], second["id"]) == (1, 2)
    assert first["result"] == second["result"]
    assert first["result"]["protocolVersion"] == "2025-06-18"


# A child that reads the first client's initialize, then exits at the next line it reads.
EXITS_AT_SECOND_LINE = (
    sys.executable,
    "-c",
    "import sys; sys.stdin.readline(); sys.stdin.readline(); sys.exit(3)",
)


async def test_an_initialize_waiting_for_a_handshake_whose_child_exits_is_answered_at_once(sock_dir):
    # Found by tests/e2e/test_fuzz_daemon.py: the waiting client was answered only after
    # HANDSHAKE_TIMEOUT, and a client that left meanwhile held its connection open that long.
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            EXITS_AT_SECOND_LINE, [f"unix:{sock_dir}/s.sock"], child_mode="shared"
        ) as daemon:
            first, later = [await LineClient.open(daemon.addresses[0]) for _ in range(2)]
            await first.send(initialize(1))
            await poll(lambda: daemon.statistics().requests_in_flight == 1)  # at the child
            await later.send(initialize(2))
            await trio.testing.wait_all_tasks_blocked()  # the later one waits for the first
            await first.send({"jsonrpc": "2.0", "method": "notifications/initialized"})  # the child exits
            first_reply, later_reply = await first.receive(), await later.receive()
    assert (first_reply["id"], first_reply["error"]["data"]["reason"]) == (1, "child-exited")
    assert (later_reply["id"], later_reply["error"]["data"]["reason"]) == (2, "handshake-failed")
