"""Memory the daemon need not keep (generated source, start-up's cycles); garbage collected less often.

Large freed buffers are :mod:`bridge._ops.heap`'s business.

attrs keeps the source text of every method it generates in :mod:`linecache`:
:func:`forget_generated_sources` drops it once the daemon's modules are imported.

The cycle collector runs a young collection each time 700 more container objects were made than
freed (CPython's default). A relay keeps every request in flight alive (64 in the benchmark's
pipelined load, each a few dozen objects): a young collection then finds them all still alive,
traverses them again in the middle generation and promotes them to the oldest, whose growth
triggers full collections of the whole heap. Measured under the 2026-07-28 HTTP pipelined load:
a young collection every 22 calls, a full one every 3,000, about 15 µs of each call's CPU.
With young collections that rare, the cycles left by start-up (imports, argument parsing, reading
the configuration) would stay until much later: :func:`collect_start_up_garbage` frees them before
the daemon serves, so the connections' objects fill the memory they held instead of new memory.
"""

from __future__ import annotations

import gc
import linecache

# Young collections after this many more containers made than freed (CPython's default is 700):
# enough for a few hundred requests in flight to be freed by their reference counts before a
# collection sees them. What it delays is only cyclic garbage, which the relay makes little of
# (about 4 objects a young collection found under the load above), so memory does not grow.
GC_YOUNG_THRESHOLD = 20_000


def forget_generated_sources() -> None:
    """Drop the source text of generated code from :mod:`linecache`, once everything is imported.

    attrs writes the source of each class's generated methods (``__init__``, ``__eq__``,
    ``__repr__``...) into ``linecache`` so that debuggers can show it, and nothing ever removes it:
    the 128 attrs classes of a bridge serving Unix sockets (its own and trio's) kept 0.36 MiB there
    for the daemon's whole life. Without it a traceback through a generated method still names the
    file (``<attrs generated methods bridge._limits.Limits>``) and the line number, without the
    line's text. Entries for real files are read again from disk when a traceback needs them.
    """
    linecache.clearcache()


def collect_start_up_garbage() -> int:
    """Collect every generation once, after start-up and before serving; returns what it freed.

    Measured on a bridge serving Unix sockets (50 clients connected): 0.1 MiB less RSS. The
    thresholds are not changed.
    """
    return gc.collect()


def collect_garbage_less_often() -> None:
    """Raise the young collection's threshold to :data:`GC_YOUNG_THRESHOLD` (older ones keep theirs)."""
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, oldest)
