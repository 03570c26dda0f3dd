"""The daemon keeps no source text of attrs-generated methods, frees start-up's cycles before
serving, and collects garbage less often (large freed buffers: test_heap.py)."""

from __future__ import annotations

import gc
import re
import traceback
import weakref

import attrs
import pytest

from bridge._ops.memory import (
    GC_YOUNG_THRESHOLD,
    collect_garbage_less_often,
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


class Node:
    """Something a reference cycle can be made of (and weakly referred to)."""

    other: Node | None = None


def test_the_cycles_start_up_left_are_freed_before_serving_whatever_the_thresholds() -> None:
    before = gc.get_threshold()
    gc.disable()  # no collection of its own may free the cycle first
    try:
        collect_garbage_less_often()
        first, second = Node(), Node()
        first.other, second.other = second, first
        alive = weakref.ref(first)
        del first, second
        assert alive() is not None  # only the cycle collector frees a cycle
        assert collect_start_up_garbage() >= 2
        assert alive() is None
        assert gc.get_threshold() == (GC_YOUNG_THRESHOLD, before[1], before[2])
    finally:
        gc.set_threshold(*before)
        gc.enable()
