"""The shared-mode child supervisor: one child for every client, restarted with backoff when it dies.

Two layers (the numbers, and where each comes from, are in docs/design.md §6):

* :class:`RestartPolicy` and :class:`RestartTracker`, sans-IO (:mod:`.restarts`): the numbers, and
  the bookkeeping that turns a history of starts and exits into "restart in so many seconds" or
  "give up". They take the time as an argument and import nothing from trio, so every schedule can
  be tested exactly.
* :class:`Supervisor`, the trio part: starts the child with :func:`~bridge._child.process.open_child`, hands
  it to the caller's ``serve`` callback, and when ``serve`` returns either stops (after
  :meth:`Supervisor.stop`) or restarts it after the tracker's delay. The child is always stopped in
  MCP order by ``open_child``'s exit, also when :meth:`Supervisor.run` is cancelled.

Give-up policy: a command that cannot be started the first time (not found, permission denied)
raises :class:`~bridge._errors.ChildStartError` at once, since restarting cannot fix it; the CLI
exits 78 or 127. More than ``crash_limit`` unexpected exits within ``crash_window`` raise
:class:`CrashLoop`; the CLI exits 75 (``EX_TEMPFAIL``) and systemd's own restart policy takes over.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import attrs
import trio

from .._errors import ChildStartError
from .._limits import Limits
from .process import ChildProcess, ChildSpec, describe_exit, open_child
from .restarts import CrashLoop, RestartPolicy, RestartTracker, SupervisorState

__all__ = [  # the policy's names too, as before they moved to .restarts
    "CrashLoop",
    "RestartPolicy",
    "RestartTracker",
    "Supervisor",
    "SupervisorState",
    "SupervisorStatistics",
]

logger = logging.getLogger("bridge.supervisor")


@attrs.frozen
class SupervisorStatistics:
    """A snapshot of a :class:`Supervisor`.

    Attributes:
        state: where it is.
        restarts: restart attempts made since ``run`` began (a failed start counts).
        attempt: consecutive restarts since the last stable run.
        child_pid: the pid of the child being served (or stopped), or ``None`` between children.
    """

    state: SupervisorState
    restarts: int
    attempt: int
    child_pid: int | None


@attrs.define(eq=False)
class Supervisor:
    """Runs one child at a time for the shared mode, restarting it when it ends unexpectedly.

    The supervisor owns each child (through ``open_child``, which stops it in MCP order); the
    ``serve`` callback given to :meth:`run` borrows it until it returns and must not keep it.

    Args:
        spec: the child to run.
        limits: its limits (stop timeouts, message size).
        policy: restart delays and the crash-loop limit.
        on_state: called as ``on_state(state, attempt)`` with the first state when :meth:`run`
            begins and on every change after it (for logs, sd_notify ``STATUS=``). It runs inside
            the supervisor's task, so it must neither block nor raise.
    """

    spec: ChildSpec
    limits: Limits
    policy: RestartPolicy = attrs.field(factory=RestartPolicy)
    on_state: Callable[[SupervisorState, int], None] | None = attrs.field(default=None, kw_only=True)
    _state: SupervisorState = attrs.field(init=False, default=SupervisorState.STARTING)
    _restarts: int = attrs.field(init=False, default=0)
    _tracker: RestartTracker = attrs.field(init=False)
    _child: ChildProcess | None = attrs.field(init=False, default=None)
    _stop_requested: trio.Event = attrs.field(init=False, factory=trio.Event)
    _hurried: bool = attrs.field(init=False, default=False)

    @_tracker.default
    def _make_tracker(self) -> RestartTracker:
        return RestartTracker(self.policy)

    @property
    def state(self) -> SupervisorState:
        return self._state

    @property
    def attempt(self) -> int:
        """Consecutive restarts since the last stable run."""
        return self._tracker.attempt

    @property
    def restarts(self) -> int:
        """Restart attempts made since :meth:`run` began (a start that failed counts)."""
        return self._restarts

    def statistics(self) -> SupervisorStatistics:
        return SupervisorStatistics(
            state=self._state,
            restarts=self._restarts,
            attempt=self._tracker.attempt,
            child_pid=None if self._child is None else self._child.pid,
        )

    def stop(self) -> None:
        """The graceful stop: no restart once the current child's ``serve`` returns.

        The current child keeps being served: the caller ends its ``serve`` (after draining its
        clients, say), then ``open_child`` stops the child in MCP order and :meth:`run` returns.
        A stop during the backoff wait returns at once, without starting another child. To stop
        without waiting for ``serve``, cancel :meth:`run` instead.
        """
        self._stop_requested.set()

    def hurry(self) -> None:
        """The second-signal path: every child stopped from now on skips the MCP order's grace periods.

        That includes the current one, whether it is still served or already being stopped
        (:meth:`ChildProcess.hurry`). Does not stop anything by itself; does not block.
        """
        self._hurried = True
        if self._child is not None:
            self._child.hurry()

    async def run(
        self,
        serve: Callable[[ChildProcess], Awaitable[None]],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Start the child and hand it to ``serve``; restart it whenever ``serve`` returns.

        This goes on until :meth:`stop` (then it returns) or the crash-loop limit (then it raises).
        ``serve(child)`` should return when it is done with that child, normally because the child
        exited. A return without :meth:`stop` is an unexpected exit: it is logged, counted, and the
        next child starts after the policy's delay. Ready (for ``nursery.start``) once the first
        child is up. Cancel-safe: cancellation stops the current child in MCP order.

        Raises:
            ChildStartError: the first child could not be started (not retried).
            CrashLoop: more than ``crash_limit`` unexpected exits within ``crash_window``; a start
                that fails after the first counts as one, so a transient failure is retried and a
                persistent one ends here.
        """
        self._set_state(SupervisorState.STARTING)
        try:
            await self._supervise(serve, task_status)
        except Exception:
            if self._state is not SupervisorState.FAILED:
                self._set_state(SupervisorState.FAILED)
            raise
        except BaseException:  # cancelled
            self._set_state(SupervisorState.STOPPED)
            raise
        self._set_state(SupervisorState.STOPPED)

    async def _supervise(
        self, serve: Callable[[ChildProcess], Awaitable[None]], task_status: trio.TaskStatus[None]
    ) -> None:
        name = self.spec.name
        first = True
        while True:
            if self._stop_requested.is_set():
                if first:
                    task_status.started()  # stopped before anything started: nothing to wait for
                return
            child: ChildProcess | None = None
            try:
                async with open_child(self.spec, self.limits) as child:
                    self._tracker.started(trio.current_time())
                    self._child = child  # until open_child's exit has stopped it (hurry reaches it)
                    if self._hurried:
                        child.hurry()
                    self._set_state(SupervisorState.READY)
                    if first:
                        first = False
                        task_status.started()
                    else:
                        logger.info("[%s pid %d] restarted (restart %d)", name, child.pid, self._restarts)
                    await serve(child)
            except ChildStartError as exc:
                if first or child is not None:  # unrecoverable, or raised by serve itself
                    raise
                ended = str(exc)
            else:
                assert child is not None and child.returncode is not None  # reaped by open_child
                if self._stop_requested.is_set():
                    logger.info(
                        "[%s pid %d] stopped on request: %s", name, child.pid, describe_exit(child.returncode)
                    )
                    return
                ended = f"pid {child.pid} {describe_exit(child.returncode)}"
            finally:
                self._child = None
            delay = self._tracker.exited(trio.current_time())
            if delay is None:
                message = (
                    f"{name} is crash-looping: {self._tracker.recent_exits} unexpected exits "
                    f"within {self.policy.crash_window:g}s (at most "
                    f"{self.policy.crash_limit} allowed); last: {ended}"
                )
                logger.error("%s; giving up", message)
                self._set_state(SupervisorState.FAILED)
                raise CrashLoop(message)
            logger.warning(
                "[%s] %s; restarting in %.2fs (attempt %d)", name, ended, delay, self._tracker.attempt
            )
            self._set_state(SupervisorState.RESTARTING)
            with trio.move_on_after(delay):
                await self._stop_requested.wait()
            if self._stop_requested.is_set():
                logger.info("[%s] stopped on request while waiting to restart", name)
                return
            self._restarts += 1

    def _set_state(self, state: SupervisorState) -> None:
        self._state = state
        if self.on_state is not None:
            self.on_state(state, self._tracker.attempt)
