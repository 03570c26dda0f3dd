"""A child's stderr becomes log lines: tagged, escaped, truncated and rate-limited.

stderr is the MCP server's free-form log (the spec: clients SHOULD NOT assume it means an error), so
it is logged at INFO under ``bridge.child``, tagged ``[NAME pid N]``, and never forwarded as protocol
data. Control characters are escaped so that a child cannot forge log lines, lines are cut at
``MAX_STDERR_LINE`` bytes, and a flood is summarised instead of drowning the journal.
"""

from __future__ import annotations

import logging
import re

import attrs
import trio

from channels import LineFramer, Oversized

logger = logging.getLogger("bridge.child")

# One stderr line is logged up to this many bytes; tracebacks fit, base64 dumps do not.
MAX_STDERR_LINE = 8 * 1024
# Lines logged per second per child before the rest are counted and summarised once a second, so
# that a flood cannot fill the journal (docs/design.md §6).
STDERR_LINES_PER_SECOND = 100

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def escape_for_log(data: bytes) -> str:
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


async def log_stderr(stream: trio.abc.ReceiveStream, name: str, pid: int) -> None:
    """Log every line of ``stream`` until it ends. Does not close it (the child owns it)."""
    framer = LineFramer(MAX_STDERR_LINE)
    limiter = RateLimiter(STDERR_LINES_PER_SECOND)

    def emit(item: bytes | Oversized) -> None:
        allowed, suppressed = limiter.admit(trio.current_time())
        if suppressed:
            logger.warning(
                "[%s pid %d] %d stderr lines suppressed (over %d/s)",
                name,
                pid,
                suppressed,
                STDERR_LINES_PER_SECOND,
            )
        if not allowed:
            return
        if isinstance(item, Oversized):
            logger.info(
                "[%s pid %d] %s ... [line over %d bytes truncated]",
                name,
                pid,
                escape_for_log(item.prefix),
                MAX_STDERR_LINE,
            )
        else:
            logger.info("[%s pid %d] %s", name, pid, escape_for_log(item))

    try:
        while data := await stream.receive_some(65536):
            for item in framer.feed(data):
                emit(item)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        if last := framer.take_partial():  # a last line without a newline is still logged
            emit(last)
        if suppressed := limiter.flush():
            logger.warning(
                "[%s pid %d] %d stderr lines suppressed (over %d/s)",
                name,
                pid,
                suppressed,
                STDERR_LINES_PER_SECOND,
            )
