"""Memory the daemon need not keep (generated source, start-up's and old cycles); fewer collections.

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
the daemon serves, so the connections' objects fill the memory they held instead of new memory, and
freezes what is left (:func:`gc.freeze`): modules, classes and settings that live as long as the
daemon, which no collection need look at again.

A connection's objects that live long enough (a legacy HTTP session lives for its client's whole
conversation) reach the oldest generation, and when they become garbage in a cycle only a full
collection frees them. CPython runs one only once that generation has grown by a quarter since the
last, and none at all while the daemon makes few new objects, as after its clients leave: under
``bench/soak.py --configs http-legacy --clients 50`` the daemon grew by 12.5 MiB a minute and kept
74 MiB once its clients had gone, 43 MiB more than at the start; one full collection after a
minute of that load freed 46,613 objects. A finished relay, HTTP connection or legacy session is
in no cycle any more (reference counts free it); for whatever else makes one,
:func:`collect_old_garbage` runs a full collection every :data:`FULL_COLLECTION_PERIOD_S`.
"""

from __future__ import annotations

import gc
import linecache
from typing import NoReturn

import trio

# Young collections after this many more containers made than freed (CPython's default is 700):
# enough for a few hundred requests in flight to be freed by their reference counts before a
# collection sees them. What it delays is only cyclic garbage, which the relay makes little of
# (about 4 objects a young collection found under the load above), so memory does not grow.
GC_YOUNG_THRESHOLD = 20_000
# How long cyclic garbage may outlive its last use: a full collection this often. It looks at the
# objects made since start-up only (the rest are frozen): 1.0 to 1.4 ms in a daemon with 50 Unix
# or TCP clients connected (12,000 objects), against tens of megabytes a legacy HTTP soak kept
# without it (module docstring).
FULL_COLLECTION_PERIOD_S = 30.0


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
    """Collect every generation once, after start-up and before serving, and freeze what is left.

    Returns what it freed. Measured on a bridge serving Unix sockets (50 clients connected): 0.1 MiB
    less RSS. What is left is frozen (:func:`gc.freeze`): later collections skip it, and so would
    they a cycle among it that became garbage (reference counts still free the rest). The
    thresholds are not changed.
    """
    freed = gc.collect()
    gc.freeze()
    return freed


async def collect_old_garbage(period: float = FULL_COLLECTION_PERIOD_S) -> NoReturn:
    """Every ``period``, collect every generation; never returns.

    Cyclic garbage in the oldest generation then lives at most ``period``, loaded or idle.
    """
    while True:
        await trio.sleep(period)
        gc.collect()


def collect_garbage_less_often() -> None:
    """Raise the young collection's threshold to :data:`GC_YOUNG_THRESHOLD` (older ones keep theirs)."""
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, oldest)
