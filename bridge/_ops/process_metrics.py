"""The daemon process's own metrics: which bridge it runs, and what it uses (CPU, memory, descriptors).

The usage figures are the ``process_*`` metrics of the Prometheus client-library guidelines
("Process metrics"), with their names, types and meanings, which every official client library
exports: a dashboard or alert made for any of them (CPU per second, RSS, descriptors against their
limit, restarts by start time) works on the bridge as it is. ``mcp_bridge_build_info`` is the
usual "info" gauge, always 1, whose labels say which mcp-bridge and which Python a process runs
(one query lists the versions of a fleet during a rollout). The admin endpoint
(:mod:`bridge._ops.admin`) appends them once per scrape, after every server's own metrics; they
describe the one process that serves them all, children not included.

:func:`parse_stat` is sans-IO (``/proc/self/stat``'s text and the system's constants in, a
:class:`ProcessSample` out); :func:`read` does the reading, and gives ``None`` where there is no
``/proc`` (not Linux): then there are no process metrics, as with the client libraries.
"""

from __future__ import annotations

import functools
import os
import resource
import sys

import attrs

from .._version import __version__
from .metrics import family

STAT = "/proc/self/stat"
FDS = "/proc/self/fd"
SYSTEM_STAT = "/proc/stat"  # its "btime" line: the boot time, in seconds since the epoch

# proc(5), /proc/PID/stat: fields counted from 1, the second (the command name, in parentheses)
# may hold spaces and parentheses itself, so the fields are counted after its last ")", the
# third field (the state) being the first there.
_FIRST_AFTER_NAME = 3
UTIME, STIME, STARTTIME, VSIZE, RSS = 14, 15, 22, 23, 24


@attrs.frozen
class ProcessSample:
    """One reading of the process's figures, in the units the metrics are in."""

    cpu_seconds: float  # user and system CPU time
    resident_bytes: int
    virtual_bytes: int
    start_time_seconds: float  # since the epoch
    open_fds: int
    max_fds: int  # the soft limit (RLIMIT_NOFILE); RLIM_INFINITY where there is none


def parse_stat(
    stat: str, *, ticks_per_second: int, page_size: int, boot_time: float, open_fds: int, max_fds: int
) -> ProcessSample:
    """A :class:`ProcessSample` from ``/proc/self/stat``'s text and the system's constants."""
    fields = stat[stat.rindex(")") + 1 :].split()

    def field(number: int) -> int:
        return int(fields[number - _FIRST_AFTER_NAME])

    return ProcessSample(
        cpu_seconds=(field(UTIME) + field(STIME)) / ticks_per_second,
        resident_bytes=field(RSS) * page_size,
        virtual_bytes=field(VSIZE),
        start_time_seconds=boot_time + field(STARTTIME) / ticks_per_second,
        open_fds=open_fds,
        max_fds=max_fds,
    )


@functools.cache  # the boot time does not change: /proc/stat is read at the first scrape only
def _boot_time() -> float:
    with open(SYSTEM_STAT) as system:
        for line in system:
            if line.startswith("btime "):
                return float(line.split()[1])
    raise OSError(f"{SYSTEM_STAT} has no btime line")


def read() -> ProcessSample | None:
    """This process's figures now, or ``None`` without ``/proc``."""
    try:
        with open(STAT) as stat:
            text = stat.read()
        return parse_stat(
            text,
            ticks_per_second=os.sysconf("SC_CLK_TCK"),
            page_size=os.sysconf("SC_PAGE_SIZE"),
            boot_time=_boot_time(),
            open_fds=len(os.listdir(FDS)),
            max_fds=resource.getrlimit(resource.RLIMIT_NOFILE)[0],
        )
    except OSError:  # no /proc: not Linux, or a sandbox without it
        return None


def render(sample: ProcessSample) -> str:
    """The six ``process_*`` families in the text exposition format, HELP and TYPE each."""
    families = (
        (
            "cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            sample.cpu_seconds,
        ),
        ("open_fds", "gauge", "Number of open file descriptors.", sample.open_fds),
        ("max_fds", "gauge", "Maximum number of open file descriptors.", sample.max_fds),
        ("virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", sample.virtual_bytes),
        ("resident_memory_bytes", "gauge", "Resident memory size in bytes.", sample.resident_bytes),
        (
            "start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            sample.start_time_seconds,
        ),
    )
    return "".join(
        line + "\n"
        for name, kind, help_text, value in families
        for line in family(name, kind, help_text, [({}, value)], prefix="process_")
    )


def build_info() -> str:
    """``mcp_bridge_build_info``: always 1, labelled with the bridge's and Python's versions."""
    python = f"{sys.implementation.name} {'.'.join(map(str, sys.version_info[:3]))}"
    labels = {"python": python, "version": __version__}
    lines = family(
        "build_info", "gauge", "The mcp-bridge version and the Python it runs on; always 1.", [(labels, 1)]
    )
    return "".join(line + "\n" for line in lines)
