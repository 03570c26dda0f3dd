"""Where a relay's memory goes: its RSS with N clients connected, grouped by mapping.

Run from the repository root::

    python bench/memory_map.py [--clients 50] [--baseline CHECKOUT] ROW [ROW ...]

Each row is started as ``bench/run.py`` starts it, N sessions are opened through the benchmark's
own client (each ``initialize`` and 20 calls, as the ``concurrent`` scenario does) and left open,
and the relay process's ``/proc/PID/smaps`` is read and grouped (:data:`GROUPS`). With
``--baseline``, each bridge row is followed by the same row served by that checkout's code. Prints
a Markdown table, a column per row, in MiB.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import procfs
from scenarios import _Client, close_sessions, run_sessions
from targets import BASELINE_SUFFIX, TARGET_NAMES, make_target

CALLS_PER_CLIENT = 20  # as bench/run.py's concurrent scenario
OTHER = "everything else (libc, libm, other extension modules, stacks)"
# Each group and the mapping names it takes (a prefix of the file's base name or the label).
GROUPS = (
    ("Python objects (anonymous memory and the heap)", ("[anon]", "[heap]")),
    ("`libpython`", ("libpython",)),
    ("OpenSSL (`libcrypto`, `libssl`, `_ssl`, `_hashlib`)", ("libcrypto", "libssl", "_ssl.", "_hashlib.")),
    ("`bz2` and `lzma` (`libbz2`, `liblzma`, `_bz2`, `_lzma`)", ("libbz2", "liblzma", "_bz2.", "_lzma.")),
)


def grouped(resident: dict[str, int]) -> dict[str, int]:
    """Kilobytes per group of :data:`GROUPS` (and :data:`OTHER`) from :func:`procfs.rss_by_mapping_kb`."""
    totals = dict.fromkeys([label for label, _ in GROUPS] + [OTHER], 0)
    for name, kilobytes in resident.items():
        label = next((label for label, prefixes in GROUPS if name.startswith(prefixes)), OTHER)
        totals[label] += kilobytes
    return totals


def measure(row: str, clients: int, baseline: Path | None) -> dict[str, int]:
    """Start ``row``, connect ``clients`` sessions, and group its relay's RSS."""
    target = make_target(row, baseline)
    target.start()
    sessions = [_Client(number, CALLS_PER_CLIENT) for number in range(clients)]
    try:
        run_sessions(target, sessions)
        resident: dict[str, int] = {}
        for pid in target.relay_pids():
            with open(f"/proc/{pid}/smaps") as smaps:
                for name, kilobytes in procfs.rss_by_mapping_kb(smaps.read()).items():
                    resident[name] = resident.get(name, 0) + kilobytes
    finally:
        close_sessions(sessions)
        target.stop()
    return grouped(resident)


def table(columns: dict[str, dict[str, int]]) -> str:
    """A Markdown table: a line per group and the total, a column per row, in MiB."""
    labels = [*columns[next(iter(columns))], "total"]
    lines = ["| | " + " | ".join(columns) + " |", "|---|" + "--:|" * len(columns)]
    for label in labels:
        cells = [sum(kb.values()) if label == "total" else kb[label] for kb in columns.values()]
        lines.append(f"| {label} | " + " | ".join(f"{cell / 1024:.2f}" for cell in cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rows", nargs="+", choices=[name for name in TARGET_NAMES if name != "direct"])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--baseline", type=Path, help="another checkout: each bridge row again, from it")
    options = parser.parse_args()
    names = [
        variant
        for name in options.rows
        for variant in (
            [name, name + BASELINE_SUFFIX] if options.baseline and name.startswith("bridge") else [name]
        )
    ]
    baseline = options.baseline.resolve() if options.baseline else None
    print(table({name: measure(name, options.clients, baseline) for name in names}))


if __name__ == "__main__":
    main()
