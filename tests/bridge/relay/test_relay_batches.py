"""A batch of requests read at once is admitted whole when each would be, else one by one
(bridge/_relay/to_child.py, inflight.py, ledger.py); a batch of replies is delivered whole when
each answers a request awaiting it, else sorted one by one (to_client.py). The answers are the
same either way.

Memory streams and a fake child, in virtual time, as the timeout tests use them; a batch is sent
with one write, so that the relay reads it as one.
"""

from __future__ import annotations

from typing import Any

import trio
from test_relay_timeouts import VIRTUAL_DEADLINE, make_relay, run_then_close, tool_request

from bridge import Limits
from bridge._relay.to_client import _all_awaited
from channels import ParseError


def result(request_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": {}}


async def test_a_batch_with_an_id_twice_has_the_second_refused_and_the_rest_forwarded(autojump_clock):
    relay, client, child = make_relay(Limits())
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_then_close, relay)
            await client.send_many([tool_request(1), tool_request(2), tool_request(1), tool_request("1")])
            refusal = await client.receive()
            assert refusal["id"] == 1 and refusal["error"]["data"]["reason"] == "duplicate-id"
            assert [(await child.server.receive())["id"] for _ in range(3)] == [1, 2, "1"]
            # An id in flight from an earlier batch is refused in the next, which is otherwise forwarded.
            await client.send_many([tool_request(3), tool_request(2)])
            refusal = await client.receive()
            assert refusal["id"] == 2 and refusal["error"]["data"]["reason"] == "duplicate-id"
            assert (await child.server.receive())["id"] == 3
            await child.server.send_many([result(1), result(2), result("1"), result(3)])
            assert [(await client.receive())["id"] for _ in range(4)] == [1, 2, "1", 3]
            assert relay.in_flight == 0
            # Every id answered may be used again, in a batch admitted whole.
            await client.send_many([tool_request(1), tool_request(2)])
            assert [(await child.server.receive())["id"] for _ in range(2)] == [1, 2]
            assert relay.in_flight == 2
            nursery.cancel_scope.cancel()


async def test_a_batch_over_the_in_flight_limit_has_only_those_over_it_refused(autojump_clock):
    relay, client, child = make_relay(Limits(max_in_flight=3))
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_then_close, relay)
            await client.send_many([tool_request(request_id) for request_id in range(1, 6)])
            refusals = [await client.receive() for _ in range(2)]
            assert [(refusal["id"], refusal["error"]["code"]) for refusal in refusals] == [
                (4, -31002),
                (5, -31002),
            ]
            assert [(await child.server.receive())["id"] for _ in range(3)] == [1, 2, 3]
            nursery.cancel_scope.cancel()


async def test_each_request_of_a_batch_admitted_whole_times_out(autojump_clock):
    relay, client, child = make_relay(Limits(request_timeout=5.0))
    with trio.fail_after(VIRTUAL_DEADLINE):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_then_close, relay)
            await client.send_many([tool_request(1), tool_request("b")])
            assert [(await child.server.receive())["id"] for _ in range(2)] == [1, "b"]
            errors = [await client.receive() for _ in range(2)]
            assert [(error["id"], error["error"]["code"]) for error in errors] == [(1, -32001), ("b", -32001)]
            cancelled = [await child.server.receive() for _ in range(2)]
            assert [message["params"]["requestId"] for message in cancelled] == [1, "b"]
            await child.server.send_many([result(1), result("b")])  # late: dropped
            await client.send_many([tool_request(1)])  # its id free again, once answered
            assert (await child.server.receive())["id"] == 1
            assert relay.in_flight == 1
            nursery.cancel_scope.cancel()


def test_a_batch_of_replies_is_taken_whole_only_when_each_answers_a_request_awaiting_it() -> None:
    awaiting = {1: 1, "1": 2}
    assert _all_awaited([result(1), result("1")], awaiting) == {1: None, "1": None}
    unattributed = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
    for batch in (
        [result(1), result(1)],  # a second reply
        [result(1), result(2)],  # a stray
        [result(1), unattributed],
        [result(1), {"jsonrpc": "2.0", "method": "notifications/message", "params": {}}],
        [result(1), {"jsonrpc": "2.0", "id": 1, "method": "sampling/createMessage", "params": {}}],
        [result(1), ParseError("not JSON")],
    ):
        assert _all_awaited(batch, awaiting) is None  # type: ignore[arg-type]
