"""Response streams: messages a channel sends, queued until an HTTP response writes them out.

A :class:`ResponseStream` is one logical stream of server-to-client messages: the answer to one
POSTed request, a legacy session's standalone GET stream, a 2024-11-05 SSE connection. The channel
side :meth:`~ResponseStream.put` messages without waiting for the network (its sender waits on
a :class:`~channels._http.server.backlog.Backlog` first, which bounds what may pile up); the
HTTP side takes them with :func:`~channels._http.server.response.write_response`, which decides
between one ``application/json`` body and ``text/event-stream``.

Events carry ids ``KEY/SEQ`` (the stream's key, then a sequence number from 1), unique within a
session and naming their stream, so a client that lost a resumable stream can ask for the rest
with ``Last-Event-ID`` (:meth:`~ResponseStream.rewind`); a resumption of a stream a response still
writes takes it over (:meth:`~ResponseStream.take_over`: the client gave up on that response before
the bridge noticed). Written events of a resumable stream are
kept until the session's event budget needs the room (oldest first, :class:`EventBudget`).
"""

from __future__ import annotations

import collections
from collections.abc import Callable

import attrs
import trio

from .backlog import Backlog

# What keeping one event costs besides its data (a tuple, a deque slot, its stream's share),
# charged to the replay budget so that many small events cannot hold much more than it says.
EVENT_OVERHEAD = 200


@attrs.define(eq=False)
class EventBudget:
    """Bytes of written events a session keeps for replay, shared by its streams; oldest go first.

    Attributes:
        limit: the most bytes kept.
        used: the bytes kept now.
        on_empty: called with an ended stream that has nothing left to replay or write (its
            owner may forget it).
    """

    limit: int
    used: int = 0
    on_empty: Callable[[ResponseStream], object] | None = None
    _order: collections.deque[ResponseStream] = attrs.field(factory=collections.deque)
    _compact_at: int = 1024  # ORDER_SLACK

    def charge(self, stream: ResponseStream, size: int) -> None:
        """``stream`` keeps a written event of ``size`` bytes; drop the oldest kept over the limit."""
        self.used += size
        self._order.append(stream)
        if len(self._order) > self._compact_at:  # amortised: the check is linear
            self._compact()
            self._compact_at = 2 * len(self._order) + ORDER_SLACK
        while self.used > self.limit and self._order:
            oldest = self._order.popleft()
            self.used -= oldest.forget_oldest()
            if self.on_empty is not None and oldest.ended and not oldest.kept and not oldest.unwritten:
                self.on_empty(oldest)

    def clear(self) -> None:
        """Name no stream and call nobody any more: the session is over, its streams released."""
        self._order.clear()
        self.on_empty = None

    def _compact(self) -> None:
        """Drop the entries resumptions left behind.

        A rewound event is charged again when it is written again; each stream keeps as many
        entries, its newest, as it has kept events.
        """
        seen: collections.Counter[ResponseStream] = collections.Counter()
        kept: list[ResponseStream] = []
        for stream in reversed(self._order):
            if seen[stream] < stream.kept:
                seen[stream] += 1
                kept.append(stream)
        self._order = collections.deque(reversed(kept))


# Entries the budget's order may hold beyond twice its kept events before it is compacted.
ORDER_SLACK = 1024


# How long a resumption waits for the response it takes a stream over from to let go. Cancelling
# that response interrupts any write at once (its connection is then closed), so it lets go at
# its next scheduling; the bound is only reached through a bug, and one second is far beyond it.
TAKEOVER_TIMEOUT = 1.0


