"""A request's reply, once written, closes it (:meth:`InFlight.written`, bridge/_relay/inflight.py)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge._relay.inflight import DuplicateRequest, InFlight, TooManyRequests


def test_replies_written_close_their_requests_and_forget_one_cancelled_while_it_was_written() -> None:
    in_flight = InFlight(limit=4)
    for request_id in (1, "1", 2):
        in_flight.open(request_id)
    in_flight.writing([1, 2])
    assert in_flight.cancel(2)  # the client cancelled it while its reply was being written
    in_flight.written([1, 2])
    assert len(in_flight) == 1 and "1" in in_flight and 1 not in in_flight
    assert not in_flight.is_being_written(1)
    assert not in_flight.was_cancelled(2)  # its reply went out: none is expected late
    in_flight.open(1)  # the id may be used again
    assert in_flight.take_all() == ["1", 1]


def test_a_request_reusing_the_id_of_one_cancelled_while_its_reply_was_written_stays_open_after_that_write() -> (
    None
):
    in_flight = InFlight(limit=4)
    in_flight.open(1)
    in_flight.writing([1])
    assert in_flight.cancel(1)
    token = in_flight.open(1)  # the client reuses the id before the first reply is written
    in_flight.written([1])
    assert in_flight.is_open(1, token) and len(in_flight) == 1
    assert not in_flight.is_being_written(1)  # so it may time out
    in_flight.writing([1])  # its own reply
    in_flight.written([1])
    assert len(in_flight) == 0


def test_a_reused_id_cancelled_in_turn_has_its_late_reply_dropped_as_late_after_the_first_reply_is_written() -> (
    None
):
    in_flight = InFlight(limit=4)
    in_flight.open(1)
    in_flight.writing([1])
    assert in_flight.cancel(1)
    in_flight.open(1)
    assert in_flight.cancel(1)  # the new request, whose reply is not being written
    in_flight.written([1])
    assert 1 not in in_flight and len(in_flight) == 0
    assert in_flight.was_cancelled(1)


def test_a_request_beyond_the_limit_is_refused_counting_those_timed_out() -> None:
    in_flight = InFlight(limit=2)
    in_flight.open(1)
    in_flight.open(2)
    in_flight.time_out(1)
    with pytest.raises(TooManyRequests):
        in_flight.open(3)


IDS = st.sampled_from([1, 2, 3, "1", "2"])


@given(
    before=st.lists(st.tuples(st.sampled_from(["open", "cancel", "time_out"]), IDS), max_size=6),
    batch=st.lists(IDS, min_size=1, max_size=4),
    limit=st.integers(1, 5),
)
def test_opening_a_batch_together_opens_it_as_one_by_one_would_or_opens_none(
    before: list[tuple[str, Any]], batch: list[Any], limit: int
) -> None:
    together, one_by_one = InFlight(limit), InFlight(limit)
    for in_flight in (together, one_by_one):
        for step, request_id in before:
            try:
                if step == "open":
                    in_flight.open(request_id)
                elif step == "cancel":
                    in_flight.cancel(request_id)
                elif request_id in in_flight:
                    in_flight.time_out(request_id)
            except (DuplicateRequest, TooManyRequests):
                pass
    was = state(together)
    first = together.open_all(batch)
    try:
        tokens = [one_by_one.open(request_id) for request_id in batch]
    except (DuplicateRequest, TooManyRequests):
        assert first is None and state(together) == was  # refused whole: the caller goes one by one
        return
    assert tokens == list(range(first, first + len(batch)))
    assert state(together) == state(one_by_one)


def state(in_flight: InFlight) -> tuple[Any, ...]:
    """Everything an InFlight holds, to compare two."""
    return (
        dict(in_flight.awaiting),
        dict(in_flight._timed_out),
        list(in_flight._cancelled),
        len(in_flight),
    )
