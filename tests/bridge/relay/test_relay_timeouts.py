"""The relay's timeouts, in virtual time: memory streams and a fake child, no real I/O.

trio's MockClock (``autojump_clock``) jumps to the next deadline whenever every task is blocked, so
a 30 s grace runs in microseconds; that is only sound without real I/O in flight, hence the fake.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from bridge import ChildSpec, Limits, Relay
from channels import StreamChannel

# A hang here would spin the virtual clock forever; this turns it into a failure instead.
VIRTUAL_DEADLINE = 3600


@attrs.define(eq=False)
class FakeChild:
    """Quacks like bridge.ChildProcess for the relay; the test plays the server on ``server``."""

    channel: StreamChannel
    server: StreamChannel
    spec: ChildSpec = ChildSpec(argv=("fake",), name="fake")
    pid: int = 4242
    returncode: int | None = None
    garbage_lines: int = 0
    _exited: trio.Event = attrs.field(factory=trio.Event)

    async def wait(self) -> int:
        await self._exited.wait()
        assert self.returncode is not None
        return self.returncode

    def exit(self, returncode: int) -> None:
        self.returncode = returncode
        self._exited.set()

    def note_garbage(self, error: Exception) -> None:
        self.garbage_lines += 1


def channel_pair(*, lockstep: bool = False) -> tuple[StreamChannel, StreamChannel]:
    left, right = trio.testing.lockstep_stream_pair() if lockstep else trio.testing.memory_stream_pair()
    return StreamChannel(left), StreamChannel(right)


def make_relay(
    limits: Limits, *, lockstep_client: bool = False, idle_timeout: float | None = None
) -> tuple[Relay, StreamChannel, FakeChild]:
    client, client_end = channel_pair(lockstep=lockstep_client)
    client_end.idle_timeout = idle_timeout  # what a stream listener sets from its options
    bridge_end, server = channel_pair()
    child = FakeChild(bridge_end, server)
    return Relay(client_end, child, limits), client, child  # type: ignore[arg-type]


async def run_then_close(relay: Relay) -> None:
    """What the daemon does: relay, then close the client (the relay's owner closes it)."""
    await relay.run()
    await relay.client.aclose()


def tool_request(request_id: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "sleep", "arguments": {}},
    }


async def test_a_half_closed_client_gets_errors_for_requests_unanswered_after_the_grace(
    autojump_clock,
):
    relay, client, child = make_relay(Limits(half_close_timeout=30))
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_then_close, relay)
            await client.send(tool_request(1))
            assert (await child.server.receive())["id"] == 1  # the child has it, and never answers
            await client.send_eof()
            started = trio.current_time()
            reply = await client.receive()
            assert trio.current_time() - started == pytest.approx(30)
        assert reply["id"] == 1
        assert reply["error"]["code"] == -32000
        assert reply["error"]["data"]["reason"] == "half-close-timeout"
        assert relay.ending is not None and relay.ending.reason == "half-close-timeout"


async def test_a_half_closed_client_is_served_until_its_last_reply_then_released(autojump_clock):
    relay, client, child = make_relay(Limits(half_close_timeout=30))
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_then_close, relay)
            await client.send(tool_request("a"))
            await child.server.receive()
            await client.send_eof()
            await trio.sleep(10)
            await child.server.send({"jsonrpc": "2.0", "id": "a", "result": {}})
            assert (await client.receive()) == {"jsonrpc": "2.0", "id": "a", "result": {}}
            with pytest.raises(trio.EndOfChannel):
                await client.receive()
        assert relay.ending is not None and relay.ending.reason == "client-closed"
        assert trio.current_time() < 30


async def test_the_drain_deadline_answers_requests_still_in_flight(autojump_clock):
    relay, client, child = make_relay(Limits(drain_timeout=10))
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_then_close, relay)
            await client.send(tool_request(5))
            await child.server.receive()
            relay.stopping.set()
            started = trio.current_time()
            reply = await client.receive()
            assert trio.current_time() - started == pytest.approx(10)
        assert reply["error"]["data"]["reason"] == "shutting-down"


async def answered_at_once_when_stopped(stop: Callable[[Relay], Awaitable[None]]) -> Relay:
    """Run a relay with one request in flight, ``stop`` it, and check the request is answered
    ``shutting-down`` within a (virtual) second, the relay not answering what is unread."""
    relay, client, child = make_relay(Limits(drain_timeout=10))
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_then_close, relay)
            await client.send(tool_request(5))
            await child.server.receive()
            await stop(relay)
            started = trio.current_time()
            reply = await client.receive()
            assert trio.current_time() - started < 1
        assert reply["error"]["data"]["reason"] == "shutting-down"
        assert relay.ending is not None and not relay.ending.answers_unread
    return relay


