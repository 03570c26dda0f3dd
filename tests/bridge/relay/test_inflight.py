"""A request's reply, once written, closes it (:meth:`InFlight.written`, bridge/_relay/inflight.py)."""

from __future__ import annotations

import pytest

from bridge._relay.inflight import InFlight, TooManyRequests


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
