"""The soak's bookkeeping: the call mix, each request's bound, and what every configuration saw.

A :class:`Tally` belongs to one configuration and is written by its clients only; the soak's main
task reads it for the progress line and the final table. A :class:`Ledger` belongs to one client
connection: it records each request it sends and matches each reply by id, so that every request
ends in exactly one of: answered in time, answered late, lost (its connection ended first),
cancelled by the client (an answer is then optional: MCP lets a server drop it), or sent in the
closing window of a connection whose child died (docs/design.md §5.1): after the connection's
child was killed, or after its first ``child-exited`` error, or, over Unix, where the soak cannot
tell which connection a child served, after the configuration's last kill; and within
``CLOSE_WINDOW_S`` of the bridge's close, a request may reach the bridge after it stopped reading,
and then it goes unanswered by design.
"""

from __future__ import annotations

import collections
import random
from typing import Any

import trio

# A request must be answered within its own work time plus this much. 30 s is the bridge's
# default --send-timeout: a reply held up longer than that is a failure whatever the cause.
REPLY_MARGIN_S = 30.0
# The call mix, in percent, drawn per call (the issue: fast, slow up to 2 s, large up to 1 MiB,
# progress notifications and cancellations).
MIX = (("echo", 62), ("sleep", 12), ("blob", 10), ("progress", 10), ("cancel", 6))
SLOW_MAX_S = 2.0  # slow calls sleep up to this long
LARGE_MAX_BYTES = 1 << 20  # large replies up to 1 MiB
PROGRESS_STEPS = 5  # notifications per progress call
CANCEL_AFTER_S = 0.2  # a cancelled call (sleep 1.5 s) is cancelled this long after it was sent
CANCEL_SLEEP_S = 1.5
# Ids a connection remembers after their reply, to spot a duplicate; a duplicate arrives right
# behind the original (the same read, or the next), so the last few thousand are plenty.
REMEMBERED_IDS = 4096
# The documented window (docs/design.md §5.1): once a per-connection child died, the bridge answers
# what it reads for a bounded time, then half-closes; a request written in the last moments before
# the client sees that close may arrive after the bridge stopped reading. On this loaded 2-core
# machine a client sees the close up to about a second after the bridge sent it; a request sent
# earlier than that, or before its connection's child was killed, must be answered. A client with
# no request in flight when its child died gets no child-exited error before the close: the kill
# itself (which connection's child it was, the soak reads from the bridge's log) marks the start.
CLOSE_WINDOW_S = 1.0
CHILD_EXITED = "child-exited"


def draw_call(rng: random.Random) -> tuple[str, str, dict[str, Any], float]:
    """One call of the mix: (kind, tool, arguments, seconds of work it asks of the child)."""
    kind = rng.choices([k for k, _ in MIX], [w for _, w in MIX])[0]
    if kind == "echo":
        return kind, "echo", {"text": "soak " * rng.randint(1, 40)}, 0.0
    if kind == "sleep":
        seconds = round(rng.uniform(0.05, SLOW_MAX_S), 2)
        return kind, "sleep", {"seconds": seconds}, seconds
    if kind == "blob":
        return kind, "blob", {"size": rng.randint(1, LARGE_MAX_BYTES)}, 0.0
    if kind == "progress":
        return kind, "progress", {"steps": PROGRESS_STEPS}, 0.0
    return kind, "sleep", {"seconds": CANCEL_SLEEP_S}, CANCEL_SLEEP_S


