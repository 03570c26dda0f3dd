"""What the tests of reference cycles share: the cycle collector off, and a cycle of garbage.

A test that checks that something is freed by reference counts alone turns the cycle collector
off around it (:func:`cycle_collector_off`): otherwise a collection of CPython's own could free a
cycle first and the test would pass whatever the code did. One that checks a collection of the
daemon's makes :func:`cyclic_garbage` to be freed (bridge/_ops/memory.py).
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from contextlib import contextmanager


class Node:
    """Something a reference cycle can be made of (and weakly referred to)."""

    other: Node | None = None


def cyclic_garbage() -> weakref.ref[Node]:
    """A reference cycle nothing else refers to, weakly referred to: only a collection frees it."""
    first, second = Node(), Node()
    first.other, second.other = second, first
    return weakref.ref(first)


@contextmanager
def cycle_collector_off() -> Iterator[None]:
    """No automatic collection inside (what was garbage before is collected first)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
