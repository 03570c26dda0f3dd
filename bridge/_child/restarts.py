"""The restart policy of the shared mode's supervisor, sans-IO, and what it reports.

:class:`RestartPolicy` and :class:`RestartTracker`: the numbers, and the bookkeeping that turns a
history of starts and exits into "restart in so many seconds" or "give up" (the numbers, and where
each comes from, are in docs/design.md §6). They take the time as an argument and import nothing
from trio, so every schedule can be tested exactly. :class:`SupervisorState` and
:class:`CrashLoop` are what the supervisor (:mod:`.supervisor`) reports.

Kept apart from the supervisor because every configuration holds a policy and every daemon names
the states, while only a bridge with a shared child runs a supervisor: one with a child per
connection never imports :mod:`.supervisor`.
"""

from __future__ import annotations

import collections
import enum
import random

import attrs

from .._errors import BridgeError

# First delay before a restart: daemontools' supervise(8) "pauses for a second after starting ./run,
# so that it does not loop too quickly", and s6 waits 1 s too; half that here, doubling from there.
# It stops a crashing child from becoming a busy loop.
RESTART_FLOOR = 0.5
# Longest delay before a restart; systemd's RestartMaxDelaySec plays this role.
RESTART_CAP = 30.0
# Each consecutive restart waits this many times longer than the one before (exponential backoff, as
# systemd's RestartSteps= climbs to RestartMaxDelaySec=).
RESTART_MULTIPLIER = 2.0
# Each delay is scaled by a random factor in [1 - JITTER, 1 + JITTER] (±20 %), so bridges restarted
# by the same event do not restart their children in lockstep.
RESTART_JITTER = 0.2
# A child up this long is "stable" and its exit resets the backoff to the floor: supervisord's
# ``startsecs``, like systemd resetting its restart counter.
STABLE_AFTER = 10.0
# More than CRASH_LIMIT unexpected exits within CRASH_WINDOW seconds means the child is
# crash-looping and the bridge gives up: systemd's StartLimitBurst=5 / StartLimitIntervalSec
# (systemd's default interval is 10 s; ours is longer because the backoff already spaces the
# restarts out).
CRASH_LIMIT = 5
CRASH_WINDOW = 60.0


@attrs.frozen
class RestartPolicy:
    """When to restart a child that exited unexpectedly, and when to give up.

    Attributes:
        floor: the first delay, and the least any delay may be (jitter included), in seconds.
        cap: the most the exponential part of a delay may grow to, in seconds; jitter is applied
            after the cap, so a delay may reach ``cap * (1 + jitter)``.
        multiplier: each consecutive restart's delay over the previous one's.
        jitter: the relative spread of each delay (0.2: ±20 %).
        stable_after: a child up at least this long resets the backoff to ``floor``.
        crash_limit: how many unexpected exits within ``crash_window`` are tolerated; one more and
            the supervisor gives up.
        crash_window: the span, in seconds, over which exits are counted.

    Raises:
        ValueError: ``floor`` is not positive, ``cap`` is less than ``floor``, ``multiplier`` is
            less than 1, ``jitter`` is not in ``[0, 1)``, or ``crash_limit`` is negative.
    """

    floor: float = attrs.field(default=RESTART_FLOOR, validator=attrs.validators.gt(0))
    cap: float = attrs.field(default=RESTART_CAP)
    multiplier: float = attrs.field(default=RESTART_MULTIPLIER, validator=attrs.validators.ge(1))
    jitter: float = attrs.field(
        default=RESTART_JITTER, validator=[attrs.validators.ge(0), attrs.validators.lt(1)]
    )
    stable_after: float = STABLE_AFTER
    crash_limit: int = attrs.field(default=CRASH_LIMIT, validator=attrs.validators.ge(0))
    crash_window: float = CRASH_WINDOW

    @cap.validator
    def _check_cap(self, attribute: attrs.Attribute[float], value: float) -> None:
        if value < self.floor:
            raise ValueError(f"cap ({value}) must not be less than floor ({self.floor})")


def _random_or_new(rng: random.Random | None) -> random.Random:
    return random.Random() if rng is None else rng


@attrs.define
class RestartTracker:
    """The restart bookkeeping for one supervised child, sans-IO: the caller passes the time.

    Owned by one :class:`Supervisor` (or a test). Call :meth:`started` each time a child is up and
    :meth:`exited` each time one ends unexpectedly (or could not be started); a graceful stop is
    not an exit here.

    Args:
        policy: the numbers.
        rng: the source of jitter (a seeded ``random.Random`` makes delays reproducible).
    """

    policy: RestartPolicy = attrs.field(factory=RestartPolicy)
    _rng: random.Random = attrs.field(default=None, converter=_random_or_new)
    _attempt: int = attrs.field(init=False, default=0)
    _started_at: float | None = attrs.field(init=False, default=None)
    _exits: collections.deque[float] = attrs.field(init=False, factory=collections.deque)

    @property
    def attempt(self) -> int:
        """Consecutive restarts since the last stable run (0: none).

        A stable run resets it when that child exits, not while it runs.
        """
        return self._attempt

    @property
    def recent_exits(self) -> int:
        """Unexpected exits counted in the crash window as of the last :meth:`exited`."""
        return len(self._exits)

    def started(self, now: float) -> None:
        """A child is up as of ``now``."""
        self._started_at = now

    def exited(self, now: float) -> float | None:
        """Record an unexpected exit (or a failed start) at ``now``.

        Returns:
            The delay in seconds before the next start, or ``None`` when this exit is one more than
            ``crash_limit`` within ``crash_window``: give up. A child that had been up for at
            least ``stable_after`` since its :meth:`started` resets the backoff to the floor; its
            exit still counts in the crash window. An exit with no :meth:`started` since the last
            one (a failed start) never counts as stable.
        """
        policy = self.policy
        started_at, self._started_at = self._started_at, None
        if started_at is not None and now - started_at >= policy.stable_after:
            self._attempt = 0
        self._exits.append(now)
        while self._exits and now - self._exits[0] >= policy.crash_window:
            self._exits.popleft()
        if len(self._exits) > policy.crash_limit:
            return None
        try:
            base = policy.floor * policy.multiplier**self._attempt
        except OverflowError:  # a very long history of unstable runs spread over many windows
            base = policy.cap
        self._attempt += 1
        spread = self._rng.uniform(-policy.jitter, policy.jitter)
        return max(policy.floor, min(base, policy.cap) * (1.0 + spread))


class SupervisorState(enum.Enum):
    """Where a :class:`Supervisor` is.

    ``run`` goes STARTING → READY, then READY → RESTARTING → READY for each restart, and ends in
    STOPPED (stop or cancellation) or FAILED (it raised).
    """

    STARTING = "starting"
    """The first child is being started; nothing has been served yet."""
    READY = "ready"
    """A child is up and handed to ``serve``."""
    RESTARTING = "restarting"
    """The child ended unexpectedly; waiting out the backoff, then starting the next one."""
    FAILED = "failed"
    """Gave up: :class:`CrashLoop`, a first start that failed, or an error from ``serve``."""
    STOPPED = "stopped"
    """Stopped on request (:meth:`Supervisor.stop`) or by cancellation."""


class CrashLoop(BridgeError):
    """The child ended unexpectedly more than ``crash_limit`` times within ``crash_window``.

    Raised by the shared-mode supervisor, and so out of ``Daemon.run`` and
    :func:`~bridge.open_bridge`. The CLI exits 75 (``EX_TEMPFAIL``), so that systemd's restart
    policy takes over.
    """
