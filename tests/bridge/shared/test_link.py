"""The shared child's side (bridge/_shared/link.py): where what the child writes goes."""

from __future__ import annotations

import sys

import trio

from conftest import MODERN_META, LineClient, initialize, poll, request, running_bridge

TIMEOUT = 10

# A child that answers every request with an empty result, except a subscriptions/listen, which it
# holds; at its next ping it acknowledges that subscription (tagged with its id, as the bridge sent
# it), then answers the ping.
HOLDS_A_SUBSCRIPTION = (
    sys.executable,
    "-c",
    """
import json, sys
held = None
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    if message["method"] == "subscriptions/listen":
        held = message["id"]
        continue
    if message["method"] == "ping" and held is not None:
        tag = {"io.modelcontextprotocol/subscriptionId": held}
        ack = {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {"_meta": tag}}
        print(json.dumps(ack), flush=True)
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {}}), flush=True)
""",
)


async def test_a_notification_of_a_subscription_that_is_over_reaches_no_client(sock_dir):
    # Found by tests/e2e/test_fuzz_daemon.py: it went to every legacy client, carrying the
    # bridge's wire id, as a notification that belongs to no request would.
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            HOLDS_A_SUBSCRIPTION, [f"unix:{sock_dir}/s.sock"], child_mode="shared"
        ) as daemon:
            legacy, modern = [await LineClient.open(daemon.addresses[0]) for _ in range(2)]
            await legacy.send(initialize(1))
            assert (await legacy.receive())["id"] == 1
            listen = {"notifications": {"resourceSubscriptions": ["example://a"]}, "_meta": MODERN_META}
            await modern.send(request("sub", "subscriptions/listen", listen))
            await poll(lambda: daemon.statistics().requests_in_flight == 1)  # at the child
            await modern.send(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "sub"}}
            )
            await poll(lambda: daemon.statistics().requests_in_flight == 0)  # over
            await legacy.send(request(2, "ping"))  # the child acknowledges the subscription first
            assert await legacy.receive() == {"jsonrpc": "2.0", "id": 2, "result": {}}
            await modern.send(request(3, "ping", {"_meta": MODERN_META}))
            assert await modern.receive() == {"jsonrpc": "2.0", "id": 3, "result": {}}
