"""The daemon gives large freed buffers back to the system (glibc's mmap threshold is fixed),
keeps no source text of attrs-generated methods, and collects garbage less often."""

from __future__ import annotations

import ctypes.util
import gc
import re
import sys
import traceback

import attrs
import pytest

from bridge._ops.memory import (
    GC_YOUNG_THRESHOLD,
    collect_garbage_less_often,
    forget_generated_sources,
    return_large_blocks_to_the_system,
)


@pytest.mark.skipif(
    sys.platform != "linux" or ctypes.util.find_library("c") is None, reason="needs Linux's C library"
)
def test_the_mmap_threshold_is_fixed_so_a_freed_large_message_leaves_the_process() -> None:
    assert return_large_blocks_to_the_system() is True


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