async def test_a_stop_at_once_during_the_drain_answers_requests_in_flight_without_waiting_for_it(
    autojump_clock,
):
    async def stop(relay: Relay) -> None:
        relay.stopping.set()
        await trio.sleep(3)
        relay.stop_now.set()

    await answered_at_once_when_stopped(stop)


async def test_a_stop_at_once_set_with_the_graceful_stop_answers_requests_in_flight_at_once(autojump_clock):
    async def stop(relay: Relay) -> None:
        relay.stopping.set()
        relay.stop_now.set()

    await answered_at_once_when_stopped(stop)


async def test_a_stop_at_once_set_alone_ends_the_relay_and_answers_requests_in_flight_at_once(autojump_clock):
    # A program embedding the relay may set stop_now without stopping (docs/embedding.md).
    async def stop(relay: Relay) -> None:
        relay.stop_now.set()

    relay = await answered_at_once_when_stopped(stop)
    assert not relay.stopping.is_set()


async def test_a_client_that_reads_nothing_is_dropped_after_the_send_timeout(autojump_clock):
    relay, _client, child = make_relay(Limits(send_timeout=30), lockstep_client=True)
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_then_close, relay)
            await child.server.send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/message",
                    "params": {"level": "info", "data": "nobody reads this"},
                }
            )
        assert relay.ending is not None and relay.ending.reason == "client-too-slow"
        assert trio.current_time() == pytest.approx(30)


async def test_a_child_killed_by_a_signal_is_named_in_the_error_of_each_request(autojump_clock):
    relay, client, child = make_relay(Limits())
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_then_close, relay)
            await client.send_many([tool_request(1), tool_request("two")])
            await child.server.receive()
            await child.server.receive()
            await child.server.aclose()
            child.exit(-9)
            replies = [await client.receive(), await client.receive()]
        assert [reply["id"] for reply in replies] == [1, "two"]
        for reply in replies:
            assert reply["error"]["data"]["reason"] == "child-exited"
            assert reply["error"]["data"]["returncode"] == -9
            assert "killed by SIGKILL" in reply["error"]["data"]["detail"]


async def test_a_cancelled_request_is_not_answered_again_when_the_child_exits(autojump_clock):
    relay, client, child = make_relay(Limits())
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_then_close, relay)
            await client.send_many(
                [
                    tool_request(1),
                    tool_request(2),
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": {"requestId": 1, "reason": "user"},
                    },
                ]
            )
            for _ in range(3):
                await child.server.receive()
            await child.server.send({"jsonrpc": "2.0", "id": 1, "result": {}})  # late: dropped
            await child.server.aclose()
            child.exit(0)
            replies = []
            with pytest.raises(trio.EndOfChannel):
                while True:
                    replies.append(await client.receive())
        assert [reply["id"] for reply in replies] == [2]


async def test_a_client_that_does_not_read_makes_the_bridge_stop_reading_its_child():
    relay, _client, child = make_relay(Limits(send_timeout=3600), lockstep_client=True)
    blob = {
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "info", "data": "x" * (256 << 10)},
    }
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_then_close, relay)
            await child.server.send_many([blob] * 64)  # 16 MiB the client never reads
            await trio.testing.wait_all_tasks_blocked()
            # The bridge holds the message it is trying to write and stopped reading: the rest
            # stays with the child (here, in the stream's buffer), as on a full stdout pipe.
            assert child.channel.bytes_received <= 1 << 20
            nursery.cancel_scope.cancel()


async def test_requests_in_flight_when_the_client_vanishes_mid_write_do_not_hang_the_relay():
    # A write to the client breaks while a request is in flight: the relay must end and return,
    # not wait to deliver an answer nobody can receive.
    limits = Limits()
    relay, client, child = make_relay(limits, lockstep_client=True)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_then_close, relay)
            await client.send(tool_request(1))
            await child.server.receive()
            await child.server.send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/message",
                    "params": {"level": "info", "data": "x" * 4096},
                }
            )
            await trio.testing.wait_all_tasks_blocked()
            await client.aclose()  # the relay's write of that notification now breaks
    assert relay.ending is not None and relay.ending.reason == "client-disconnected"


