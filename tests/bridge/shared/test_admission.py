"""Admission to the shared child (bridge/_shared/admission.py), over a real socket and child."""

from __future__ import annotations

import trio

from bridge._shared.handshake import HANDSHAKE_TIMEOUT

from conftest import LineClient, example_server, request, running_bridge

# Well under HANDSHAKE_TIMEOUT: a later initialize must not wait that out to be answered.
TIMEOUT = 10
assert TIMEOUT < HANDSHAKE_TIMEOUT


def initialize(request_id: int) -> dict[str, object]:
    params = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    }
    return request(request_id, "initialize", params)


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
