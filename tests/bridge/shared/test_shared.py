"""Shared mode: one supervised child for every client, with real children and real sockets."""

from __future__ import annotations

import logging
import signal
import socket
import struct
from typing import Any

import pytest
import trio

from bridge import Limits
from bridge._child.supervisor import RestartPolicy

from conftest import (
    LineClient,
    bridge_process,
    call,
    example_server,
    request,
    result_text,
    running_bridge,
)

TIMEOUT = 20
FAST_RESTARTS = RestartPolicy(floor=0.01, cap=0.05, crash_limit=3, crash_window=10)


def initialize(request_id: Any, version: str) -> dict[str, Any]:
    return request(
        request_id,
        "initialize",
        {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
    )


def progress_call(request_id: Any, token: Any, steps: int) -> dict[str, Any]:
    return request(
        request_id,
        "tools/call",
        {"name": "progress", "arguments": {"steps": steps}, "_meta": {"progressToken": token}},
    )


async def shared(sock_dir, *flags: str, **options: Any):  # type: ignore[no-untyped-def]
    return running_bridge(example_server(*flags), [f"unix:{sock_dir}/s.sock"], child_mode="shared", **options)


async def test_clients_share_one_child_and_each_gets_only_its_own_replies_with_its_own_ids(
    sock_dir,
):
    with trio.fail_after(TIMEOUT):
        async with await shared(sock_dir) as daemon:
            clients = [await LineClient.open(daemon.addresses[0]) for _ in range(3)]
            for number, client in enumerate(clients):
                await client.send(
                    call(1, "echo", text=f"{number}-int"),
                    call("1", "echo", text=f"{number}-str"),
                    call("x:1", "echo", text=f"{number}-colon"),
                )
            for number, client in enumerate(clients):
                replies = [await client.receive() for _ in range(3)]
                assert [(reply["id"], result_text(reply)) for reply in replies] == [
                    (1, f"{number}-int"),
                    ("1", f"{number}-str"),
                    ("x:1", f"{number}-colon"),
                ]
            assert daemon.statistics().children == 1


async def test_a_later_legacy_client_is_answered_from_the_handshake_the_bridge_owns(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with await shared(sock_dir) as daemon:
            first = await LineClient.open(daemon.addresses[0])
            await first.send(
                initialize(0, "2025-06-18"), {"jsonrpc": "2.0", "method": "notifications/initialized"}
            )
            assert (await first.receive())["result"]["protocolVersion"] == "2025-06-18"
            second = await LineClient.open(daemon.addresses[0])
            await second.send(
                initialize("init", "2025-03-26"), {"jsonrpc": "2.0", "method": "notifications/initialized"}
            )
            answer = await second.receive()
            # The child would have echoed 2025-03-26: the answer came from the cached handshake.
            assert answer["id"] == "init"
            assert answer["result"]["protocolVersion"] == "2025-06-18"
            assert result_text(await second.call(1, "echo", text="ok")) == "ok"


async def test_progress_reaches_only_the_client_whose_token_it_carries(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with await shared(sock_dir) as daemon:
            a = await LineClient.open(daemon.addresses[0])
            b = await LineClient.open(daemon.addresses[0])
            await a.send(progress_call(1, "token", 2))
            await b.send(progress_call(1, "token", 3))
            for client, steps in ((a, 2), (b, 3)):
                messages = [await client.receive() for _ in range(steps + 1)]
                progress = [m["params"] for m in messages if m.get("method")]
                assert [(p["progressToken"], p["progress"]) for p in progress] == [
                    ("token", step) for step in range(1, steps + 1)
                ]
                assert messages[-1]["id"] == 1 and result_text(messages[-1]) == "done"


async def test_a_client_cannot_cancel_another_clients_request(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with await shared(sock_dir) as daemon:
            a = await LineClient.open(daemon.addresses[0])
            b = await LineClient.open(daemon.addresses[0])
            await a.send(
                request(
                    5,
                    "tools/call",
                    {"name": "sleep", "arguments": {"seconds": 0.2}, "_meta": {"progressToken": "p"}},
                )
            )
            assert (await a.receive())["method"] == "notifications/progress"
            await b.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}})
            assert result_text(await b.call(6, "echo", text="b")) == "b"
            reply = await a.receive()
            assert reply["id"] == 5 and result_text(reply) == "slept"


async def test_a_child_crash_answers_every_request_in_flight_and_the_child_is_restarted(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with await shared(sock_dir, "--crash-after", "1", restart_policy=FAST_RESTARTS) as daemon:
            a = await LineClient.open(daemon.addresses[0])
            await a.send(initialize(0, "2025-06-18"))  # the one request the child answers
            assert "result" in await a.receive()
            await a.send(call(1, "echo", text="lost"))
            crashed = await a.receive()
            assert crashed["id"] == 1 and crashed["error"]["code"] == -32000
            assert crashed["error"]["data"]["reason"] == "child-exited"
            assert crashed["error"]["data"]["returncode"] == 3
            # The restarted child got the handshake replayed (its one answer); the next request
            # crashes it again, and so on: the client is served by each new child in turn.
            await a.send(call(2, "echo", text="again"))
            assert (await a.receive())["error"]["data"]["reason"] in ("child-exited", "child-restarting")


async def test_a_child_that_keeps_crashing_makes_the_daemon_exit_75(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--child",
            "shared",
            "--restart-limit",
            "1",
            "--listen",
            f"unix:{sock_dir}/s.sock",
            "--",
            *example_server("--crash-after", "0"),
        ) as bridge:
            client = await LineClient.open(bridge.addresses[0])
            for attempt in range(2):  # each request crashes the child it reaches
                await client.send(call(attempt, "echo", text="x"))
                reply = await client.receive()
                assert reply["id"] == attempt and reply["error"]["code"] == -32000, reply
            assert await bridge.process.wait() == 75, bridge.log()
    assert "crash-looping" in bridge.log()


async def test_a_client_that_never_reads_is_dropped_without_stalling_the_child_or_others(sock_dir):
    limits = Limits(client_queue_bytes=1 << 20)
    with trio.fail_after(TIMEOUT):
        async with await shared(sock_dir, limits=limits) as daemon:
            stuck = await LineClient.open(daemon.addresses[0])
            await stuck.send(*[call(number, "blob", size=512 << 10) for number in range(16)])
            other = await LineClient.open(daemon.addresses[0])
            for number in range(40):  # served throughout, by the same child
                assert result_text(await other.call(number, "echo", text="x")) == "x"
            assert await stuck.receive_until_eof() is not None
            assert daemon.statistics().connections == 1


async def test_auto_mode_shares_a_modern_server_and_gives_a_legacy_one_a_child_per_connection(
    sock_dir,
):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [f"unix:{sock_dir}/a.sock"], child_mode="auto") as daemon:
            assert daemon.mode == "shared"
        async with running_bridge(
            example_server("--era", "legacy"), [f"unix:{sock_dir}/b.sock"], child_mode="auto"
        ) as daemon:
            assert daemon.mode == "per-connection"
            client = await LineClient.open(daemon.addresses[0])
            assert result_text(await client.call(1, "echo", text="legacy")) == "legacy"


async def test_a_graceful_stop_in_shared_mode_finishes_requests_and_stops_the_child(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--child", "shared", "--listen", f"unix:{sock_dir}/s.sock", "--", *example_server()
        ) as bridge:
            client = await LineClient.open(bridge.addresses[0])
            await client.send(
                request(
                    1,
                    "tools/call",
                    {"name": "sleep", "arguments": {"seconds": 0.3}, "_meta": {"progressToken": 1}},
                )
            )
            assert (await client.receive())["method"] == "notifications/progress"
            bridge.process.send_signal(signal.SIGTERM)
            replies = await client.receive_until_eof()
            assert await bridge.process.wait() == 0, bridge.log()
    assert [result_text(reply) for reply in replies] == ["slept"]


async def test_at_the_drain_deadline_in_shared_mode_every_clients_running_request_gets_shutting_down(
    sock_dir,
):
    limits = Limits(drain_timeout=0.3, stop_stdin_timeout=0.2, stop_term_timeout=1)
    slow = [
        request(
            number,
            "tools/call",
            {"name": "sleep", "arguments": {"seconds": 30}, "_meta": {"progressToken": 1}},
        )
        for number in (1, 2)
    ]
    with trio.fail_after(TIMEOUT):
        async with await shared(sock_dir, limits=limits) as daemon:
            clients = [await LineClient.open(daemon.addresses[0]) for _ in slow]
            for client, message in zip(clients, slow, strict=True):
                await client.send(message)
            # the child serves one request at a time: the second waits behind the first
            assert (await clients[0].receive())["method"] == "notifications/progress"
            daemon.stop()
            ended = [await client.receive_until_eof() for client in clients]
    for number, replies in enumerate(ended, start=1):
        assert [reply["id"] for reply in replies if "id" in reply] == [number]
        assert replies[0]["error"]["data"]["reason"] == "shutting-down"


async def test_a_request_over_the_request_timeout_gets_32001_in_shared_mode_too(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with await shared(sock_dir, limits=Limits(request_timeout=1.0)) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            await client.send(
                request(
                    "slow",
                    "tools/call",
                    {"name": "sleep", "arguments": {"seconds": 1.5}, "_meta": {"progressToken": 1}},
                )
            )
            assert (await client.receive())["method"] == "notifications/progress"
            timed_out = await client.receive()
            after = await client.call("after", "echo", text="next")  # the late "slept" is dropped
    assert timed_out["id"] == "slow" and timed_out["error"]["code"] == -32001
    assert timed_out["error"]["data"] == {"reason": "request-timeout", "timeout": 1.0}
    assert after["id"] == "after" and result_text(after) == "next"


async def test_with_a_lazy_start_the_shared_child_starts_on_the_first_connection(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with await shared(sock_dir, start="lazy") as daemon:
            assert daemon.statistics().children == 0  # listening, and nothing started yet
            client = await LineClient.open(daemon.addresses[0])
            assert result_text(await client.call(1, "echo", text="first")) == "first"
            assert daemon.statistics().children == 1


async def test_with_a_lazy_start_a_child_that_cannot_start_refuses_that_connection_only(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            ("/nonexistent/server",), [f"unix:{sock_dir}/s.sock"], child_mode="shared", start="lazy"
        ) as daemon:
            for attempt in range(2):  # each connection tries again, and is told why
                client = await LineClient.open(daemon.addresses[0])
                await client.send(call(attempt, "echo", text="x"))
                (reply,) = await client.receive_until_eof()
                assert reply["error"]["data"]["reason"] == "child-start-failed"


# -- routing policies, end to end through a real child ---------------------------------------


async def test_a_request_from_the_child_goes_to_the_only_client_with_requests_in_flight(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with await shared(sock_dir) as daemon:
            asker = await LineClient.open(daemon.addresses[0])
            idle = await LineClient.open(daemon.addresses[0])
            await asker.send(call("ask", "ask_client", method="roots/list"))
            question = await asker.receive()
            assert question["method"] == "roots/list" and type(question["id"]) is int
            await asker.send(
                {"jsonrpc": "2.0", "id": question["id"], "result": {"roots": [{"uri": "file:///work"}]}}
            )
            answer = await asker.receive()
            assert answer["id"] == "ask"
            assert result_text(answer) == '{"roots": [{"uri": "file:///work"}]}'
            # The idle client saw none of it: its next message is its own reply.
            assert result_text(await idle.call(1, "echo", text="idle")) == "idle"


async def test_a_request_from_the_child_with_no_single_client_to_route_to_is_refused(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with await shared(sock_dir) as daemon:
            asker = await LineClient.open(daemon.addresses[0])
            other = await LineClient.open(daemon.addresses[0])
            await asker.send(call("ask", "ask_client", method="roots/list"))
            await other.send(call("busy", "echo", text="also in flight"))
            # Both clients have a request in flight when the child asks: nobody is asked, and the
            # child gets -32601, which its tool reports.
            answer = await asker.receive()
            assert answer["id"] == "ask"
            assert '"reason": "no-client-to-route-to"' in result_text(answer)
            assert result_text(await other.receive()) == "also in flight"


async def test_notifications_that_belong_to_no_request_go_to_every_legacy_client_only(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with await shared(sock_dir) as daemon:
            legacy = [await LineClient.open(daemon.addresses[0]) for _ in range(2)]
            for number, client in enumerate(legacy):
                await client.send(initialize(f"init{number}", "2025-06-18"))
                assert "result" in await client.receive()
            modern = await LineClient.open(daemon.addresses[0])
            await legacy[0].send(call("n", "notify", method="notifications/tools/list_changed"))
            for client in legacy:
                note = await client.receive()
                assert note == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}}
            assert result_text(await legacy[0].receive()) == "sent"
            assert result_text(await modern.call(1, "echo", text="modern")) == "modern"


async def test_subscription_notifications_reach_only_the_subscriber_with_its_own_id(sock_dir):
    listen_params = {
        "notifications": {"resourceSubscriptions": ["example://updated"]},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        },
    }
    with trio.fail_after(TIMEOUT):
        async with await shared(sock_dir) as daemon:
            a = await LineClient.open(daemon.addresses[0])
            b = await LineClient.open(daemon.addresses[0])
            await a.send(request(1, "subscriptions/listen", listen_params))
            await b.send(request("1", "subscriptions/listen", listen_params))
            for client, own_id in ((a, 1), (b, "1")):
                ack, update, end = [await client.receive() for _ in range(3)]
                tag = "io.modelcontextprotocol/subscriptionId"
                assert ack["method"] == "notifications/subscriptions/acknowledged"
                assert update["method"] == "notifications/resources/updated"
                for message in (ack["params"], update["params"], end["result"]):
                    assert message["_meta"][tag] == own_id
                    assert type(message["_meta"][tag]) is type(own_id)
                assert end["id"] == own_id


async def stats(client: LineClient, request_id: Any) -> dict[str, Any]:
    import json

    return json.loads(result_text(await client.call(request_id, "stats")))  # type: ignore[no-any-return]


async def test_a_client_that_disconnects_has_its_requests_cancelled_at_the_child_and_late_replies_dropped(
    sock_dir, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.INFO, logger="bridge")
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), ["tcp:127.0.0.1:0"], child_mode="shared") as daemon:
            leaver = await LineClient.open(daemon.addresses[0])
            await leaver.send(
                request(
                    1,
                    "tools/call",
                    {"name": "sleep", "arguments": {"seconds": 0.3}, "_meta": {"progressToken": "t"}},
                )
            )
            assert (await leaver.receive())["method"] == "notifications/progress"
            # A reset, not an EOF: an EOF is a half-close, after which replies are still owed.
            leaver.stream.socket.setsockopt(
                socket.SOL_SOCKET,
                socket.SO_LINGER,  # type: ignore[attr-defined]
                struct.pack("ii", 1, 0),
            )
            await leaver.aclose()
            stayer = await LineClient.open(daemon.addresses[0])
            # The child answers in order: the leaver's late "slept" comes first and must not
            # reach anyone; then this client's own reply, with the cancellation the child got.
            seen = await stats(stayer, "mine")
    assert len(seen["cancelled"]) == 1 and type(seen["cancelled"][0]) is int  # a wire id
    # A client going away is normal operation: one INFO line, nothing louder.
    gone = [record for record in caplog.records if "disconnected: connection lost" in record.getMessage()]
    assert [record.levelno for record in gone] == [logging.INFO]
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING]


