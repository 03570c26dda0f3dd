"""Shared mode's router, sans-IO: ids, progress tokens, cancellations and subscriptions."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge._relay.inflight import DuplicateRequest, TooManyRequests
from bridge._shared.router import SUBSCRIPTION_ID, Router

IDS = [1, 2, "1", "2", "a:1", 0, -1]


def request(request_id: Any, token: Any = None, method: str = "tools/call") -> dict[str, Any]:
    params: dict[str, Any] = {"name": "echo"}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def cancel(request_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}


operations = st.lists(
    st.one_of(
        st.tuples(st.just("request"), st.integers(0, 2), st.sampled_from(IDS), st.booleans()),
        st.tuples(st.just("answer"), st.integers(0, 50)),
        st.tuples(st.just("progress"), st.integers(0, 50)),
        st.tuples(st.just("cancel"), st.integers(0, 2), st.sampled_from(IDS)),
        st.tuples(st.just("leave"), st.integers(0, 2)),
    ),
    max_size=60,
)


@settings(max_examples=300)
@given(operations)
def test_any_interleaving_of_clients_delivers_each_client_exactly_its_own_replies_with_its_own_ids(
    script: list[tuple[Any, ...]],
) -> None:
    router = Router(max_in_flight=4)
    sessions = [0, 1, 2]  # the current session (client key) of each of three clients
    next_key = 3
    for key in sessions:
        router.attach(key)
    expected: dict[tuple[int, Any], Any] = {}  # (client key, original id) -> what it asked for
    at_child: list[dict[str, Any]] = []  # requests the child holds, oldest first
    received: dict[int, list[dict[str, Any]]] = {}

    for operation in script:
        kind = operation[0]
        if kind == "request":
            _, who, request_id, with_token = operation
            key = sessions[who]
            payload = f"{key}/{request_id!r}"
            message = request(request_id, token=f"t{payload}" if with_token else None)
            message["params"]["arguments"] = {"payload": payload}
            try:
                routed = router.client_request(key, message)
            except DuplicateRequest:
                assert (key, request_id) in expected
                continue
            except TooManyRequests:
                assert sum(1 for owner, _ in expected if owner == key) >= 4
                continue
            assert (key, request_id) not in expected
            expected[(key, request_id)] = payload
            assert type(routed["id"]) is int
            assert all(routed["id"] != other["id"] for other in at_child)
            at_child.append(routed)
        elif kind in ("answer", "progress") and at_child:
            routed = at_child[operation[1] % len(at_child)]
            if kind == "answer":
                at_child.remove(routed)
                reply = {
                    "jsonrpc": "2.0",
                    "id": routed["id"],
                    "result": {"payload": routed["params"]["arguments"]["payload"]},
                }
                delivered = router.child_response(reply)
            else:
                token = routed["params"].get("_meta", {}).get("progressToken")
                if token is None:
                    continue
                delivered = router.child_progress(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": 1},
                    }
                )
            if delivered is not None:
                received.setdefault(delivered[0], []).append(delivered[1])
                if kind == "answer":
                    key, reply = delivered
                    assert expected.pop((key, reply["id"])) == reply["result"]["payload"]
                else:
                    key, note = delivered
                    payload = expected[
                        next(
                            (k, i)
                            for k, i in expected
                            if k == key and f"t{expected[(k, i)]}" == note["params"]["progressToken"]
                        )
                    ]
                    assert note["params"]["progressToken"] == f"t{payload}"
        elif kind == "cancel":
            _, who, request_id = operation
            key = sessions[who]
            routed = router.client_cancel(key, cancel(request_id))
            if (key, request_id) in expected:
                assert routed is not None and type(routed["params"]["requestId"]) is int
                del expected[(key, request_id)]  # no reply may come now
            else:
                assert routed is None  # never someone else's request
        elif kind == "leave":
            key = sessions[operation[1]]
            detached = router.detach(key)
            assert len(detached.cancel) == sum(1 for owner, _ in expected if owner == key)
            for owner, request_id in [pair for pair in expected if pair[0] == key]:
                del expected[(owner, request_id)]
            sessions[operation[1]] = next_key
            router.attach(next_key)
            next_key += 1
    # The child answers everything it still holds: exactly the expected replies arrive.
    for routed in at_child:
        reply = {
            "jsonrpc": "2.0",
            "id": routed["id"],
            "result": {"payload": routed["params"]["arguments"]["payload"]},
        }
        delivered = router.child_response(reply)
        if delivered is not None:
            key, reply = delivered
            assert expected.pop((key, reply["id"])) == reply["result"]["payload"]
    assert expected == {}


def test_two_clients_may_both_use_id_1_and_each_gets_its_own_reply_with_the_same_type():
    router = Router(max_in_flight=8)
    router.attach(10)
    router.attach(20)
    a = router.client_request(10, request(1))
    b = router.client_request(20, request(1))
    c = router.client_request(20, request("1"))
    assert len({a["id"], b["id"], c["id"]}) == 3
    assert router.child_response({"jsonrpc": "2.0", "id": c["id"], "result": {}}) == (
        20,
        {"jsonrpc": "2.0", "id": "1", "result": {}},
    )
    assert router.child_response({"jsonrpc": "2.0", "id": a["id"], "result": {}}) == (
        10,
        {"jsonrpc": "2.0", "id": 1, "result": {}},
    )


def test_a_client_cannot_cancel_another_clients_request():
    router = Router(max_in_flight=8)
    router.attach(1)
    router.attach(2)
    routed = router.client_request(1, request("x"))
    assert router.client_cancel(2, cancel("x")) is None
    assert router.client_cancel(2, cancel(routed["id"])) is None  # nor name it by its wire id
    assert router.child_response({"jsonrpc": "2.0", "id": routed["id"], "result": {}})[0] == 1


def test_subscription_notifications_reach_only_the_subscriber_with_its_own_id():
    router = Router(max_in_flight=8)
    router.attach(1)
    router.attach(2)
    listen = router.client_request(1, request("sub", method="subscriptions/listen"))
    router.client_request(2, request("sub", method="subscriptions/listen"))
    ack = {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": {SUBSCRIPTION_ID: listen["id"]}, "notifications": {}},
    }
    client, delivered = router.child_subscription(ack)
    assert client == 1 and delivered["params"]["_meta"][SUBSCRIPTION_ID] == "sub"
    final = {
        "jsonrpc": "2.0",
        "id": listen["id"],
        "result": {"resultType": "complete", "_meta": {SUBSCRIPTION_ID: listen["id"]}},
    }
    client, delivered = router.child_response(final)
    assert client == 1 and delivered["id"] == "sub"
    assert delivered["result"]["_meta"][SUBSCRIPTION_ID] == "sub"
    assert router.child_subscription(ack) is None  # the subscription is over


def test_requests_from_the_child_are_answered_only_by_the_client_they_were_sent_to():
    router = Router(max_in_flight=8)
    router.attach(1)
    router.attach(2)
    sent = router.child_request(1, {"jsonrpc": "2.0", "id": "s-1", "method": "roots/list"})
    assert router.client_response(2, {"jsonrpc": "2.0", "id": sent["id"], "result": {}}) is None
    assert router.client_response(1, {"jsonrpc": "2.0", "id": sent["id"], "result": {}}) == (
        {"jsonrpc": "2.0", "id": "s-1", "result": {}}
    )


def test_a_client_that_leaves_yields_its_requests_to_cancel_and_the_childs_requests_to_refuse():
    router = Router(max_in_flight=8)
    router.attach(1)
    routed = router.client_request(1, request(7))
    router.child_request(1, {"jsonrpc": "2.0", "id": 99, "method": "sampling/createMessage"})
    detached = router.detach(1)
    assert detached.cancel == (routed["id"],) and detached.refuse == (99,)
    assert router.child_response({"jsonrpc": "2.0", "id": routed["id"], "result": {}}) is None


def test_a_client_whose_replies_all_came_leaves_nothing_to_cancel_or_refuse_and_another_keeps_its_own():
    router = Router(max_in_flight=8)
    router.attach(1)
    router.attach(2)
    router.child_request(2, {"jsonrpc": "2.0", "id": 99, "method": "sampling/createMessage"})
    routed = router.client_request(1, request(7))
    assert router.child_response({"jsonrpc": "2.0", "id": routed["id"], "result": {}}) is not None
    detached = router.detach(1)
    assert detached.cancel == () and detached.refuse == ()
    assert router.detach(2).refuse == (99,)  # the other client's request from the child is its own
    router.attach(3)
    assert router.detach(3).cancel == () and router.detach(3).refuse == ()  # and gone twice


@pytest.mark.parametrize("limit", [1, 3])
def test_a_client_over_its_in_flight_limit_is_refused(limit):
    router = Router(max_in_flight=limit)
    router.attach(1)
    for number in range(limit):
        router.client_request(1, request(number))
    with pytest.raises(TooManyRequests):
        router.client_request(1, request("one more"))
