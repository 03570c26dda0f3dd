"""Per-tool scopes in shared mode: clients with different tokens on ONE child each get their due.

The clients' channels are in-memory streams whose :class:`~channels.PeerInfo` carries the
:class:`~channels.Principal` an OAuth listener would have put there; the shared child, its
supervisor, the router and the child process are real. The child's ``stats`` tool counts the
``tools/call`` requests it received: a refused call never reaches it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from bridge import ChildSpec, Limits, ToolScopes
from bridge._shared.mux import SharedChild
from channels import PeerInfo, Principal, StreamChannel

from conftest import call, example_server, request, result_text

TIMEOUT = 20
POLICY = ToolScopes({"spawn_*": ["mcp:admin"]})


def oauth_peer(subject: str, *scopes: str) -> PeerInfo:
    principal = Principal("http://127.0.0.1:9000", subject, "cli", frozenset(scopes))
    return PeerInfo("http", "127.0.0.1:50000", credential=principal.label, principal=principal)


@asynccontextmanager
async def one_shared_child(*peers: PeerInfo) -> AsyncIterator[tuple[SharedChild, list[StreamChannel]]]:
    """One shared example child, and a client end for each peer, served as that peer."""
    shared = SharedChild(
        ChildSpec(example_server(), name="shared"), Limits(), trio.Event(), tool_scopes=POLICY
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(shared.run)
        clients = []
        async with trio.open_nursery() as serving:
            for peer in peers:
                left, right = trio.testing.memory_stream_pair()
                served = StreamChannel(right, peer=peer)

                async def serve(channel: StreamChannel = served) -> None:
                    await shared.serve(channel)
                    await channel.aclose()

                serving.start_soon(serve)
                clients.append(StreamChannel(left, peer=PeerInfo("memory")))
            yield shared, clients
            for client in clients:
                await client.aclose()
        shared.stop()


def names(reply: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in reply["result"]["tools"]]


async def test_two_clients_with_different_scopes_on_one_child_each_see_and_call_only_what_they_may() -> None:
    with trio.fail_after(TIMEOUT):
        async with one_shared_child(oauth_peer("admin", "mcp:admin"), oauth_peer("guest")) as (
            shared,
            clients,
        ):
            admin, guest = clients
            # Both lists reach the one child together; its replies are filtered per client.
            await admin.send(request("list", "tools/list"))
            await guest.send(request("list", "tools/list"))
            admin_sees, guest_sees = names(await admin.receive()), names(await guest.receive())
            assert "spawn_grandchild" in admin_sees
            assert "spawn_grandchild" not in guest_sees
            assert set(admin_sees) - set(guest_sees) == {"spawn_grandchild"}

            await guest.send(call(1, "spawn_grandchild"))
            refusal = await guest.receive()
            assert refusal["id"] == 1
            assert refusal["error"]["code"] == -31005
            assert refusal["error"]["data"] == {
                "reason": "insufficient-scope",
                "tool": "spawn_grandchild",
                "scope": "mcp:admin",
                "detail": "calling this tool needs the scope mcp:admin, which the caller's access token lacks",
            }
            await admin.send(call(1, "spawn_grandchild"))
            assert int(result_text(await admin.receive())) > 0

            await guest.send(call(2, "stats"))
            seen = json.loads(result_text(await guest.receive()))
            # One child served both: it got the admin's call and the stats call, never the guest's.
            assert seen["calls"] == {"spawn_grandchild": 1, "stats": 1}
            assert shared.clients == 2


async def test_a_client_without_an_oauth_token_on_the_shared_child_holds_no_scope() -> None:
    with trio.fail_after(TIMEOUT):
        async with one_shared_child(PeerInfo("unix", "/run/mcp.sock", uid=1000)) as (_, clients):
            (client,) = clients
            await client.send_many(
                [request(1, "tools/list"), call(2, "spawn_grandchild"), call(3, "echo", text="ok")]
            )
            # The refusal is the bridge's, at once; the others are the child's: sort them by id.
            replies = sorted([await client.receive() for _ in range(3)], key=lambda reply: reply["id"])
            listed, refused, echoed = replies
            assert "spawn_grandchild" not in names(listed) and "echo" in names(listed)
            assert refused["error"]["data"]["reason"] == "insufficient-scope"
            assert result_text(echoed) == "ok"
