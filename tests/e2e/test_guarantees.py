"""docs/design.md §5, guarantee by guarantee, over real sockets with real child processes.

Each test name states the guarantee it checks. The bridge runs in this process (``running_bridge``)
unless the test is about signals, where it runs as ``python -m bridge``.
"""

from __future__ import annotations

import signal
from typing import Any

import pytest
import trio

from bridge import Limits
from bridge._relay.to_client import ToClient

from conftest import (
    LineClient,
    bridge_process,
    call,
    example_server,
    poll,
    process_exists,
    request,
    result_text,
    running_bridge,
    wait_until_gone,
)

TIMEOUT = 20


def sleep_call(request_id: Any, seconds: float, token: str = "started") -> dict[str, Any]:
    """A sleep whose first progress notification tells the client the child has the request."""
    return request(
        request_id,
        "tools/call",
        {"name": "sleep", "arguments": {"seconds": seconds}, "_meta": {"progressToken": token}},
    )


async def receive_progress(client: LineClient) -> None:
    message = await client.receive()
    assert message["method"] == "notifications/progress", message


def by_id(messages: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    replies: dict[Any, dict[str, Any]] = {}
    for message in messages:
        assert "method" not in message, message
        assert message["id"] not in replies, f"two replies for id {message['id']!r}"
        replies[message["id"]] = message
    return replies


# -- 1. every request gets exactly one reply -------------------------------------------------------


async def test_every_request_gets_exactly_one_reply_when_the_child_crashes(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server("--crash-after", "2"), [f"unix:{sock_dir}/s.sock"]
        ) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            await client.send(*[call(number, "echo", text=str(number)) for number in range(1, 6)])
            replies = by_id(await client.receive_until_eof())
    assert set(replies) == {1, 2, 3, 4, 5}
    assert [result_text(replies[number]) for number in (1, 2)] == ["1", "2"]
    for number in (3, 4, 5):
        error = replies[number]["error"]
        assert error["code"] == -32000
        assert error["data"]["reason"] == "child-exited"
        assert error["data"]["returncode"] == 3


async def test_every_request_in_flight_gets_an_error_when_the_child_closes_its_stdout(sock_dir):
    limits = Limits(stop_stdin_timeout=0.2, stop_term_timeout=1)
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server("--close-stdout-after", "1"), [f"unix:{sock_dir}/s.sock"], limits=limits
        ) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            await client.send(call(1, "echo", text="a"), call(2, "echo", text="b"))
            replies = by_id(await client.receive_until_eof())
    assert result_text(replies[1]) == "a"
    assert replies[2]["error"]["code"] == -32000
    assert replies[2]["error"]["data"]["reason"] == "child-exited"


async def test_a_duplicate_in_flight_id_is_refused_and_the_original_still_answered(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [f"unix:{sock_dir}/s.sock"]) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            await client.send(sleep_call(7, 0.2))
            await receive_progress(client)
            await client.send(call(7, "echo", text="again"))
            duplicate = await client.receive()
            original = await client.receive()
    assert duplicate["id"] == 7 and duplicate["error"]["data"]["reason"] == "duplicate-id"
    assert duplicate["error"]["code"] == -32600
    assert original["id"] == 7 and result_text(original) == "slept"


async def test_requests_over_the_in_flight_limit_are_answered_with_an_error(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(), [f"unix:{sock_dir}/s.sock"], limits=Limits(max_in_flight=2)
        ) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            await client.send(sleep_call(1, 0.2, "a"), call(2, "echo", text="x"), call(3, "echo", text="y"))
            messages = [await client.receive() for _ in range(4)]
    replies = by_id([message for message in messages if "method" not in message])
    assert replies[3]["error"]["code"] == -31002
    assert replies[3]["error"]["data"] == {"reason": "too-many-requests", "limit": 2}
    assert result_text(replies[1]) == "slept" and result_text(replies[2]) == "x"


