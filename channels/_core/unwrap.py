"""One small trio idiom: give callers the plain exception a nursery wrapped in a group."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def single_exception() -> Iterator[None]:
    """Re-raise the one exception a nursery wrapped in an ``ExceptionGroup``, unwrapped.

    For context managers that hold a nursery (a WebSocket's keepalive task, a bridge's daemon) but
    whose callers expect ``except ListenError:`` to work. Groups of several exceptions, and
    nested groups, pass through unchanged.
    """
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1 and not isinstance(group.exceptions[0], BaseExceptionGroup):
            error = group.exceptions[0]
            error.__suppress_context__ = True
            raise error  # noqa: B904 - deliberately the original exception, not a new cause
        raise
