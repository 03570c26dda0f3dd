"""The daemon gives large freed buffers back to the system (glibc's mmap threshold is fixed)."""

from __future__ import annotations

import ctypes.util
import sys

import pytest

from bridge._ops.memory import return_large_blocks_to_the_system


@pytest.mark.skipif(
    sys.platform != "linux" or ctypes.util.find_library("c") is None, reason="needs Linux's C library"
)
def test_the_mmap_threshold_is_fixed_so_a_freed_large_message_leaves_the_process() -> None:
    assert return_large_blocks_to_the_system() is True
