"""The soak's verdict: the JSON summary, the checks with their thresholds, and the printed table."""

from __future__ import annotations

import argparse
import platform
import sys
from typing import Any

FD_SLACK = 8  # end fds may exceed the start by this many (log handlers, the resolver, epoll)
# End RSS may exceed the start by this much: CPython keeps freed arenas and the allocator's caches
# after a peak of 1 MiB replies in flight; a leak of one buffer per request grows far past it.
RSS_SLACK_MIB = 64
# RSS over the second half of the load must grow slower than this, or by less than the floor over
# the whole half (a short run's noise: 1 MiB replies come and go).
RSS_SLOPE_MIB_PER_MIN = 4.0
RSS_HALF_GROWTH_FLOOR_MIB = 16.0


def rss_slope(samples: list[dict[str, Any]], duration: float) -> float:
    """Least-squares slope of RSS (MiB per minute) over the second half of the load."""
    points = [(s["t"], s["rss_kb"] / 1024) for s in samples if duration / 2 <= s["t"] <= duration]
    if len(points) < 3:
        return 0.0
    mean_t = sum(t for t, _ in points) / len(points)
    mean_r = sum(r for _, r in points) / len(points)
    var = sum((t - mean_t) ** 2 for t, _ in points)
    return 0.0 if var == 0 else 60 * sum((t - mean_t) * (r - mean_r) for t, r in points) / var


def summary(
    options: argparse.Namespace,
    tallies: dict[str, Any],
    bridges: dict[str, Any],
    samples: dict[str, list[dict[str, Any]]],
    start: dict[str, Any],
    end: dict[str, Any],
    running: dict[str, bool],
    stops: dict[str, Any],
    wall: float,
    load_s: float,
) -> dict[str, Any]:
    configs = {}
    for name, tally in tallies.items():
        series = samples[name]
        peak = {key: max([s[key] for s in series] + [start[name][key]]) for key in ("fds", "rss_kb", "procs")}
        bridge = bridges[name]
        configs[name] = {
            "listen": bridge.listen,
            "child": bridge.child,
            "calls": tally.sent,
            "results": tally.results,
            "errors": dict(tally.errors.most_common()),
            "lost": tally.lost,
            "in_close_window": tally.in_close_window,
            "duplicated": tally.duplicated,
            "late": tally.late,
            "unexpected": tally.unexpected,
            "unsent": tally.unsent,
            "cancelled": tally.cancelled,
            "cancelled_answered": tally.cancelled_answered,
            "progress_notifications": tally.progress,
            "connections": tally.connections,
            "disconnects_after_kill": tally.disconnects,
            "unexplained_disconnects": tally.unexplained_disconnects,
            "faults": dict(tally.faults),
            "bad_inputs": dict(sorted(tally.bad_inputs.items())),
            "failures": tally.failures,
            "lost_examples": tally.lost_examples,
            "bridge": {
                "start": start[name],
                "peak": peak,
                "end": end[name],
                "rss_slope_mib_per_min": round(rss_slope(series, options.duration), 2),
                "running_at_end": running[name] and not bridge.exited_early,
                "tracebacks": bridge.tracebacks,
                "error_lines": bridge.errors,
                "notable_log": bridge.notable,
                "warnings": dict(bridge.warnings.most_common(10)),
                "stop": stops[name],
            },
        }
    return {
        "command": " ".join(["bench/soak.py", *sys.argv[1:]]),
        "started": wall,
        "machine": f"{platform.machine()}, {platform.python_version()}",
        "duration_s": options.duration,
        "load_phase_s": round(load_s, 1),
        "clients": options.clients,
        "kill_every_s": options.kill_every,
        "thresholds": {
            "fd_slack": FD_SLACK,
            "rss_slack_mib": RSS_SLACK_MIB,
            "rss_slope_mib_per_min": RSS_SLOPE_MIB_PER_MIN,
            "rss_half_growth_floor_mib": RSS_HALF_GROWTH_FLOOR_MIB,
        },
        "configs": configs,
    }