async def test_a_request_still_running_after_the_request_timeout_gets_32001_and_is_cancelled(
    autojump_clock,
):
    relay, client, child = make_relay(Limits(request_timeout=5))
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_then_close, relay)
            await client.send(tool_request("slow"))
            assert (await child.server.receive())["id"] == "slow"
            started = trio.current_time()
            cancel = await child.server.receive()
            reply = await client.receive()
            assert trio.current_time() - started == pytest.approx(5)
            await child.server.send({"jsonrpc": "2.0", "id": "slow", "result": {}})  # too late
            await client.send(tool_request("next"))
            await child.server.receive()
            await child.server.send({"jsonrpc": "2.0", "id": "next", "result": {"n": 1}})
            assert await client.receive() == {"jsonrpc": "2.0", "id": "next", "result": {"n": 1}}
            nursery.cancel_scope.cancel()
    assert cancel == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": "slow", "reason": "timed out after 5s"},
    }
    assert reply["id"] == "slow" and reply["error"]["code"] == -32001
    assert reply["error"]["data"] == {"reason": "request-timeout", "timeout": 5}


async def test_a_request_answered_in_time_is_never_timed_out_even_if_its_id_is_reused(
    autojump_clock,
):
    relay, client, child = make_relay(Limits(request_timeout=5))
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_then_close, relay)
            await client.send(tool_request(1))
            await child.server.receive()
            await trio.sleep(4)
            await child.server.send({"jsonrpc": "2.0", "id": 1, "result": {"first": True}})
            assert (await client.receive())["result"] == {"first": True}
            await client.send(tool_request(1))  # the same id, 4 s into the first one's 5
            await child.server.receive()
            await trio.sleep(3)  # past the first request's deadline, not the second's
            await child.server.send({"jsonrpc": "2.0", "id": 1, "result": {"second": True}})
            assert (await client.receive())["result"] == {"second": True}
            nursery.cancel_scope.cancel()


async def test_answered_requests_leave_no_pile_of_deadlines_and_timeouts_still_fire(autojump_clock):
    relay, client, child = make_relay(Limits(request_timeout=60, max_in_flight=4))
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_then_close, relay)
            await client.send(tool_request("slow"))  # never answered: its deadline comes first
            await child.server.receive()
            for number in range(200):
                await client.send(tool_request(number))
                await child.server.receive()
                await child.server.send({"jsonrpc": "2.0", "id": number, "result": {}})
                assert (await client.receive())["id"] == number
                assert len(relay._ledger._deadlines) <= 2 * 4 + 1
            await client.send(tool_request("late"))  # admitted after the sweeps, never answered
            await child.server.receive()
            timed_out = [(await client.receive())["id"] for _ in range(2)]
            nursery.cancel_scope.cancel()
    assert timed_out == ["slow", "late"]


async def test_a_connection_idle_for_the_idle_timeout_is_closed_and_one_in_use_is_not(autojump_clock):
    relay, client, child = make_relay(Limits(), idle_timeout=60)
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_then_close, relay)
            await trio.sleep(50)
            await client.send(tool_request(1))  # traffic 50 s in: the clock starts again
            await child.server.receive()
            await child.server.send({"jsonrpc": "2.0", "id": 1, "result": {}})
            assert (await client.receive())["id"] == 1
            answered = trio.current_time()
            with pytest.raises(trio.EndOfChannel):
                await client.receive()
            assert trio.current_time() - answered == pytest.approx(60, abs=1)
    assert relay.ending is not None and relay.ending.reason == "idle-timeout"


async def test_a_request_in_flight_longer_than_the_idle_timeout_keeps_the_connection_open(autojump_clock):
    relay, client, child = make_relay(Limits(), idle_timeout=60)
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_then_close, relay)
            await client.send(tool_request("slow"))
            await child.server.receive()
            await trio.sleep(600)  # ten idle timeouts with the request in flight and no traffic
            assert relay.ending is None
            await child.server.send({"jsonrpc": "2.0", "id": "slow", "result": {}})
            assert (await client.receive()) == {"jsonrpc": "2.0", "id": "slow", "result": {}}
            answered = trio.current_time()
            with pytest.raises(trio.EndOfChannel):
                await client.receive()
            assert trio.current_time() - answered == pytest.approx(60, abs=1)
    assert relay.ending is not None and relay.ending.reason == "idle-timeout"


async def test_without_an_idle_timeout_a_silent_connection_stays_open(autojump_clock):
    relay, _client, _child = make_relay(Limits())
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_then_close, relay)
            await trio.sleep(VIRTUAL_DEADLINE / 2)
            assert relay.ending is None
            relay.stop_now.set()
