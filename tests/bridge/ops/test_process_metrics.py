"""The daemon process's own metrics: its build info, and the client libraries' ``process_*`` families from /proc.

The parse is checked on a stat line made to trip it; the reading on this test's own process,
against what the kernel and Python report by other means; the admin endpoint's on a real daemon,
in tests/bridge/ops/test_admin.py.
"""

from __future__ import annotations

import os
import platform
import resource
import sys
import time

import bridge
from bridge._limits import MiB
from bridge._ops.process_metrics import ProcessSample, build_info, parse_stat, read, render

from conftest import resident_bytes

# A command name with spaces and parentheses of its own, then the fields from the third (state)
# to the 24th (rss): utime 14 = 250, stime 15 = 50, starttime 22 = 1000, vsize 23, rss 24 = 300.
STAT = "4242 (a) b (c) S 1 4242 4242 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 1 0 1000 123456789 300 0\n"


def test_stat_fields_are_counted_after_the_last_parenthesis_of_the_command_name() -> None:
    sample = parse_stat(
        STAT, ticks_per_second=100, page_size=4096, boot_time=1_700_000_000.0, open_fds=7, max_fds=1024
    )
    assert sample == ProcessSample(
        cpu_seconds=3.0,  # (250 + 50) ticks at 100 a second
        resident_bytes=300 * 4096,
        virtual_bytes=123456789,
        start_time_seconds=1_700_000_010.0,  # boot time + 1000 ticks
        open_fds=7,
        max_fds=1024,
    )


def test_a_reading_of_this_process_agrees_with_what_the_kernel_and_python_report() -> None:
    cpu_before, rss_before = sum(os.times()[:2]), resident_bytes(os.getpid())
    sample = read()
    cpu_after, rss_after = sum(os.times()[:2]), resident_bytes(os.getpid())
    assert sample is not None
    ticks = os.sysconf("SC_CLK_TCK")  # the same clock ticks, compared as ticks (float sums are not exact)
    assert round(cpu_before * ticks) <= round(sample.cpu_seconds * ticks) <= round(cpu_after * ticks)
    assert min(rss_before, rss_after) - MiB <= sample.resident_bytes <= max(rss_before, rss_after) + MiB
    assert sample.virtual_bytes > sample.resident_bytes
    assert 0 < sample.start_time_seconds <= time.time()
    assert abs(sample.open_fds - len(os.listdir("/proc/self/fd"))) <= 1  # each listing opens one
    assert sample.max_fds == resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def test_the_six_families_render_in_the_text_format_with_help_and_type() -> None:
    sample = ProcessSample(
        cpu_seconds=3.5, resident_bytes=25_000_000, virtual_bytes=300_000_000,
        start_time_seconds=1_700_000_010.25, open_fds=12, max_fds=1024,
    )  # fmt: skip
    lines = render(sample).splitlines()
    assert lines[:3] == [
        "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.",
        "# TYPE process_cpu_seconds_total counter",
        "process_cpu_seconds_total 3.5",
    ]
    samples = dict(line.split() for line in lines if not line.startswith("#"))
    assert samples == {
        "process_cpu_seconds_total": "3.5",
        "process_open_fds": "12",
        "process_max_fds": "1024",
        "process_virtual_memory_bytes": "300000000",
        "process_resident_memory_bytes": "25000000",
        "process_start_time_seconds": "1700000010.25",
    }
    assert sum(line.startswith("# TYPE ") for line in lines) == 6


def test_build_info_is_one_gauge_at_1_labelled_with_the_bridges_and_pythons_versions() -> None:
    help_line, type_line, sample = build_info().splitlines()
    assert help_line.startswith("# HELP mcp_bridge_build_info ")
    assert type_line == "# TYPE mcp_bridge_build_info gauge"
    python = f"{sys.implementation.name} {platform.python_version()}"
    assert sample == f'mcp_bridge_build_info{{python="{python}",version="{bridge.__version__}"}} 1'