def checks(result: dict[str, Any], drain_budget_s: float) -> list[dict[str, Any]]:
    """Every guarantee, per configuration: ``{"config", "check", "ok", "detail"}``."""
    found = []
    half_minutes = result["duration_s"] / 2 / 60
    slope_limit = max(RSS_SLOPE_MIB_PER_MIN, RSS_HALF_GROWTH_FLOOR_MIB / half_minutes)
    for name, c in result["configs"].items():
        b = c["bridge"]
        start, end, stop = b["start"], b["end"], b["stop"]
        rows = [
            (
                "every request got exactly one reply in its bound",
                c["lost"] == 0 and c["duplicated"] == 0 and c["late"] == 0 and c["unexpected"] == 0,
                f"lost {c['lost']}, duplicated {c['duplicated']}, late {c['late']}, "
                f"unexpected {c['unexpected']}; " + "; ".join(c["lost_examples"][:2]),
            ),
            ("the bridge never exited", b["running_at_end"], ""),
            (
                "no client was disconnected but by a kill of its child",
                not c["unexplained_disconnects"],
                "; ".join(c["unexplained_disconnects"][:3]),
            ),
            ("every fault was answered in its bound", not c["failures"], "; ".join(c["failures"][:3])),
            (
                "fds back near the start",
                end["fds"] <= start["fds"] + FD_SLACK,
                f"{start['fds']} -> {end['fds']} (slack {FD_SLACK})",
            ),
            ("no child process left", end["procs"] <= start["procs"], f"{start['procs']} -> {end['procs']}"),
            (
                "RSS back near the start",
                end["rss_kb"] <= start["rss_kb"] + RSS_SLACK_MIB * 1024,
                f"{start['rss_kb'] // 1024} -> {end['rss_kb'] // 1024} MiB (slack {RSS_SLACK_MIB})",
            ),
            (
                "RSS flat over the second half",
                b["rss_slope_mib_per_min"] <= slope_limit,
                f"{b['rss_slope_mib_per_min']} MiB/min (limit {slope_limit:.1f})",
            ),
            (
                "SIGTERM stops it in the drain budget with exit 0",
                stop["returncode"] == 0 and stop["within_budget"] and stop["leftover_processes"] == 0,
                f"exit {stop['returncode']} in {stop['seconds']} s (budget {drain_budget_s:.0f}), "
                f"{stop['leftover_processes']} left",
            ),
            ("no traceback in the log", b["tracebacks"] == 0, "; ".join(b["notable_log"][:2])),
        ]
        found += [
            {"config": name, "check": check, "ok": bool(ok), "detail": detail} for check, ok, detail in rows
        ]
    return found


def print_table(result: dict[str, Any]) -> None:
    configs = result["configs"]
    names = list(configs)
    width = max(22, *(len(n) for n in names))
    print(
        f"\nsoak: {result['duration_s']:.0f} s, {result['clients']} clients per configuration, "
        f"child killed every {result['kill_every_s']:.0f} s\n"
    )
    header = f"{'':32}" + "".join(f"{n:>{width}}" for n in names)
    print(header)

    def row(label: str, values: list[Any]) -> None:
        print(f"{label:32}" + "".join(f"{v!s:>{width}}" for v in values))

    row("calls", [c["calls"] for c in configs.values()])
    row("results", [c["results"] for c in configs.values()])
    row("errors", [sum(c["errors"].values()) for c in configs.values()])
    row("lost", [c["lost"] for c in configs.values()])
    row("unanswered, closing window", [c["in_close_window"] for c in configs.values()])
    row("duplicated", [c["duplicated"] for c in configs.values()])
    row("late", [c["late"] for c in configs.values()])
    row("not sent: connection closed", [c.get("unsent", 0) for c in configs.values()])
    row("cancelled (answered)", [f"{c['cancelled']} ({c['cancelled_answered']})" for c in configs.values()])
    row("progress notifications", [c["progress_notifications"] for c in configs.values()])
    row(
        "connections / after a kill",
        [f"{c['connections']}/{c['disconnects_after_kill']}" for c in configs.values()],
    )
    row("children killed", [c["faults"].get("child killed", 0) for c in configs.values()])
    row("bad inputs", [sum(c["bad_inputs"].values()) for c in configs.values()])
    for key, label in (("fds", "fds"), ("rss_kb", "RSS MiB"), ("procs", "processes")):
        scale = 1024 if key == "rss_kb" else 1
        row(
            f"{label} start/peak/end",
            [
                "/".join(str(c["bridge"][when][key] // scale) for when in ("start", "peak", "end"))
                for c in configs.values()
            ],
        )
    row("RSS slope, 2nd half (MiB/min)", [c["bridge"]["rss_slope_mib_per_min"] for c in configs.values()])
    row(
        "SIGTERM: exit, seconds",
        [f"{c['bridge']['stop']['returncode']}, {c['bridge']['stop']['seconds']}" for c in configs.values()],
    )
    reasons = sorted({r for c in configs.values() for r in c["errors"]})
    if reasons:
        print("\nerrors by reason")
        for reason in reasons:
            row(f"  {reason}", [c["errors"].get(reason, 0) for c in configs.values()])
    failed = [check for check in result["checks"] if not check["ok"]]
    print(f"\nchecks: {len(result['checks']) - len(failed)} passed, {len(failed)} failed")
    for check in failed:
        print(f"  FAIL {check['config']}: {check['check']}: {check['detail']}")