async def test_a_child_that_cannot_start_is_reported_to_the_client_by_request_id(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(("/nonexistent/server",), [f"unix:{sock_dir}/s.sock"]) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            await client.send(call("first", "echo", text="x"))
            replies = await client.receive_until_eof()
    assert [reply["id"] for reply in replies] == ["first"]
    assert replies[0]["error"]["code"] == -32000
    assert replies[0]["error"]["data"]["reason"] == "child-start-failed"
    assert "/nonexistent/server" in replies[0]["error"]["data"]["detail"]


# -- 2. only valid single-line JSON-RPC reaches a child or a client -----------------------------

BAD_LINES = [
    (b"not json\n", -32700),
    (b'{"jsonrpc":"2.0","id":1,"method":"x","params":NaN}\n', -32700),
    (b"\xff\xfe{}\n", -32700),
    (b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]\n', -32600),
    (b'{"jsonrpc":"1.0","id":2,"method":"tools/list"}\n', -32600),
    (b'{"jsonrpc":"2.0","id":null,"method":"tools/list"}\n', -32600),
]


async def test_invalid_client_input_is_answered_and_never_reaches_the_child(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [f"unix:{sock_dir}/s.sock"]) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            await client.send_raw(b"".join(line for line, _ in BAD_LINES))
            await client.send(call("last", "echo", text="ok"))
            messages = [await client.receive() for _ in range(len(BAD_LINES) + 1)]
    errors, final = messages[:-1], messages[-1]
    # The child would answer garbage with its own -32700 and no data.reason; only the bridge's
    # errors (with data.reason) arrive, one per bad line, in order, and then the real reply.
    assert [error["error"]["code"] for error in errors] == [code for _, code in BAD_LINES]
    assert all("reason" in error["error"]["data"] for error in errors)
    assert errors[4]["id"] == 2  # the id is named where it could be read
    assert final["id"] == "last" and result_text(final) == "ok"


async def test_repeated_garbage_closes_the_connection(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [f"unix:{sock_dir}/s.sock"]) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            await client.send_raw(b"garbage\n" * 20)
            replies = await client.receive_until_eof()
    assert len(replies) == Limits().max_consecutive_errors
    assert {reply["error"]["code"] for reply in replies} == {-32700}


async def test_an_over_long_client_message_is_answered_by_id_and_the_connection_closed(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(), [f"unix:{sock_dir}/s.sock"], limits=Limits(max_client_message=1024)
        ) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            await client.send(call(9, "echo", text="x" * 4000))
            replies = await client.receive_until_eof()
    assert len(replies) == 1
    assert replies[0]["id"] == 9
    assert replies[0]["error"]["code"] == -32600
    assert replies[0]["error"]["data"]["reason"] == "message-too-large"
    assert replies[0]["error"]["data"]["limit"] == 1024


async def test_junk_on_the_child_stdout_is_dropped_and_never_forwarded(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server("--junk-every", "2"), [f"unix:{sock_dir}/s.sock"]) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            await client.send(*[call(number, "echo", text=str(number)) for number in range(6)])
            replies = [await client.receive() for _ in range(6)]
            assert daemon.statistics().child_garbage_lines == 3
    assert [result_text(reply) for reply in replies] == [str(number) for number in range(6)]


async def test_a_reply_over_the_child_limit_is_answered_with_an_error_and_the_connection_goes_on(
    sock_dir,
):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(), [f"unix:{sock_dir}/s.sock"], limits=Limits(max_child_message=65536)
        ) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            too_large = await client.call("big", "blob", size=100_000)
            after = await client.call("next", "echo", text="still here")
    assert too_large["id"] == "big"
    assert too_large["error"]["code"] == -31001
    assert too_large["error"]["data"] == {"reason": "reply-too-large", "limit": 65536}
    assert result_text(after) == "still here"


# -- 3. replies reach only the client that asked, with its original id ---------------------------


async def test_replies_reach_only_the_client_that_asked_with_the_same_id_value_and_type(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [f"unix:{sock_dir}/s.sock", "tcp:127.0.0.1:0"]) as daemon:
            clients = [await LineClient.open(address) for address in daemon.addresses]
            for name, client in zip("ab", clients, strict=True):
                await client.send(
                    call(1, "echo", text=f"{name}-int"),
                    call("1", "echo", text=f"{name}-str"),
                    call("a:1", "echo", text=f"{name}-colon"),
                )
            for name, client in zip("ab", clients, strict=True):
                replies = [await client.receive() for _ in range(3)]
                assert [(reply["id"], result_text(reply)) for reply in replies] == [
                    (1, f"{name}-int"),
                    ("1", f"{name}-str"),
                    ("a:1", f"{name}-colon"),
                ]
                assert type(replies[0]["id"]) is int and type(replies[1]["id"]) is str


