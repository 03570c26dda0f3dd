"""A connection's ledger holds the request timeout's queues and events only when there is a timeout:
every connection has a ledger (bridge/_relay/ledger.py)."""

from __future__ import annotations

from bridge._relay.ledger import Ledger

TIMEOUT_ONLY = ("_deadlines", "_deadline_added", "_cancellations")


def test_a_ledger_without_a_request_timeout_makes_none_of_the_timeouts_queues_or_events() -> None:
    ledger = Ledger(max_in_flight=4, request_timeout=None)
    ledger.opened(1)
    assert [name for name in TIMEOUT_ONLY if hasattr(ledger, name)] == []


def test_a_ledger_with_a_request_timeout_has_its_queues_and_events() -> None:
    ledger = Ledger(max_in_flight=4, request_timeout=5.0)
    assert [name for name in TIMEOUT_ONLY if hasattr(ledger, name)] == list(TIMEOUT_ONLY)
