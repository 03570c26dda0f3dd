"""bench/shares.py puts each profile sample down to the code it was taken in, idle apart.

The tool behind the busy-share table of docs/performance.md: pure functions over py-spy's
collapsed stacks, so these tests feed it stacks written here (no profiler, no I/O).
"""

from __future__ import annotations

import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
from shares import CATEGORIES, category, shares, table

EPOLL = "get_events (trio/_core/_io_epoll.py:225)"
DECODE = "decode_lines (channels/_core/lines.py:120)"
WRITE = "write_some (channels/_core/fdio.py:88)"
SCHEDULE = "run (trio/_core/_run.py:2400)"
ENCODE = "encode (channels/_core/jsonrpc.py:300)"


def test_a_sample_counts_for_the_frame_it_was_taken_in_not_its_callers() -> None:
    assert category(DECODE) == "JSON decode and checks"
    assert category(ENCODE) == "JSON encode"
    assert category(WRITE) == "writes (syscalls)"
    assert category("relay (bridge/_relay/to_child.py:120)") == "relay and shared-child bookkeeping"
    assert category("<module> (somewhere/else.py)") == "other"


def test_idle_samples_are_given_apart_and_the_busy_shares_add_up_to_all_busy_samples() -> None:
    stacks = [
        f"{SCHEDULE};{EPOLL} 50",
        f"{SCHEDULE};{DECODE} 30",
        f"{SCHEDULE};{WRITE} 10",
        f"{SCHEDULE} 10",
    ]
    busy, idle = shares(stacks)
    assert idle == pytest.approx(50.0)
    assert busy["JSON decode and checks"] == pytest.approx(60.0)
    assert busy["writes (syscalls)"] == pytest.approx(20.0)
    assert busy["trio's scheduling"] == pytest.approx(20.0)
    assert sum(busy.values()) == pytest.approx(100.0)


def test_a_profile_with_no_busy_sample_is_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="no busy sample"):
        shares([f"{SCHEDULE};{EPOLL} 5"])


def test_the_table_has_a_row_per_busy_category_and_a_column_per_profile() -> None:
    text = table({"unix": shares([f"{DECODE} 3", f"{EPOLL} 1"]), "ws": shares([f"{WRITE} 1"])})
    lines = text.splitlines()
    assert lines[0] == "| share of busy time | unix | ws |"
    assert len(lines) == 2 + len(CATEGORIES) - 1 + 1  # head, rule, busy categories, idle
    assert "| JSON decode and checks | 100 % | 0 % |" in lines
    assert lines[-1] == "| (idle, of all samples) | 25 % | 0 % |"
