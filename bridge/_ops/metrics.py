"""Prometheus metrics in the text exposition format (version 0.0.4), rendered from a snapshot.

Sans-IO: :func:`render` turns :class:`~bridge.DaemonStatistics` and the supervisor's state into
the text Prometheus scrapes; the admin endpoint (:mod:`bridge._ops.admin`) serves it. The format is
simple enough not to need a client library (which would bring its own registry and threads).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from .._daemon.statistics import DaemonStatistics
from .._relay.requests import BUCKETS, RequestMetrics

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PREFIX = "mcp_bridge_"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    """Every digit: an int as is, a float by ``repr`` (``:g`` would round counters to 6 digits)."""
    return str(value) if isinstance(value, int) else repr(float(value))


def _samples(
    name: str, samples: Iterable[tuple[Mapping[str, str], float]], prefix: str = PREFIX
) -> list[str]:
    lines = []
    for labels, value in samples:
        label_text = ",".join(f'{key}="{_escape(text)}"' for key, text in sorted(labels.items()))
        lines.append(
            f"{prefix}{name}{{{label_text}}} {_number(value)}"
            if label_text
            else f"{prefix}{name} {_number(value)}"
        )
    return lines


def family(
    name: str,
    kind: str,
    help_text: str,
    samples: Iterable[tuple[Mapping[str, str], float]],
    prefix: str = PREFIX,
) -> list[str]:
    """One metric family's lines: HELP, TYPE, then each sample (its labels sorted and escaped)."""
    return [
        f"# HELP {prefix}{name} {help_text}",
        f"# TYPE {prefix}{name} {kind}",
        *_samples(name, samples, prefix),
    ]


def _request_families(requests: RequestMetrics, base: Mapping[str, str]) -> list[list[str]]:
    histogram = [
        f"# HELP {PREFIX}request_duration_seconds From a request's arrival to its reply "
        "being handed to the client.",
        f"# TYPE {PREFIX}request_duration_seconds histogram",
    ]
    for klass, counts in sorted(requests.bucket_counts.items()):
        labels = {**base, "method_class": klass}
        running = 0
        for bound, count in zip((*BUCKETS, float("inf")), counts, strict=True):
            running += count
            le = "+Inf" if bound == float("inf") else f"{bound:g}"
            histogram.extend(_samples("request_duration_seconds_bucket", [({**labels, "le": le}, running)]))
        total = requests.duration_sums.get(klass, 0.0)
        histogram.extend(_samples("request_duration_seconds_sum", [(labels, total)]))
        histogram.extend(_samples("request_duration_seconds_count", [(labels, running)]))
    return [
        family(
            "requests_total",
            "counter",
            "Requests received from clients, by method class.",
            [({**base, "method_class": klass}, count) for klass, count in sorted(requests.requests.items())],
        ),
        family(
            "request_errors_total",
            "counter",
            "Error replies sent to clients (the child's or the bridge's), by class and code.",
            [
                ({**base, "method_class": klass, "code": str(code)}, count)
                for (klass, code), count in sorted(requests.errors.items())
            ],
        ),
        histogram,
    ]


def render(
    stats: DaemonStatistics, *, server: str, healthy: bool, requests: RequestMetrics | None = None
) -> str:
    """The metrics of one bridge, labelled ``server="NAME"``; request metrics if given."""
    base = {"server": server}
    by_transport = [
        ({**base, "transport": transport}, count)
        for transport, count in sorted(stats.connections_by_transport.items())
    ]
    families = [
        family(
            "up",
            "gauge",
            "1 while the bridge is healthy (listening, shared child ready).",
            [(base, 1 if healthy else 0)],
        ),
        family("connections", "gauge", "Client connections being served.", [(base, stats.connections)]),
        family(
            "connections_accepted_total",
            "counter",
            "Client connections accepted, by transport (refused ones included).",
            by_transport or [({**base, "transport": "none"}, 0)],
        ),
        family(
            "connections_refused_total",
            "counter",
            "Connections refused: over --max-connections, or their child failed to start.",
            [(base, stats.connections_refused)],
        ),
        family(
            "handshakes_failed_total",
            "counter",
            "Connections that failed TLS, the WebSocket upgrade or authentication.",
            [(base, stats.handshakes_failed)],
        ),
        family(
            "http_sessions_evicted_total",
            "counter",
            "HTTP sessions ended at --max-sessions to make room (the least recently used idle one).",
            [(base, stats.sessions_evicted)],
        ),
        family(
            "oauth_tokens_total",
            "counter",
            "OAuth access tokens checked by HTTP and WebSocket listeners, by outcome.",
            [
                ({**base, "listener": listener, "outcome": outcome}, count)
                for (listener, outcome), count in sorted(stats.oauth_tokens.items())
            ],
        ),
        family(
            "requests_in_flight", "gauge", "Requests awaiting a reply.", [(base, stats.requests_in_flight)]
        ),
        family("children", "gauge", "Child processes serving clients.", [(base, stats.children)]),
        family(
            "children_prespawned",
            "gauge",
            "Children started ahead of connections.",
            [(base, stats.prespawned)],
        ),
        family(
            "child_restarts_total", "counter", "Restarts of the shared child.", [(base, stats.child_restarts)]
        ),
        family(
            "child_idle_stops_total",
            "counter",
            'Children stopped after idle_stop with no client (start = "on-demand").',
            [(base, stats.idle_stops)],
        ),
        family(
            "child_dropped_lines_total",
            "counter",
            "Lines from children dropped because they were not JSON-RPC.",
            [(base, stats.child_garbage_lines)],
        ),
        family(
            "stray_replies_total",
            "counter",
            "Replies from children dropped because they answered no request in flight "
            "(a second reply, or an unknown id).",
            [(base, stats.stray_replies)],
        ),
        family(
            "received_bytes_total",
            "counter",
            "Bytes read from clients, framing included.",
            [(base, stats.bytes_from_clients)],
        ),
        family(
            "sent_bytes_total",
            "counter",
            "Bytes written to clients, framing included.",
            [(base, stats.bytes_to_clients)],
        ),
    ]
    if requests is not None:
        families.extend(_request_families(requests, base))
    return "\n".join(line for family in families for line in family) + "\n"


def merge(texts: Sequence[str]) -> str:
    """Several servers' metrics as one exposition.

    Each family's HELP and TYPE come once, followed by every server's samples (Prometheus
    refuses a family declared twice).
    """
    families: dict[str, list[str]] = {}
    current: list[str] = []
    for text in texts:
        for line in text.splitlines():
            if line.startswith("# HELP "):
                name = line.split()[2]
                current = families.setdefault(name, [])
                if not current:
                    current.append(line)
            elif line.startswith("# TYPE "):
                if len(current) == 1:
                    current.append(line)
            else:
                current.append(line)
    return "".join(line + "\n" for lines in families.values() for line in lines)