def tools_call(request_id: Any, tool: str, arguments: dict[str, Any], token: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def error_reason(message: dict[str, Any]) -> str:
    """The reason of a JSON-RPC error: ``data.reason`` if the bridge wrote it, else the code."""
    error = message.get("error") or {}
    data = error.get("data")
    if isinstance(data, dict) and isinstance(data.get("reason"), str):
        return str(data["reason"])
    return f"code {error.get('code')}"


class Tally:
    """Everything one configuration's clients saw (counts only; see the module docstring)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.sent = 0
        self.results = 0
        self.errors: collections.Counter[str] = collections.Counter()
        self.lost = 0
        self.in_close_window = 0  # unanswered, sent in the documented closing window (not lost)
        self.duplicated = 0
        self.late = 0
        self.unexpected = 0  # replies to no request this connection sent
        self.unsent = 0  # requests whose write failed: the connection was already closed
        self.cancelled = 0
        self.cancelled_answered = 0
        self.progress = 0
        self.connections = 0
        self.disconnects = 0  # connections the bridge ended, explained by a child kill
        self.unexplained_disconnects: list[str] = []
        self.faults: collections.Counter[str] = collections.Counter()
        self.bad_inputs: collections.Counter[str] = collections.Counter()
        self.failures: list[str] = []  # anything else that breaks a guarantee, one line each
        self.lost_examples: list[str] = []  # the first few requests lost
        self.kills: list[float] = []  # trio times at which this configuration's child was killed
        # peer ("127.0.0.1:PORT") -> when the child serving that connection was killed
        self.killed_peers: dict[str, float] = {}
        self.queue_allowance_s = 0.0  # added to every bound: the wait behind other clients (shared)

    @property
    def answered(self) -> int:
        return self.results + sum(self.errors.values())

    def last_kill(self, until: float) -> float | None:
        """When this configuration's child was last killed, up to ``until``; None if not yet."""
        return max((at for at in self.kills if at <= until), default=None)

    def killed_recently(self, window_s: float) -> bool:
        now = trio.current_time()
        return any(now - window_s <= at <= now for at in self.kills)

    def fail(self, line: str) -> None:
        if len(self.failures) < 50:  # bounded: the table shows the first few
            self.failures.append(line)


class Pending:
    """One request a connection sent and has not seen answered."""

    def __init__(self, kind: str, bound_at: float) -> None:
        self.kind = kind
        self.sent_at = trio.current_time()
        self.bound_at = bound_at
        self.cancelled = False
        self.done = trio.Event()


class Ledger:
    """The requests of one connection, matched by id; written by its sender and its reader."""

    def __init__(self, tally: Tally, peer: str | None = None, *, child_unknown: bool = False) -> None:
        self.tally = tally
        self.peer = peer  # the bridge's name for this connection ("127.0.0.1:PORT"), if known
        # A stream connection whose child the bridge's log cannot name (Unix: every connection's
        # peer is this process, ``unix PATH pid=N``): a kill of the configuration may be its child's.
        self.child_unknown = child_unknown
        self.pending: dict[Any, Pending] = {}
        self.child_exited_at: float | None = None  # the connection's first child-exited error
        self._answered: collections.OrderedDict[Any, None] = collections.OrderedDict()

    def send(self, request_id: Any, kind: str, work_s: float) -> Pending:
        record = Pending(kind, trio.current_time() + work_s + REPLY_MARGIN_S + self.tally.queue_allowance_s)
        self.pending[request_id] = record
        self.tally.sent += 1
        return record

    def unsent(self, request_id: Any) -> None:
        """The request's write failed: it never reached the bridge and no reply is owed."""
        if self.pending.pop(request_id, None) is not None:
            self.tally.sent -= 1
            self.tally.unsent += 1

    def cancel(self, request_id: Any) -> None:
        record = self.pending.get(request_id)
        if record is not None and not record.cancelled:
            record.cancelled = True
            self.tally.cancelled += 1

    def reply(self, message: dict[str, Any]) -> None:
        """Account for one message from the bridge that carries an id and no method."""
        request_id = message.get("id")
        record = self.pending.pop(request_id, None)
        if record is None:
            if request_id in self._answered:
                self.tally.duplicated += 1
                self.tally.fail(f"duplicate reply to id {request_id!r}")
            else:
                self.tally.unexpected += 1
                self.tally.fail(f"reply to no request: {str(message)[:160]}")
            return
        self._answered[request_id] = None
        if len(self._answered) > REMEMBERED_IDS:
            self._answered.popitem(last=False)
        if record.cancelled:
            self.tally.cancelled_answered += 1
        elif "error" in message:
            reason = error_reason(message)
            self.tally.errors[reason] += 1
            if reason == CHILD_EXITED and self.child_exited_at is None:
                self.child_exited_at = trio.current_time()
        else:
            self.tally.results += 1
        if trio.current_time() > record.bound_at:
            self.tally.late += 1
        record.done.set()

    def notification(self, message: dict[str, Any]) -> None:
        if message.get("method") == "notifications/progress":
            self.tally.progress += 1

    def close(self) -> int:
        """The connection ended: every request still pending is lost, unless it was cancelled or
        sent in the closing window after its child died."""
        lost = 0
        now = trio.current_time()
        died = [
            at
            for at in (self.child_exited_at, self.tally.killed_peers.get(self.peer or ""))
            if at is not None
        ]
        child_died_at = min(died, default=None)
        if child_died_at is None and self.child_unknown:
            # The soak cannot tell which connection a child served, and a connection with nothing
            # in flight when its child died gets no child-exited error: its window opens at the
            # configuration's last kill.
            child_died_at = self.tally.last_kill(now)
        for request_id, record in self.pending.items():
            in_window = (
                child_died_at is not None
                and record.sent_at >= child_died_at
                and now - record.sent_at <= CLOSE_WINDOW_S
            )
            if in_window and not record.cancelled:
                self.tally.in_close_window += 1
            elif not record.cancelled:
                lost += 1
                if len(self.tally.lost_examples) < 20:
                    example = self._lost_example(request_id, record, child_died_at, now)
                    self.tally.lost_examples.append(example)
            record.done.set()
        self.tally.lost += lost
        self.pending.clear()
        return lost

    def _lost_example(self, request_id: Any, record: Pending, child_died_at: float | None, now: float) -> str:
        """One lost request, timed against the close and the kills, so that a failure explains itself."""
        last_kill = self.tally.last_kill(now)
        since_kill = (
            "no kill yet" if last_kill is None else f"{record.sent_at - last_kill:+.2f}s from the last kill"
        )
        died = "unknown" if child_died_at is None else f"{record.sent_at - child_died_at:+.2f}s"
        return (
            f"{now:.1f}s id {request_id!r} ({record.kind}): sent {now - record.sent_at:.2f}s before "
            f"the close, {since_kill}, from its child's death {died}"
        )