# -- 4. memory is bounded --------------------------------------------------------------------------


async def test_a_client_that_does_not_read_is_disconnected_without_stalling_others(sock_dir):
    limits = Limits(send_timeout=1.0)
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [f"unix:{sock_dir}/s.sock"], limits=limits) as daemon:
            stuck = await LineClient.open(daemon.addresses[0])
            await stuck.send(*[call(number, "blob", size=4 << 20) for number in range(4)])
            other = await LineClient.open(daemon.addresses[0])
            for number in range(20):  # served while the stuck client's replies back up
                assert result_text(await other.call(number, "echo", text="x")) == "x"
            await poll(lambda: daemon.statistics().connections == 1)
            assert result_text(await other.call("after", "echo", text="y")) == "y"


async def test_a_slow_child_applies_backpressure_instead_of_buffering(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [f"unix:{sock_dir}/s.sock"]) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            await client.send(sleep_call(1, 3.0))
            await receive_progress(client)  # the child is busy and reads nothing for 3 s
            notification = b'{"jsonrpc":"2.0","method":"notifications/ping","params":{}}\n'
            flood = notification * ((64 << 20) // len(notification))
            with trio.move_on_after(1.0) as blocked:
                await client.send_raw(flood)
            assert blocked.cancelled_caught, "64 MiB were accepted while the child read nothing"
            await client.aclose()


# -- 5. no orphans, and the MCP shutdown order -------------------------------------------------


async def test_on_client_eof_replies_in_flight_are_delivered_then_the_child_is_stopped(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [f"unix:{sock_dir}/s.sock"]) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            grandchild = int(result_text(await client.call(0, "spawn_grandchild")))
            await client.send(sleep_call(1, 0.3), call(2, "echo", text="last"))
            await client.send_eof()
            messages = await client.receive_until_eof()
            await wait_until_gone(grandchild)
            await poll(lambda: daemon.statistics().children == 0)
    replies = by_id([message for message in messages if "method" not in message])
    assert result_text(replies[1]) == "slept" and result_text(replies[2]) == "last"


async def test_on_client_disconnect_the_child_and_its_process_group_are_stopped(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [f"unix:{sock_dir}/s.sock"]) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            grandchild = int(result_text(await client.call(0, "spawn_grandchild")))
            await client.aclose()
            await wait_until_gone(grandchild)
            await poll(lambda: daemon.statistics().children == 0)


@pytest.mark.logs_tracebacks("a bug in the bridge is logged with its traceback, for its report")
async def test_a_crash_in_a_bridge_task_costs_one_connection_and_leaves_no_orphan(
    sock_dir, monkeypatch, caplog
):
    original = ToClient.run
    crashed = trio.Event()

    async def crashing_pump(self: ToClient) -> None:
        if not crashed.is_set():
            crashed.set()
            raise RuntimeError("injected bug")
        await original(self)

    monkeypatch.setattr(ToClient, "run", crashing_pump)
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [f"unix:{sock_dir}/s.sock"]) as daemon:
            first = await LineClient.open(daemon.addresses[0])
            await crashed.wait()
            assert await first.receive_until_eof() == []
            await poll(lambda: daemon.statistics().children == 0)
            second = await LineClient.open(daemon.addresses[0])
            assert result_text(await second.call(1, "echo", text="alive")) == "alive"
    [bug] = [r for r in caplog.records if r.exc_info]
    assert "internal error; connection closed" in bug.getMessage()


# -- 6. graceful stop ------------------------------------------------------------------------------


async def test_a_graceful_stop_lets_in_flight_requests_finish_and_refuses_new_ones(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [f"unix:{sock_dir}/s.sock"]) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            await client.send(sleep_call(1, 0.5))
            await receive_progress(client)
            daemon.stop()
            await client.send(call(2, "echo", text="too late"))
            replies = by_id(await client.receive_until_eof())
    assert result_text(replies[1]) == "slept"
    assert replies[2]["error"]["code"] == -32000
    assert replies[2]["error"]["data"]["reason"] == "shutting-down"