async def test_after_a_restart_legacy_clients_carry_on_because_the_bridge_replays_the_handshake(
    sock_dir,
):
    crash_once = sock_dir / "crashed"
    with trio.fail_after(TIMEOUT):
        async with await shared(
            sock_dir, "--crash-after", "1", "--crash-once-file", str(crash_once), restart_policy=FAST_RESTARTS
        ) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            await client.send(
                initialize(0, "2025-06-18"), {"jsonrpc": "2.0", "method": "notifications/initialized"}
            )
            assert "result" in await client.receive()
            await client.send(call(1, "echo", text="crashes the child"))
            assert (await client.receive())["error"]["data"]["reason"] == "child-exited"
            # No new initialize from the client: the new child got the cached one from the bridge.
            assert await stats(client, 2) == {"initialize": 1, "cancelled": [], "calls": {"stats": 1}}
            assert daemon.statistics().children == 1
    assert crash_once.exists()


async def test_a_modern_only_child_serves_modern_clients_and_refuses_legacy_ones_clearly(sock_dir):
    modern_meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    with trio.fail_after(TIMEOUT):
        async with await shared(sock_dir, "--era", "modern") as daemon:
            modern = await LineClient.open(daemon.addresses[0])
            await modern.send(
                request(1, "tools/call", {"name": "echo", "arguments": {"text": "m"}, "_meta": modern_meta})
            )
            reply = await modern.receive()
            assert result_text(reply) == "m" and reply["result"]["resultType"] == "complete"
            legacy = await LineClient.open(daemon.addresses[0])
            await legacy.send(initialize(0, "2025-06-18"))
            refused = await legacy.receive()
    assert refused["error"]["code"] == -32022
    assert refused["error"]["data"]["supported"] == ["2026-07-28"]


