"""Per-tool scopes on a per-connection relay, with the real example child and OAuth principals.

The client's channel is an in-memory stream whose :class:`~channels.PeerInfo` carries the
:class:`~channels.Principal` an OAuth listener would have put there; everything past it is real:
the relay, the child process, its stdin and stdout. The child's own ``stats`` tool counts the
``tools/call`` requests it received, which proves that a refused one never reached it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from bridge import ChildSpec, Limits, Relay, ToolScopes, open_child
from bridge._relay.ledger import Ledger
from channels import PeerInfo, Principal, StreamChannel

from conftest import call, example_server, request, result_text

TIMEOUT = 20
# spawn_grandchild is the example server's most dangerous tool: it starts a process.
POLICY = ToolScopes({"spawn_*": ["mcp:admin"], "stats": ["mcp:read"]})


def oauth_peer(*scopes: str) -> PeerInfo:
    principal = Principal("http://127.0.0.1:9000", "alice", "cli", frozenset(scopes))
    return PeerInfo("http", "127.0.0.1:50000", credential=principal.label, principal=principal)


@asynccontextmanager
async def relayed(peer: PeerInfo, policy: ToolScopes = POLICY) -> AsyncIterator[StreamChannel]:
    """A client end relayed to a real example child; the relay sees ``peer`` as its client."""
    left, right = trio.testing.memory_stream_pair()
    client = StreamChannel(left, peer=PeerInfo("memory"))
    served = StreamChannel(right, peer=peer)
    async with open_child(ChildSpec(example_server(), name="scopes"), Limits()) as child:
        async with trio.open_nursery() as nursery:
            relay = Relay(served, child, Limits(), tool_scopes=policy)

            async def run() -> None:
                await relay.run()
                await served.aclose()

            nursery.start_soon(run)
            yield client
            await client.aclose()


async def tool_names(client: StreamChannel, request_id: Any) -> list[str]:
    await client.send(request(request_id, "tools/list"))
    reply = await client.receive()
    assert reply["id"] == request_id
    return [tool["name"] for tool in reply["result"]["tools"]]


async def calls_seen(client: StreamChannel) -> dict[str, int]:
    await client.send(call("stats", "stats"))
    return json.loads(result_text(await client.receive()))["calls"]  # type: ignore[no-any-return]


async def test_a_caller_without_the_scope_is_refused_and_the_child_never_receives_the_call() -> None:
    with trio.fail_after(TIMEOUT):
        async with relayed(oauth_peer("mcp:read")) as client:
            await client.send(call(1, "spawn_grandchild"))
            refusal = await client.receive()
            assert refusal["id"] == 1
            assert refusal["error"]["code"] == -31005
            assert refusal["error"]["data"]["reason"] == "insufficient-scope"
            assert refusal["error"]["data"]["tool"] == "spawn_grandchild"
            assert refusal["error"]["data"]["scope"] == "mcp:admin"
            await client.send(call(2, "echo", text="still served"))
            assert result_text(await client.receive()) == "still served"
            assert await calls_seen(client) == {"echo": 1, "stats": 1}


async def test_a_caller_sees_in_tools_list_only_the_tools_its_scopes_allow() -> None:
    with trio.fail_after(TIMEOUT):
        async with relayed(oauth_peer("mcp:read")) as client:
            names = await tool_names(client, "list")
            assert "stats" in names and "echo" in names
            assert "spawn_grandchild" not in names
        async with relayed(oauth_peer("mcp:read", "mcp:admin")) as client:
            assert "spawn_grandchild" in await tool_names(client, "list")


async def test_a_caller_with_the_scope_reaches_the_tool() -> None:
    with trio.fail_after(TIMEOUT):
        async with relayed(oauth_peer("mcp:read", "mcp:admin")) as client:
            await client.send(call(1, "spawn_grandchild"))
            assert int(result_text(await client.receive())) > 0
            assert await calls_seen(client) == {"spawn_grandchild": 1, "stats": 1}


async def test_a_caller_without_an_oauth_token_holds_no_scope_and_sees_only_unguarded_tools() -> None:
    with trio.fail_after(TIMEOUT):
        async with relayed(PeerInfo("unix", "/run/mcp.sock", uid=1000)) as client:
            names = await tool_names(client, 1)
            assert "echo" in names
            assert "stats" not in names and "spawn_grandchild" not in names
            await client.send(call(2, "stats"))
            assert (await client.receive())["error"]["data"]["scope"] == "mcp:read"


async def test_a_reused_id_after_a_tools_list_is_not_filtered_as_one() -> None:
    # The id of a tools/list whose reply went out is free again: a tools/call with it is answered
    # with its own result, untouched by the tools/list filter.
    with trio.fail_after(TIMEOUT):
        async with relayed(oauth_peer("mcp:read")) as client:
            await tool_names(client, 5)
            await client.send(call(5, "echo", text="plain"))
            assert result_text(await client.receive()) == "plain"


def test_the_book_of_tools_list_requests_stays_bounded_when_their_replies_never_come() -> None:
    # A client that sends tools/list and cancels each one leaves entries no reply will take.
    ledger = Ledger(max_in_flight=4, request_timeout=None)
    for number in range(100):
        ledger.opened(number, True)
        ledger.in_flight.cancel(number)
    assert len(ledger.tool_lists) <= 2 * 4
    ledger.opened("live", True)
    assert ledger.lists_tools("live") and not ledger.lists_tools("live")  # asked once per reply