async def test_requests_still_running_at_the_drain_deadline_are_answered_with_an_error(sock_dir):
    limits = Limits(drain_timeout=0.3, stop_stdin_timeout=0.2, stop_term_timeout=1)
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [f"unix:{sock_dir}/s.sock"], limits=limits) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            await client.send(sleep_call(1, 30))
            await receive_progress(client)
            daemon.stop()
            replies = await client.receive_until_eof()
    assert len(replies) == 1
    assert replies[0]["id"] == 1 and replies[0]["error"]["code"] == -32000
    assert replies[0]["error"]["data"]["reason"] == "shutting-down"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_stops_the_daemon_gracefully_with_exit_0_and_no_orphans(sock_dir, signum):
    socket_path = sock_dir / "s.sock"
    with trio.fail_after(TIMEOUT):
        async with bridge_process("--listen", f"unix:{socket_path}", "--", *example_server()) as bridge:
            client = await LineClient.open(bridge.addresses[0])
            grandchild = int(result_text(await client.call(0, "spawn_grandchild")))
            await client.send(sleep_call(1, 0.5))
            await receive_progress(client)
            bridge.process.send_signal(signum)
            replies = await client.receive_until_eof()
            assert await bridge.process.wait() == 0, bridge.log()
    assert result_text(replies[0]) == "slept"
    assert not process_exists(grandchild)
    assert not socket_path.exists()


async def test_a_second_signal_stops_at_once_and_still_leaves_no_orphans(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--listen",
            f"unix:{sock_dir}/s.sock",
            "--drain-timeout",
            "60s",
            "--",
            *example_server("--ignore-sigterm", "--ignore-stdin-eof"),
        ) as bridge:
            client = await LineClient.open(bridge.addresses[0])
            grandchild = int(result_text(await client.call(0, "spawn_grandchild")))
            await client.send(sleep_call(1, 60))
            await receive_progress(client)
            bridge.process.send_signal(signal.SIGTERM)
            await poll(lambda: any("stopping:" in line for line in bridge.stderr_lines))
            with trio.fail_after(5):  # not the 60 s drain, nor the 60 s sleep
                bridge.process.send_signal(signal.SIGTERM)
                assert await bridge.process.wait() == 0, bridge.log()
    assert not process_exists(grandchild)


# -- connection cap ------------------------------------------------------------------------------


async def test_connections_over_the_cap_are_refused_with_a_clear_error(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(), [f"unix:{sock_dir}/s.sock"], limits=Limits(max_connections=1)
        ) as daemon:
            first = await LineClient.open(daemon.addresses[0])
            assert result_text(await first.call(1, "echo", text="in")) == "in"
            second = await LineClient.open(daemon.addresses[0])
            await second.send(call("refused", "echo", text="x"))
            replies = await second.receive_until_eof()
            assert result_text(await first.call(2, "echo", text="still")) == "still"
    assert [reply["id"] for reply in replies] == ["refused"]
    assert replies[0]["error"]["code"] == -31003
    assert replies[0]["error"]["data"] == {"reason": "too-many-connections", "limit": 1}


# -- request timeout -------------------------------------------------------------------------------


async def test_a_request_over_the_request_timeout_gets_32001_and_the_late_reply_is_dropped(sock_dir):
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(), [f"unix:{sock_dir}/s.sock"], limits=Limits(request_timeout=1.0)
        ) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            await client.send(sleep_call("slow", 1.5))
            await receive_progress(client)
            timed_out = await client.receive()
            # The example server answers in order: its late "slept" (at 1.5 s) comes before this
            # echo's reply (due by 2 s), and must not reach the client.
            after = await client.call("after", "echo", text="next")
    assert timed_out["id"] == "slow" and timed_out["error"]["code"] == -32001
    assert timed_out["error"]["data"]["reason"] == "request-timeout"
    assert after == {
        "jsonrpc": "2.0",
        "id": "after",
        "result": {"content": [{"type": "text", "text": "next"}], "isError": False},
    }