async def test_in_auto_mode_legacy_clients_get_their_own_child_and_modern_clients_share_one(sock_dir):
    modern_meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [f"unix:{sock_dir}/s.sock"], child_mode="auto") as daemon:
            assert daemon.mode == "shared"
            modern = [await LineClient.open(daemon.addresses[0]) for _ in range(2)]
            for number, client in enumerate(modern):
                await client.send(
                    request(
                        1,
                        "tools/call",
                        {"name": "echo", "arguments": {"text": str(number)}, "_meta": modern_meta},
                    )
                )
                assert result_text(await client.receive()) == str(number)
            legacy = [await LineClient.open(daemon.addresses[0]) for _ in range(2)]
            for client in legacy:
                await client.send(initialize(0, "2025-06-18"))
                assert "result" in await client.receive()
                own = {"initialize": 1, "cancelled": [], "calls": {"stats": 1}}
                assert await stats(client, 1) == own  # its own
            one_for_all = {"initialize": 0, "cancelled": [], "calls": {"echo": 2, "stats": 1}}
            assert await stats(modern[0], 2) == one_for_all  # the shared child
            assert daemon.statistics().children == 3  # the shared one and two of their own


async def test_legacy_clients_are_told_and_disconnected_when_the_restarted_child_refuses_the_handshake(
    sock_dir,
):
    crash_once = sock_dir / "crashed"
    with trio.fail_after(TIMEOUT):
        async with await shared(
            sock_dir,
            "--crash-after",
            "1",
            "--crash-once-file",
            str(crash_once),
            "--modern-after-crash",
            restart_policy=FAST_RESTARTS,
        ) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            await client.send(initialize(0, "2025-06-18"))
            assert "result" in await client.receive()
            await client.send(call(1, "echo", text="crashes the child"))
            # The new child serves only 2026-07-28: the replayed initialize is refused, so this
            # legacy client cannot be carried over: it gets its error, then the connection ends.
            replies = await client.receive_until_eof()
            assert [reply["error"]["data"]["reason"] for reply in replies] == ["child-exited"]
            assert daemon.statistics().connections == 0
