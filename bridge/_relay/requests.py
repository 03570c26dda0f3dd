"""Request metrics: counts by method class, errors by code, and a latency histogram (sans-IO).

Measured at the client's side of the bridge, so that every mode (per-connection, shared) and
every answer (the child's, or the bridge's own error) is counted the same way: a request is timed
from the moment the bridge received it to the moment its reply was handed to the client's
channel. Only recorded with ``--admin`` (the daemon wraps client channels in
:class:`MeteredChannel` then); otherwise it costs nothing.
"""

from __future__ import annotations

import bisect
import time
from collections import Counter, OrderedDict
from collections.abc import Sequence
from typing import final

import attrs

from channels import JSONObject, MessageChannel, ProtocolError

from .wrapped import WrappedChannel

# Prometheus client libraries' default histogram buckets, in seconds, plus 30 s and 60 s for long
# tool calls.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# The method classes of MCP (the part before "/", or the whole name); anything else is "other",
# which keeps the label set bounded whatever clients send.
METHOD_CLASSES = frozenset(
    {
        "initialize",
        "ping",
        "tools",
        "resources",
        "prompts",
        "completion",
        "logging",
        "sampling",
        "elicitation",
        "roots",
        "server",
        "subscriptions",
        "tasks",
        "notifications",
    }
)
# Requests a connection may have timed at once; past this the oldest are forgotten (a client that
# cancels never gets a reply, so its entries would otherwise stay).
MAX_TIMED_PER_CONNECTION = 1024


def method_class(method: object) -> str:
    """``"tools"`` for ``"tools/call"``; ``"other"`` for anything not an MCP method class."""
    if not isinstance(method, str):
        return "other"
    head = method.partition("/")[0]
    return head if head in METHOD_CLASSES else "other"


@attrs.define(eq=False)
class RequestMetrics:
    """Counters and a histogram for every client of one daemon."""

    requests: Counter[str] = attrs.field(factory=Counter)
    """Requests received, by method class."""
    errors: Counter[tuple[str, int]] = attrs.field(factory=Counter)
    """Error replies sent, by method class and JSON-RPC code."""
    bucket_counts: dict[str, list[int]] = attrs.field(factory=dict)
    """Per method class, how many durations fell at or below each of :data:`BUCKETS` (not
    cumulative; the renderer accumulates), plus one slot for +Inf."""
    duration_sums: dict[str, float] = attrs.field(factory=dict)
    """Per method class, the sum of durations, in seconds."""

    def observe(self, klass: str, seconds: float, error_code: int | None) -> None:
        """Record one answered request."""
        counts = self.bucket_counts.setdefault(klass, [0] * (len(BUCKETS) + 1))
        counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.duration_sums[klass] = self.duration_sums.get(klass, 0.0) + seconds
        if error_code is not None:
            self.errors[klass, error_code] += 1

    def channel(self, channel: MessageChannel) -> MeteredChannel:
        """``channel``, its requests and replies recorded here."""
        return MeteredChannel(channel, self)


@final
class MeteredChannel(WrappedChannel):
    """Wraps a client channel (and owns it from then on); times each request to its reply."""

    def __init__(self, channel: MessageChannel, metrics: RequestMetrics) -> None:
        super().__init__(channel)
        self._metrics = metrics
        self._pending: OrderedDict[tuple[type, object], tuple[str, float]] = OrderedDict()

    def _received(self, message: JSONObject) -> JSONObject:
        method = message.get("method")
        if method is None:
            return message
        if "id" in message:
            klass = method_class(method)
            self._metrics.requests[klass] += 1
            self._pending[type(message["id"]), message["id"]] = (klass, time.monotonic())
            if len(self._pending) > MAX_TIMED_PER_CONNECTION:
                self._pending.popitem(last=False)
        elif method == "notifications/cancelled":
            params = message.get("params")
            request_id = params.get("requestId") if isinstance(params, dict) else None
            if type(request_id) in (int, str):  # anything else is the child's to refuse
                self._pending.pop((type(request_id), request_id), None)
        return message

    def _sending(self, messages: Sequence[JSONObject]) -> None:
        now = time.monotonic()
        for message in messages:
            if "method" in message or "id" not in message:
                continue
            timed = self._pending.pop((type(message["id"]), message["id"]), None)
            if timed is None:
                continue
            error = message.get("error")
            code = error.get("code") if isinstance(error, dict) else None
            self._metrics.observe(timed[0], now - timed[1], code if isinstance(code, int) else None)

    async def receive(self) -> JSONObject:
        """Receive from the wrapped channel, starting the clock for a request."""
        return self._received(await self._channel.receive())

    def receive_nowait(self) -> JSONObject:
        """Take a buffered message, starting the clock for a request."""
        return self._received(self._channel.receive_nowait())

    async def send(self, value: JSONObject) -> None:
        """Send, stopping the clock for the request a reply answers."""
        self._sending([value])
        await self._channel.send(value)

    async def send_many(self, messages: Sequence[JSONObject]) -> None:
        """Send several, stopping the clock for the requests they answer."""
        self._sending(messages)
        await self._channel.send_many(messages)

    # The relay's own calls: the wrapped channel's lines pass through, since nothing here changes
    # a message (without these, the base class's fallbacks would encode every message again).

    async def receive_batch_lines(
        self, max_count: int
    ) -> tuple[list[JSONObject | ProtocolError], list[bytes | None]]:
        """The wrapped channel's batch and lines, starting the clock for each request."""
        items, lines = await self._channel.receive_batch_lines(max_count)
        for item in items:
            if not isinstance(item, ProtocolError):
                self._received(item)
        return items, lines

    async def send_lines(self, messages: Sequence[JSONObject], lines: Sequence[bytes | None]) -> None:
        """Send several with their lines, stopping the clock for the requests they answer."""
        self._sending(messages)
        await self._channel.send_lines(messages, lines)
