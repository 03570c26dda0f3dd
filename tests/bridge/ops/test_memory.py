"""The daemon keeps no source text of attrs-generated methods, frees start-up's cycles before
serving and freezes what is left, collects young garbage less often and old cyclic garbage once a
period (large freed buffers: test_heap.py)."""

from __future__ import annotations

import gc
import re
import traceback

import attrs
import pytest
import trio
import trio.testing
from garbage import Node, cycle_collector_off, cyclic_garbage

from bridge._ops.memory import (
    FULL_COLLECTION_PERIOD_S,
    GC_YOUNG_THRESHOLD,
    collect_garbage_less_often,
    collect_old_garbage,
    collect_start_up_garbage,
    forget_generated_sources,
)


@attrs.define
class Sized:
    """An attrs class whose generated ``__init__`` raises: its converter refuses text."""

    size: int = attrs.field(converter=int)


def test_a_traceback_through_an_attrs_generated_method_still_names_the_class_once_its_source_is_forgotten() -> (
    None
):
    forget_generated_sources()
    with pytest.raises(ValueError) as raised:
        Sized("large")  # int("large") fails inside the generated __init__
    text = "".join(traceback.format_exception(raised.value))
    assert re.search(r"File \"<attrs generated methods [\w.]*Sized>\", line \d+, in __init__", text)
    assert "invalid literal for int() with base 10: 'large'" in text


def test_the_young_garbage_collection_waits_for_more_objects_and_the_older_ones_keep_their_thresholds() -> (
    None
):
    before = gc.get_threshold()
    try:
        collect_garbage_less_often()
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, before[1], before[2])
        assert GC_YOUNG_THRESHOLD > before[0]
    finally:
        gc.set_threshold(*before)


def test_the_cycles_start_up_left_are_freed_before_serving_whatever_the_thresholds() -> None:
    before = gc.get_threshold()
    with cycle_collector_off():  # no collection of its own may free the cycle first
        try:
            collect_garbage_less_often()
            alive = cyclic_garbage()
            assert alive() is not None  # only the cycle collector frees a cycle
            assert collect_start_up_garbage() >= 2
            assert alive() is None
            assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, before[1], before[2])
        finally:
            gc.unfreeze()
            gc.set_threshold(*before)


def test_what_start_up_leaves_is_frozen_so_that_no_later_collection_looks_at_it_again() -> None:
    survivor = Node()
    try:
        collect_start_up_garbage()
        assert gc.get_freeze_count() > 0
        assert not any(thing is survivor for thing in gc.get_objects())  # in no generation now
    finally:
        gc.unfreeze()


async def test_old_cyclic_garbage_is_collected_within_a_period_though_nothing_new_is_made(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with cycle_collector_off():  # only the task may collect
        async with trio.open_nursery() as nursery:
            nursery.start_soon(collect_old_garbage)
            await trio.sleep(FULL_COLLECTION_PERIOD_S / 2)
            alive = cyclic_garbage()
            await trio.sleep(FULL_COLLECTION_PERIOD_S / 4)
            assert alive() is not None  # no look before the period
            await trio.sleep(FULL_COLLECTION_PERIOD_S / 2)
            assert alive() is None
            nursery.cancel_scope.cancel()
