"""A child's stderr becomes log lines: tagged, escaped, truncated and rate-limited.

stderr is the MCP server's free-form log (the spec: clients SHOULD NOT assume it means an error), so
it is logged at INFO under ``bridge.child``, tagged ``[NAME pid N]``, and never forwarded as protocol
data. Control characters are escaped so that a child cannot forge log lines, lines are cut at
``MAX_STDERR_LINE`` bytes, and a flood is summarised instead of drowning the journal.
"""

from __future__ import annotations

import logging
import os
import re
import select

import attrs
import trio

from channels import LineFramer, Oversized

logger = logging.getLogger("bridge.child")

# One stderr line is logged up to this many bytes; tracebacks fit, base64 dumps do not.
MAX_STDERR_LINE = 8 * 1024
# Lines logged per second per child before the rest are counted and summarised once a second, so
# that a flood cannot fill the journal (docs/design.md §6).
STDERR_LINES_PER_SECOND = 100
# Bytes read from a child's stderr at once: a pipe's default capacity (pipe(7)).
STDERR_READ_SIZE = 65536
# Reads of what a child's stderr still holds once it is stopped: up to 1 MiB, so that its last
# lines are logged but a grandchild writing without end cannot hold its connection's end.
STDERR_READS_AT_REMOVAL = 16

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def escape_for_log(data: bytes | bytearray) -> str:
    """Decode leniently and escape control characters (log lines must not be forgeable)."""
    text = data.decode("utf-8", errors="backslashreplace")
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


@attrs.define
class RateLimiter:
    """Admits ``per_second`` events in each one-second window; counts the rest. Sans-IO."""

    per_second: int
    _window_start: float = attrs.field(init=False, default=float("-inf"))
    _admitted: int = attrs.field(init=False, default=0)
    _suppressed: int = attrs.field(init=False, default=0)

    def admit(self, now: float) -> tuple[bool, int]:
        """Whether an event at ``now`` may pass, and how many were suppressed before it.

        The count is of the window that just ended: report those once, then the count restarts.
        """
        finished = 0
        if now - self._window_start >= 1.0:
            finished, self._suppressed = self._suppressed, 0
            self._window_start, self._admitted = now, 0
        if self._admitted < self.per_second:
            self._admitted += 1
            return True, finished
        self._suppressed += 1
        return False, finished

    def flush(self) -> int:
        """Suppressed events not yet reported (at the end of the stream)."""
        suppressed, self._suppressed = self._suppressed, 0
        return suppressed


@attrs.define(eq=False)
class StderrLog:
    """One child's stderr turned into log lines as its bytes arrive. Sans-IO.

    Args:
        name: the server's name in the ``[NAME pid N]`` tag.
        pid: the child's pid, in the tag.
    """

    name: str
    pid: int
    _framer: LineFramer = attrs.field(init=False, factory=lambda: LineFramer(MAX_STDERR_LINE))
    _limiter: RateLimiter = attrs.field(init=False, factory=lambda: RateLimiter(STDERR_LINES_PER_SECOND))

    def feed(self, data: bytes | bytearray) -> None:
        """Log every complete line of ``data`` (with what came before it)."""
        for item in self._framer.feed(data):
            self._emit(item)

    def finish(self) -> None:
        """The stream ended: log a last line without a newline, and what was suppressed."""
        if last := self._framer.take_partial():
            self._emit(last)
        if suppressed := self._limiter.flush():
            self._log_suppressed(suppressed)

    def _emit(self, item: bytes | bytearray | Oversized) -> None:
        allowed, suppressed = self._limiter.admit(trio.current_time())
        if suppressed:
            self._log_suppressed(suppressed)
        if not allowed:
            return
        if isinstance(item, Oversized):
            logger.info(
                "[%s pid %d] %s ... [line over %d bytes truncated]",
                self.name,
                self.pid,
                escape_for_log(item.prefix),
                MAX_STDERR_LINE,
            )
        else:
            logger.info("[%s pid %d] %s", self.name, self.pid, escape_for_log(item))

    def _log_suppressed(self, suppressed: int) -> None:
        logger.warning(
            "[%s pid %d] %d stderr lines suppressed (over %d/s)",
            self.name,
            self.pid,
            suppressed,
            STDERR_LINES_PER_SECOND,
        )


async def log_stderr(stream: trio.abc.ReceiveStream, name: str, pid: int) -> None:
    """Log every line of ``stream`` until it ends. Does not close it (the child owns it)."""
    log = StderrLog(name, pid)
    try:
        while data := await stream.receive_some(STDERR_READ_SIZE):
            log.feed(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        log.finish()


@attrs.define(eq=False)
class StderrReader:
    """Reads the stderr of many children in one task, instead of a task (and a wait) per child.

    The children's stderr fds are watched by an epoll set of this reader's own, whose fd is the
    one trio waits on: a child costs an entry in that set and its :class:`StderrLog`. The daemon
    owns the reader: it runs :meth:`run` for as long as children use it (a child whose stderr
    nobody reads blocks once the pipe is full), and closes the set (``with reader:``) only once
    every child is removed, which may be after :meth:`run` was cancelled (a child stopped while
    its connection is cancelled). :func:`open_child` adds a child's stderr and removes it before
    closing it. Linux only, as the bridge (epoll).
    """

    _epoll: select.epoll = attrs.field(init=False, factory=select.epoll)
    _logs: dict[int, StderrLog] = attrs.field(init=False, factory=dict)

    @property
    def children(self) -> int:
        """Children whose stderr is read now."""
        return len(self._logs)

    def add(self, fd: int, name: str, pid: int) -> None:
        """Log what the child ``pid`` writes to ``fd`` (non-blocking, owned by the caller)."""
        self._logs[fd] = StderrLog(name, pid)
        self._epoll.register(fd, select.EPOLLIN)

    def remove(self, fd: int) -> None:
        """Stop reading ``fd`` (before its owner closes it), after what it holds now (bounded).

        Its last line without a newline, and the count of suppressed lines, are logged.
        """
        log = self._logs.pop(fd, None)
        if log is None:
            return  # it had ended
        self._epoll.unregister(fd)
        for _ in range(STDERR_READS_AT_REMOVAL):
            if not self._read(fd, log):
                break
        log.finish()

    def __enter__(self) -> StderrReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Close the epoll set; every child must have been removed."""
        self._epoll.close()

    async def run(self) -> None:
        """Read and log every child's stderr as it arrives, until cancelled (the set stays open)."""
        while True:
            await trio.lowlevel.wait_readable(self._epoll.fileno())
            for fd, _events in self._epoll.poll(0):
                log = self._logs.get(fd)
                if log is not None and self._read(fd, log) is False:
                    self.remove(fd)

    def _read(self, fd: int, log: StderrLog) -> bool | None:
        """Log one read of ``fd``: True if it had data, None if nothing now, False once it ended."""
        try:
            data = os.read(fd, STDERR_READ_SIZE)
        except BlockingIOError:
            return None
        except OSError:  # as for a stream read by its own task: a failed read ends it
            return False
        if not data:
            return False
        log.feed(data)
        return True