class ResponseStream:
    """Messages for one response, queued by the channel side and written by the HTTP side.

    Args:
        key: the stream's name within its session (the first part of its event ids).
        finals: how many messages end the stream (replies to the request, or to each request
            of a batch); ``0`` for a stream that only ends when :meth:`end` is called.
        budget: where a resumable stream keeps its written events for replay, or ``None`` if
            the stream is not resumable (written events are dropped).
        backlog: where its unwritten bytes are counted, or ``None``.
    """

    def __init__(
        self, key: str, finals: int, budget: EventBudget | None = None, backlog: Backlog | None = None
    ) -> None:
        self.key = key
        self.finals_left = finals
        self.budget = budget
        self.backlog = backlog
        self._queue: collections.deque[tuple[int, bytes, bool, int]] = collections.deque()
        self._kept: collections.deque[tuple[int, bytes, bool, int]] = collections.deque()
        self._next_seq = 1
        self.queued_bytes = 0  # of the events not written yet
        self.ended = False  # no more messages will come
        self.nudged = False  # wake a waiter without anything to write (its deadline passed)
        self.abandoned = False  # the response writing it ended early; see abandon()
        self.attached = False  # an HTTP response is writing this stream now
        # Made by wait(), and a new one only once this one was set: a stream whose answer comes
        # before anyone waits for it (a 2026-07-28 request answered at once) never has one.
        self._changed: trio.Event | None = None
        self._writer: trio.CancelScope | None = None  # the attached response's, to take it over
        self._detached: trio.Event | None = None  # made by take_over(), set by detach()
        self.deadline = float("inf")  # while a response waits for its first message (a waiter)
        # Set while a response waits to answer as JSON, if it may be written from the task that
        # queues the answer (response.JsonAnswer): called with the stream by put() for that answer,
        # True if the response's task need not wake for it (it waits for its client's next bytes on
        # the socket ``watching`` then, and anything else that comes ends that wait).
        self.answer_now: Callable[[ResponseStream], bool] | None = None
        self.watching: trio.socket.SocketType | None = None
        self.answered = False  # answer_now wrote the answer whole: its response is parked, idle

    @property
    def kept(self) -> int:
        """How many written events are kept for replay."""
        return len(self._kept)

    @property
    def unwritten(self) -> int:
        """How many events wait to be written."""
        return len(self._queue)

    def attach(self) -> None:
        """A response starts writing this stream (as JSON if it may, until :meth:`writing_events`)."""
        self.attached = True
        self.abandoned = False
        self.answered = False
        self._writer = None
        self._detached = None  # made by a take-over only: most responses are never taken over

    def writing_events(self, writer: trio.CancelScope) -> None:
        """The attached response is now an event stream; cancelling ``writer`` makes it let go.

        Only then can a resumption name it (its events carry ids) and :meth:`take_over` it.
        """
        self._writer = writer

    def detach(self) -> None:
        """The response writing this stream returned (whatever it wrote is marked written)."""
        self.attached = False
        self._writer = None
        if self._detached is not None:
            self._detached.set()

    async def take_over(self) -> bool:
        """Make the response writing this stream let go, for a ``Last-Event-ID`` resumption.

        A client resumes once it has given up on the stream's response, which the bridge may not
        have noticed yet (the client's close is still on its way, or the network dropped it
        silently): that response is cancelled, what it had not written stays queued (and is
        abandoned, kept for replay), and the resumption then writes from the client's event id.
        Waits at most :data:`TAKEOVER_TIMEOUT`; True once no response is attached. A response
        still waiting to answer as JSON has sent no event id, and is not taken over (False).
        """
        if self.attached and self._writer is not None:
            if self._detached is None:
                self._detached = trio.Event()
            detached = self._detached
            self._writer.cancel()
            with trio.move_on_after(TAKEOVER_TIMEOUT):
                await detached.wait()
        return not self.attached

    def put(self, data: bytes, *, final: bool = False, status: int = 200) -> None:
        """Queue one encoded message.

        Args:
            data: the encoded message.
            final: it is a reply this stream waits for.
            status: the HTTP status if this message ends up the whole response (a JSON body).
        """
        if self.ended:
            return
        self._queue.append((self._next_seq, data, final, status))
        self._next_seq += 1
        size = len(data)
        self.queued_bytes += size
        if self.backlog is not None:
            self.backlog.unwritten += size  # Backlog.add(), inlined: one per message
        if self.abandoned:
            self.abandon()
        if final:
            self.finals_left -= 1
            if self.finals_left == 0:
                self.ended = True
                if self.answer_now is not None and len(self._queue) == 1 and self.answer_now(self):
                    self.answered = True  # the one answer of a response waiting for it, written now
                    return
        self._changed_now()

    def end(self) -> None:
        """No more messages will come (the session or channel ended)."""
        self.ended = True
        self._changed_now()

    def _changed_now(self) -> None:
        if self._changed is not None:
            self._changed.set()
        if self.watching is not None:  # a response.park(): notify_closing() only ends that wait
            trio.lowlevel.notify_closing(self.watching)
            self.watching = None

    def abandon(self) -> None:
        """The response writing this stream ended before it did (the client left).

        What was not written stops counting against the backlog (nobody is reading it, and the
        bridge must not wait for them): a resumable stream keeps it for a ``Last-Event-ID``
        resumption, charged to the replay budget like written events; another drops it. Later
        messages go the same way until a response takes the stream again.
        """
        self.abandoned = True
        while self._queue:
            event = self._queue.popleft()
            size = len(event[1])
            self.queued_bytes -= size
            if self.backlog is not None:
                self.backlog.remove(size)
            if self.budget is not None:
                self._kept.append(event)
                self.budget.charge(self, size + EVENT_OVERHEAD)

    def drop_oldest_unwritten(self) -> int:
        """Drop the oldest event not yet written (nobody is reading); return its size."""
        if not self._queue:
            return 0
        _, data, _, _ = self._queue.popleft()
        self.queued_bytes -= len(data)
        if self.backlog is not None:
            self.backlog.remove(len(data))
        return len(data)

    def release(self) -> None:
        """Drop everything it holds, kept or unwritten (its response is over, or its session).

        Its budget's order may still name it; those entries cost nothing and go at the next
        compaction.
        """
        self.abandoned = True  # nothing more is queued for a response
        for _, data, _, _ in self._queue:
            if self.backlog is not None:
                self.backlog.remove(len(data))
        self._queue.clear()
        self.queued_bytes = 0
        if self.budget is not None:
            self.budget.used -= sum(len(event[1]) + EVENT_OVERHEAD for event in self._kept)
        self._kept.clear()
        self.budget = None  # later messages (none are expected) are not kept either

    def forget_oldest(self) -> int:
        """Drop the oldest kept (written) event; return what it was charged (0 if none)."""
        if not self._kept:
            return 0
        return len(self._kept.popleft()[1]) + EVENT_OVERHEAD

    def rewind(self, seq: int) -> bool:
        """Write again what followed event ``seq`` (a ``Last-Event-ID``); False if it is gone.

        ``seq`` may name the last event written, or a kept one, or the priming id just before
        the first event.
        """
        first_kept = (
            self._kept[0][0] if self._kept else (self._queue[0][0] if self._queue else self._next_seq)
        )
        if seq + 1 < first_kept or seq >= self._next_seq:
            return False
        again = [event for event in self._kept if event[0] > seq]
        for event in reversed(again):
            self._kept.pop()
            self._queue.appendleft(event)
            self.queued_bytes += len(event[1])
            if self.budget is not None:  # no longer kept: written (and charged) again later
                self.budget.used -= len(event[1]) + EVENT_OVERHEAD
            if self.backlog is not None:
                self.backlog.add(len(event[1]))
        return True

    def pending(self) -> list[tuple[int, bytes, bool, int]]:
        """The events not written yet: sequence number, data, final, status."""
        return list(self._queue)

    def first_unwritten(self) -> tuple[int, bytes, bool, int]:
        """The oldest event not written yet (there is one): sequence number, data, final, status."""
        return self._queue[0]

    def written(self, last_seq: int, *, replayable: bool = True) -> None:
        """Events up to ``last_seq`` were written.

        Args:
            last_seq: the last event written.
            replayable: they went out as events with ids (not as a JSON body, which nobody can
                ask for again), so a resumable stream keeps them for replay.
        """
        keep = replayable and self.budget is not None
        while self._queue and self._queue[0][0] <= last_seq:
            event = self._queue.popleft()
            size = len(event[1])
            self.queued_bytes -= size
            if self.backlog is not None:
                self.backlog.remove(size)
            if keep:
                assert self.budget is not None
                self._kept.append(event)
                self.budget.charge(self, size + EVENT_OVERHEAD)

    def last_written(self) -> int:
        """The sequence number just before the first unwritten event (a priming event's id)."""
        return self._queue[0][0] - 1 if self._queue else self._next_seq - 1

    async def wait(self) -> None:
        """Return when there is something to write, the stream ended, or :meth:`nudge` was called."""
        while not self._queue and not self.ended and not self.nudged:
            changed = self._changed
            if changed is None or changed.is_set():
                changed = self._changed = trio.Event()
            await changed.wait()
        self.nudged = False

    def nudge(self) -> None:
        """Wake :meth:`wait` even though nothing came."""
        self.nudged = True
        self._changed_now()

    def expire(self) -> None:
        """A ticker's waiter: :attr:`deadline` passed while a response waited (see :meth:`nudge`)."""
        self.nudge()

    def event_id(self, seq: int) -> str:
        return f"{self.key}/{seq}"


def parse_event_id(text: str) -> tuple[str, int] | None:
    """``"KEY/SEQ"`` → ``(KEY, SEQ)``, or ``None`` for an id this server did not write."""
    key, slash, seq = text.rpartition("/")
    if not slash or not seq.isdigit():
        return None
    return key, int(seq)
