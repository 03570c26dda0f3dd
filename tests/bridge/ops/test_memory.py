"""The daemon gives large freed buffers back to the system (glibc's mmap threshold is fixed) and collects garbage less often."""

from __future__ import annotations

import ctypes.util
import gc
import sys

import pytest

from bridge._ops.memory import (
    GC_YOUNG_THRESHOLD,
    collect_garbage_less_often,
    return_large_blocks_to_the_system,
)


@pytest.mark.skipif(
    sys.platform != "linux" or ctypes.util.find_library("c") is None, reason="needs Linux's C library"
)
def test_the_mmap_threshold_is_fixed_so_a_freed_large_message_leaves_the_process() -> None:
    assert return_large_blocks_to_the_system() is True


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
