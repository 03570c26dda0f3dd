"""Limits and timeouts, each with what it protects and where the number comes from.

The table is docs/reference/limits.md, and where each default comes from is docs/design.md §6.
Every value can be changed on the command line; docs/reference/options.md lists the flags.
"""

from __future__ import annotations

import re

import attrs

from ._errors import ConfigError

MiB = 1024 * 1024

__all__ = ["Limits"]

# Longest message a client may send: python-sdk's DEFAULT_MAX_REQUEST_BODY_SIZE (4 MiB) for HTTP.
MAX_CLIENT_MESSAGE = 4 * MiB
# Longest line a child may write: tool results carry base64 blobs; hypercorn allows 16 MiB WebSocket
# messages. python-sdk's stdio transport has no limit at all, which is the gap this closes.
MAX_CHILD_MESSAGE = 16 * MiB
# Requests one connection may have in flight: bounds the id table one connection can grow.
MAX_IN_FLIGHT = 256
# Connections served at once across all listeners: HAProxy-style maxconn, sized for one host where
# each connection costs a child process.
MAX_CONNECTIONS = 256
# Shared mode: messages queued for one client before it is disconnected as too slow (the child's
# reader never waits for a client). websockets' max_queue is 16; 64 keeps a pipelining client busy.
CLIENT_QUEUE = 64
# ... and bytes, whichever bound comes first (Envoy's flow control bounds a connection's buffers in
# bytes, not in messages: one message may be 16 MiB).
CLIENT_QUEUE_BYTES = 8 * MiB
# Consecutive invalid messages tolerated before a client is disconnected: one mistake is answered and
# the connection goes on; a peer speaking another protocol (HTTP to a tcp: listener) is cut off.
MAX_CONSECUTIVE_ERRORS = 10

# One write to a client may take this long; after it the client is treated as gone (slow-read
# protection: a client that stops reading cannot hold its writer, or its child, forever).
SEND_TIMEOUT = 30.0
# After a client's EOF, its in-flight replies may take this long (socat's -t is 0.5 s, for bytes;
# a tool call needs far longer).
HALF_CLOSE_TIMEOUT = 30.0
# On SIGTERM, in-flight requests may finish within this; it must stay below systemd's
# TimeoutStopSec (90 s by default) minus the child stop below (hypercorn's graceful_timeout is 3 s).
DRAIN_TIMEOUT = 10.0
# Child stop, MCP order: after closing stdin, and after SIGTERM (python-sdk
# PROCESS_TERMINATION_TIMEOUT and FORCE_KILL_TIMEOUT are both 2 s; trio's run_process uses 5 s).
STOP_STDIN_TIMEOUT = 2.0
STOP_TERM_TIMEOUT = 2.0
# A request may run this long before the client gets -32001 and the child notifications/cancelled.
# None (the default): tool calls legitimately run for minutes, and MCP leaves timeouts to clients.
REQUEST_TIMEOUT: float | None = None
# After a child exits, its last output is still read for this long before in-flight requests are
# failed (a grandchild may hold stdout open forever, so EOF alone cannot be waited for).
EXIT_DRAIN_TIMEOUT = 0.5

_SIZE = re.compile(r"^\s*(\d+)\s*(B|KiB|MiB|GiB|KB|MB|GB|K|M|G)?\s*$", re.IGNORECASE)
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kib": 1024,
    "kb": 1000,
    "m": MiB,
    "mib": MiB,
    "mb": 1000**2,
    "g": 1024 * MiB,
    "gib": 1024 * MiB,
    "gb": 1000**3,
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_SECONDS = {"ms": 0.001, "": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_size(text: str, *, field: str) -> int:
    """``"4MiB"``, ``"512KiB"``, ``"1000"`` → bytes.

    Raises:
        ConfigError: naming ``field``.
    """
    match = _SIZE.match(text)
    if match is None or int(match.group(1)) == 0:
        raise ConfigError(f"{field}: expected a positive size such as 4MiB, 512KiB or 65536, got {text!r}")
    return int(match.group(1)) * _UNITS[(match.group(2) or "").lower()]


def parse_duration(text: str, *, field: str) -> float:
    """``"30s"``, ``"500ms"``, ``"2m"``, ``"1.5"`` → seconds.

    Raises:
        ConfigError: naming ``field``.
    """
    match = _DURATION.match(text)
    if match is None:
        raise ConfigError(f"{field}: expected a duration such as 30s, 500ms or 2m, got {text!r}")
    return float(match.group(1)) * _SECONDS[match.group(2) or ""]


@attrs.frozen
class Limits:
    """Every bound the bridge enforces; the defaults are the module's constants.

    Sizes are in bytes and durations in seconds. A plain value object: it owns nothing.

    Attributes:
        max_client_message: longest message a client may send; a longer one is answered with
            ``-32600`` and ends the connection.
        max_child_message: longest line the child may write; a longer reply is answered with
            ``-31001`` (``REPLY_TOO_LARGE``) for its request.
        max_in_flight: requests one connection may have in flight; one more is answered with
            ``-31002`` (``TOO_MANY_REQUESTS``).
        max_connections: connections served at once across all listeners; one more is answered
            with ``-31003`` (``TOO_MANY_CONNECTIONS``) and closed.
        max_consecutive_errors: invalid messages in a row after which a client is disconnected.
        client_queue: shared mode: messages queued for one client before it is disconnected as
            too slow.
        client_queue_bytes: shared mode: the same bound in bytes.
        send_timeout: how long one write to a client may wait before the client is treated as
            gone (``client-too-slow``).
        half_close_timeout: after a client's end of input, how long its replies in flight may
            take.
        drain_timeout: on a graceful stop, how long requests in flight may take to finish.
        stop_stdin_timeout: stopping a child, how long it has to exit after its stdin is closed.
        stop_term_timeout: then, how long it has to exit after SIGTERM, before SIGKILL.
        exit_drain_timeout: after a child exits, how long its last output is still read before
            its requests in flight are answered with an error.
        request_timeout: how long a request may run before the client gets ``-32001`` and the
            child ``notifications/cancelled``; ``None`` (the default) for no limit.
    """

    max_client_message: int = MAX_CLIENT_MESSAGE
    max_child_message: int = MAX_CHILD_MESSAGE
    max_in_flight: int = MAX_IN_FLIGHT
    max_connections: int = MAX_CONNECTIONS
    max_consecutive_errors: int = MAX_CONSECUTIVE_ERRORS
    client_queue: int = CLIENT_QUEUE
    client_queue_bytes: int = CLIENT_QUEUE_BYTES
    send_timeout: float = SEND_TIMEOUT
    half_close_timeout: float = HALF_CLOSE_TIMEOUT
    drain_timeout: float = DRAIN_TIMEOUT
    stop_stdin_timeout: float = STOP_STDIN_TIMEOUT
    stop_term_timeout: float = STOP_TERM_TIMEOUT
    exit_drain_timeout: float = EXIT_DRAIN_TIMEOUT
    request_timeout: float | None = REQUEST_TIMEOUT
