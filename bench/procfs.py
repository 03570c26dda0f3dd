"""Per-process CPU and memory accounting from /proc (Linux only).

CPU is the kernel's own per-task accounting of the process, never its children's: the run time in
``/proc/PID/task/*/schedstat`` summed over the process's threads (nanoseconds). That is the quantity
``/proc/PID/stat`` reports as ``utime + stime``, but the latter is rounded to clock ticks (10 ms),
too coarse for a window of a fraction of a second; it is kept as a cross-check
(:func:`tick_cpu_seconds`). A thread that ends inside a window takes its run time with it from the
schedstat sum (not from utime+stime), so compare the two if a relay spawns short-lived threads.

CPU deltas are taken per pid: a process that appears during a window counts in full, one that
disappears during it is left out (they are idle sessions from an earlier scenario).
"""

from __future__ import annotations

import os

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (state is index 0), or None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            data = file.read().decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    return data[data.rindex(")") + 2 :].split()


def comm(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm", "rb") as file:
            return file.read().decode(errors="replace").strip()
    except (FileNotFoundError, ProcessLookupError):
        return None


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return file.read().decode(errors="replace").split("\0")
    except (FileNotFoundError, ProcessLookupError):
        return []


def is_alive(pid: int) -> bool:
    """True for a running process (a zombie waiting to be reaped is not alive)."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def _parent_map() -> dict[int, int]:
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat_fields(int(name))
            if fields is not None:
                parents[int(name)] = int(fields[1])
    return parents


def children(pid: int) -> list[int]:
    return [child for child, parent in _parent_map().items() if parent == pid]


def descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for child, parent in _parent_map().items():
        kids.setdefault(parent, []).append(child)
    found, frontier = [], [pid]
    while frontier:
        below = kids.get(frontier.pop(), [])
        found.extend(below)
        frontier.extend(below)
    return found


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """Own CPU seconds of each live pid: the run time of its live threads, in nanoseconds."""
    result = {}
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except (FileNotFoundError, ProcessLookupError):
            continue
        total_ns = 0
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/schedstat", "rb") as file:
                    total_ns += int(file.read().split()[0])  # first field: time on a CPU, ns
            except (FileNotFoundError, ProcessLookupError):
                pass  # the thread ended between listdir and open
        result[pid] = total_ns / 1e9
    return result


def tick_cpu_seconds(pids: list[int]) -> dict[int, float]:
    """utime+stime of each live pid from /proc/PID/stat: includes ended threads, but in ticks."""
    result = {}
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is not None:
            # after the name: state(0) ppid(1) ... utime(11) stime(12)
            result[pid] = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS_PER_S
    return result


def cpu_delta(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def _status_kb(pid: int, field: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as file:
            for line in file:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def rss_kb(pid: int) -> int:
    """Resident set size now (VmRSS)."""
    return _status_kb(pid, "VmRSS")


def peak_rss_kb(pid: int) -> int:
    """Highest resident set size over the process's life (VmHWM)."""
    return _status_kb(pid, "VmHWM")


def pss_kb(pid: int) -> int:
    """Proportional set size: shared pages split between the processes sharing them."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as file:
            for line in file:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0


def rss_by_mapping_kb(smaps: str) -> dict[str, int]:
    """Resident kilobytes per mapping in the text of ``/proc/PID/smaps``: a file's base name, or
    the kernel's label (``[heap]``, ``[stack]``); an unnamed mapping is ``[anon]``."""
    resident: dict[str, int] = {}
    name = "[anon]"
    for line in smaps.splitlines():
        fields = line.split()
        if not fields:
            continue
        if not fields[0].endswith(":"):  # a mapping's header: ADDRESS-RANGE PERMS OFFSET DEV INODE [NAME]
            name = os.path.basename(fields[5]) if len(fields) > 5 else "[anon]"
        elif fields[0] == "Rss:":
            resident[name] = resident.get(name, 0) + int(fields[1])
    return resident


def machine_cpu_seconds() -> tuple[float, float]:
    """(busy, busy + idle) CPU seconds of the whole machine, all cores, from /proc/stat (ticks)."""
    with open("/proc/stat") as file:
        fields = [int(value) for value in file.readline().split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    busy = user + nice + system + irq + softirq + steal
    return busy / CLOCK_TICKS_PER_S, (busy + idle + iowait) / CLOCK_TICKS_PER_S
