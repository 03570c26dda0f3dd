"""glibc's heap under large messages: freed large blocks kept through a burst, given back after it.

The bridge relays messages of up to 16 MiB (more with ``--max-message``), and each passes through
a few buffers of its size: the bytes read, the decoded text, the parsed string, the encoded bytes.
glibc serves a block above its mmap threshold (128 KiB at first) with an ``mmap`` of its own and
unmaps it when it is freed, so each such buffer is faulted in afresh, a page at a time: 4,096
page faults for 16 MiB, about 33,000 per 16 MiB echo in the relay, which took more than 40 % of
its CPU for one (``bench/passes.py bridge-unix --calls 3 --echo 16``: 127 of 270 ms in the kernel).
Left alone, glibc raises that threshold to the size of the last mapped block freed (mallopt(3),
"dynamic mmap threshold"), and from then on such blocks come from the heap and stay in the process
once freed: one 16 MiB echo over HTTP left the daemon at 150 MiB instead of 67.

A block above glibc's largest mmap threshold (32 MiB) is mapped whatever the threshold, and
orjson asks for such a block every time it encodes a large message: room for the worst case,
about 16 bytes a character (265,818,112 bytes for a 16 MiB reply), of which it writes the first
16 MiB and then copies them out. Mapped afresh, those 16 MiB are faulted in again for every large
message encoded, twice per echo (about 8,200 faults).

So the daemon tells glibc to map no block of its own (``M_MMAP_MAX`` 0): every block comes from
the heap, which ``free`` does not shrink by itself (:data:`TRIM_THRESHOLD`), and
:func:`give_back_freed_memory` trims it (malloc_trim(3): the heap's top, and every whole free page
inside it) once every :data:`TRIM_PERIOD_S` while :data:`TRIM_FROM_BYTES` or more of it are free.
Large messages that follow one another reuse pages already mapped, and a reservation the encoder
never writes to costs address space, not memory; once they stop, the memory goes back to the
system within :data:`TRIM_PERIOD_S`. (Where the heap cannot grow, glibc still maps what it needs.)
Only the daemon's command line does this; a program embedding the library keeps its C library's
own policy.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from collections.abc import Callable
from typing import NoReturn

import attrs
import trio

logger = logging.getLogger("bridge.memory")

# mallopt(3) parameters (malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
# Blocks glibc may map on their own at once: none, so that every block comes from the heap.
MMAP_MAX = 0
# ``free`` gives the heap's top back by itself only past this much (mallopt takes an int): in
# practice never, the trim below does it.
TRIM_THRESHOLD = 2**31 - 1
# How often the heap is looked at: how long memory freed by a large message may stay in the
# process, and at most one round of page faults this often under a steady flow of large messages.
TRIM_PERIOD_S = 2.0
# Free in the heap before a look trims it: the old fixed mmap threshold, above which every block went
# back at once (smaller ones glibc keeps in any case).
TRIM_FROM_BYTES = 1024 * 1024


class _MallInfo2(ctypes.Structure):
    """``struct mallinfo2`` (glibc 2.33 and later), mallinfo(3)."""

    _fields_ = [  # ten size_t counts, in this order
        (name, ctypes.c_size_t)
        for name in (
            *("arena", "ordblks", "smblks", "hblks", "hblkhd"),
            *("usmblks", "fsmblks", "uordblks", "fordblks", "keepcost"),
        )
    ]


@attrs.frozen
class Heap:
    """glibc's allocator, reached through :mod:`ctypes`: how much of its heap is free, and a trim.

    Made by :meth:`configure`, which has set the thresholds the trims rely on.
    """

    _mallinfo2: Callable[[], _MallInfo2]
    _malloc_trim: Callable[[int], int]

    @classmethod
    def configure(cls) -> Heap | None:
        """Have glibc map no block itself (:data:`MMAP_MAX`) and keep its freed top; the heap to trim.

        The freed top is kept up to :data:`TRIM_THRESHOLD`, in practice always.

        ``None`` where the C library is not glibc 2.33 or later (musl has neither ``mallopt`` nor
        ``mallinfo2``): nothing is changed there, and large blocks are the C library's business.
        """
        name = ctypes.util.find_library("c")
        if name is None:
            return None
        try:
            libc = ctypes.CDLL(name)
            mallinfo2, malloc_trim, mallopt = libc.mallinfo2, libc.malloc_trim, libc.mallopt
        except (OSError, AttributeError):
            logger.debug("no glibc 2.33 or later: large blocks are left to the C library's policy")
            return None
        mallinfo2.restype = _MallInfo2
        mallinfo2.argtypes = []
        malloc_trim.restype = ctypes.c_int
        malloc_trim.argtypes = [ctypes.c_size_t]
        # No mapped blocks first: if glibc refuses, nothing is changed. The trim threshold alone,
        # with no trimmer, would keep every freed block in the process for good; no mapped blocks
        # alone leaves free() shrinking the heap's top as it always did.
        if not (mallopt(M_MMAP_MAX, MMAP_MAX) and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)):
            return None
        return cls(mallinfo2, malloc_trim)

    def free_bytes(self) -> int:
        """Bytes free in the heap's chunks (``fordblks``), given back to the system or not."""
        return int(self._mallinfo2().fordblks)

    def trim(self) -> None:
        """Give back the heap's free top and every whole free page inside it (malloc_trim(3))."""
        self._malloc_trim(0)


async def give_back_freed_memory(
    free_bytes: Callable[[], int],
    trim: Callable[[], None],
    *,
    period: float = TRIM_PERIOD_S,
    from_bytes: int = TRIM_FROM_BYTES,
) -> NoReturn:
    """Every ``period``, ``trim`` if ``from_bytes`` or more of the heap are free; never returns.

    Whatever a trim gave back stays counted as free (glibc keeps the chunks, the kernel has their
    pages), and a large message may have used those pages again since: the count cannot tell, so
    each look trims. A trim with nothing to give back costs a system call per free chunk, a few
    dozen microseconds.
    """
    while True:
        await trio.sleep(period)
        if free_bytes() >= from_bytes:
            trim()
