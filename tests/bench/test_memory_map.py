"""bench/memory_map.py groups a relay's resident memory by mapping, and the groups add up to its RSS.

The tool behind the "Where the memory goes" table of docs/performance.md.
"""

from __future__ import annotations

import sys

from bench_tables import bench_table

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
from memory_map import GROUPS, OTHER, grouped
from procfs import rss_by_mapping_kb

# Three mappings as /proc/PID/smaps writes them: a library's, an unnamed one, the heap; the first
# two with a field after Rss that must not be taken for it.
SMAPS = """\
7f0000000000-7f0000100000 r-xp 00000000 08:01 1234   /usr/lib/x86_64-linux-gnu/libcrypto.so.3
Size:               1024 kB
Rss:                 300 kB
Pss:                 150 kB
7f0000100000-7f0000200000 rw-p 00000000 00:00 0
Size:               1024 kB
Rss:                  40 kB
Pss:                  40 kB
55d000000000-55d000100000 rw-p 00000000 00:00 0      [heap]
Rss:                   8 kB
"""


def test_resident_kilobytes_are_summed_per_mapping_named_by_its_file_or_label() -> None:
    assert rss_by_mapping_kb(SMAPS) == {"libcrypto.so.3": 300, "[anon]": 40, "[heap]": 8}


def test_every_mapping_falls_in_one_group_so_the_groups_add_up_to_the_whole() -> None:
    with open("/proc/self/smaps") as smaps:
        resident = rss_by_mapping_kb(smaps.read())
    groups = grouped(resident)
    assert list(groups) == [label for label, _ in GROUPS] + [OTHER]
    assert sum(groups.values()) == sum(resident.values())
    assert grouped(rss_by_mapping_kb(SMAPS))["OpenSSL (`libcrypto`, `libssl`, `_ssl`, `_hashlib`)"] == 300


async def test_the_memory_map_of_a_unix_bridge_shows_no_openssl() -> None:
    cells = await bench_table("bench/memory_map.py", "--clients", "3", "bridge-unix")
    rows = {label: values for label, *values in cells[2:]}  # after the header and the alignment line
    assert cells[0][1:] == ["bridge-unix"]
    assert rows["OpenSSL (`libcrypto`, `libssl`, `_ssl`, `_hashlib`)"] == ["0.00"]
    assert float(rows["total"][0]) > 0
