"""Markdown tables from the results (what each column means: docs/benchmark.md, "Scenarios and columns")."""

from __future__ import annotations

import json

CELL_ERROR_CHARS = 24  # an error is cut to this in a table cell; the full text is listed below
NOTABLE_LINES_SHOWN = 5  # relay stderr lines that look like errors, shown for a row with errors


def short_error(message: str) -> str:
    """A failed cell's text: the error cut to :data:`CELL_ERROR_CHARS`, with no ``|`` to break the table."""
    if len(message) > CELL_ERROR_CHARS:
        message = message[: CELL_ERROR_CHARS - 1] + "…"
    return "error: " + message.replace("|", "/")


def _mib(kb: int) -> str:
    return f"{kb / 1024:.1f}"


def _busy(fractions: dict) -> str:
    return " / ".join("–" if fractions[name] is None else f"{fractions[name]:.0%}"
                      for name in ("client", "relay", "server", "other"))  # fmt: skip


def _us(value) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _string_ids(result: dict) -> str:
    if result["intact"]:
        return "yes"
    pairs = zip(result["sent"], result["returned"], strict=False)
    changed = [f"{sent!r} → {json.dumps(got)}" for sent, got in pairs if sent != got]
    return "no: " + ", ".join(changed)


def _http_counts(result: dict, prefix: str) -> str:
    """The HTTP client's counts whose key starts with ``prefix``, most frequent first."""
    found = [
        (key.removeprefix(prefix).strip(), n) for key, n in result["counts"].items() if key.startswith(prefix)
    ]
    found.sort(key=lambda item: -item[1])
    return "; ".join(f"{key} ×{n:,}" for key, n in found).replace("|", "/") or "none"


def _cell(results: dict, scenario: str, render) -> str:
    result = results.get(scenario)
    if result is None:
        return "–"
    if "error" in result:
        return short_error(result["error"])
    return render(result)


def _memory(render):
    return lambda r: "n/a (no relay)" if r["relay_memory"] is None else render(r["relay_memory"])


def columns(counts) -> tuple[list, list, list]:
    """(header, scenario key, renderer) for the speed, cost and behaviour tables."""
    clients = counts.clients
    speed = [
        ("seq p50 µs", "sequential", lambda r: f"{r['p50_us']:.0f}"),
        ("seq p99 µs", "sequential", lambda r: f"{r['p99_us']:.0f}"),
        (f"pipelined calls/s (×{counts.pipeline_window})", "pipelined", lambda r: f"{r['calls_per_s']:,.0f}"),
    ]
    for size in counts.large_sizes:
        speed.append(
            (f"{size >> 20} MiB echo ms", f"echo_{size >> 20}MiB", lambda r: f"{r['median_ms']:.1f}")
        )
    speed += [
        (f"{clients} clients wall s", "concurrent", lambda r: f"{r['wall_s']:.2f}"),
        (f"{clients} clients calls/s", "concurrent", lambda r: f"{r['calls_per_s']:,.0f}"),
        ("setup p50 ms", "setup", lambda r: f"{r['p50_ms']:.1f}"),
        ("spaced setup p50 ms", "spaced_setup", lambda r: f"{r['p50_ms']:.1f}"),
    ]
    cost = [
        ("relay CPU µs/call", "pipelined", lambda r: _us(r["cpu_us_per_call"]["relay"])),
        ("client CPU µs/call", "pipelined", lambda r: _us(r["cpu_us_per_call"]["client"])),
        ("server CPU µs/call", "pipelined", lambda r: _us(r["cpu_us_per_call"]["server"])),
        ("busy client / relay / server / other", "pipelined", lambda r: _busy(r["busy_fraction"])),
        ("bottleneck", "pipelined", lambda r: r["bottleneck"]),
        (f"relay RSS @{clients} MiB", "concurrent", _memory(lambda m: _mib(m["rss_kb"]))),
        (f"relay PSS @{clients} MiB", "concurrent", _memory(lambda m: _mib(m["pss_kb"]))),
        ("relay procs counted", "concurrent", _memory(lambda m: str(m["processes"]))),
        (f"total RSS @{clients} MiB", "concurrent", lambda r: _mib(r["total_memory"]["rss_kb"])),
        ("servers counted", "concurrent", lambda r: str(r["total_memory"]["servers"])),
    ]
    behaviour = [
        ("string ids intact", "string_ids", _string_ids),
        ("HTTP replies", "http", lambda r: _http_counts(r, "replies: ")),
        ("HTTP DELETE", "http", lambda r: _http_counts(r, "DELETE")),
        (
            "conns closed by server",
            "http",
            lambda r: f"{r['counts'].get('connections closed by the server', 0):,}",
        ),
    ]
    return speed, cost, behaviour


def table(rows: list[dict], cols: list) -> str:
    header = ["row"] + [name for name, _, _ in cols]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["--:"] * len(cols)) + "|"]
    for row in rows:
        cells = [row["name"]] + [_cell(row["results"], key, render) for _, key, render in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def problems(rows: list[dict]) -> list[str]:
    """Full error texts (each distinct one once per row) and the relays' stop notes."""
    found = []
    for row in rows:
        seen = {}
        for scenario, result in row["results"].items():
            if "error" in result:
                seen.setdefault(result["error"], []).append(scenario)
        for message, scenarios in seen.items():
            found.append(f"- {row['name']} ({', '.join(scenarios)}): {message}")
        found += [f"- {row['name']}: {note}" for note in row["notes"]]
        if seen and row.get("stderr_tail"):
            found.append(f"  last stderr line of {row['name']}: {row['stderr_tail'][-1]}")
        if seen:
            found += [f"  stderr: {line}" for line in row.get("stderr_notable", [])[-NOTABLE_LINES_SHOWN:]]
    return found


def render(rows: list[dict], counts, header: str) -> str:
    speed, cost, behaviour = columns(counts)
    parts = [header, "", table(rows, speed), "", table(rows, cost), "", table(rows, behaviour)]
    notes = problems(rows)
    if notes:
        parts += ["", "Errors and notes:", *notes]
    return "\n".join(parts)
