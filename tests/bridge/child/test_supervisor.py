"""The shared-mode supervisor: restart policy (sans-IO), exact backoff schedules in virtual time, and
real children that crash, exit, fail to start, are stopped and are cancelled.

The virtual-time tests replace ``open_child`` with a fake that starts nothing (trio's MockClock is
only sound without real I/O in flight); every other supervisor test runs real processes.
"""

from __future__ import annotations

import logging
import os
import random
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio

import bridge._child.supervisor
from bridge import ChildSpec, ChildStartError, Limits
from bridge._child.process import ChildProcess
from bridge._child.supervisor import (
    CrashLoop,
    RestartPolicy,
    RestartTracker,
    Supervisor,
    SupervisorState,
    SupervisorStatistics,
)

from conftest import example_server, process_exists, request

S = SupervisorState
TIMEOUT = 20  # seconds for one real-process test: a handful of Python start-ups
# A hang in a virtual-time test would spin the clock forever; this turns it into a failure.
VIRTUAL_DEADLINE = 3600

# Small numbers so real crash loops end within a fraction of a second.
FAST = RestartPolicy(floor=0.01, cap=0.05, crash_limit=3, crash_window=10)
# The default policy (docs/design.md §6) without jitter, so virtual-time schedules are exact.
NO_JITTER = RestartPolicy(jitter=0)
LIMITS = Limits(stop_stdin_timeout=5, stop_term_timeout=5)
EXITS_AT_ONCE = (sys.executable, "-c", "import sys; sys.exit(3)")


# -- RestartTracker, sans-IO --------------------------------------------------------------------


def test_the_delays_double_from_the_floor_and_stop_at_the_cap():
    tracker = RestartTracker(RestartPolicy(jitter=0, crash_limit=100), random.Random(0))
    delays = []
    for now in range(10):
        tracker.started(now)
        delays.append(tracker.exited(now + 0.1))
    assert delays == [0.5, 1, 2, 4, 8, 16, 30, 30, 30, 30]
    assert tracker.attempt == 10


def test_jitter_stays_within_twenty_percent_and_never_goes_under_the_floor():
    policy = RestartPolicy(crash_limit=1000, crash_window=1)
    tracker = RestartTracker(policy, random.Random(1234))
    ratios: dict[int, list[float]] = {}
    for now in range(500):
        attempt = tracker.attempt % 8
        if attempt == 0:
            tracker = RestartTracker(policy, random.Random(now))
        base = min(policy.cap, policy.floor * 2**attempt)
        delay = tracker.exited(float(now))
        assert delay is not None
        assert delay >= policy.floor
        ratios.setdefault(attempt, []).append(delay / base)
    for attempt, seen in ratios.items():
        assert all(0.8 <= ratio <= 1.2 for ratio in seen), attempt
        assert max(seen) - min(seen) > 0.1, "jitter is applied"
    assert min(ratios[0]) == 1.0, "below the floor, the floor wins"


def test_a_child_that_ran_past_stable_after_resets_the_backoff():
    tracker = RestartTracker(NO_JITTER)
    for now in (0, 1, 3):
        tracker.started(now)
        tracker.exited(now + 0.1)
    assert tracker.attempt == 3
    tracker.started(10)
    assert tracker.exited(10 + 9.9) == 4, "9.9 s is not stable yet: the backoff keeps doubling"
    tracker.started(30)
    assert tracker.exited(30 + 10) == 0.5, "10 s is stable: back to the floor"
    assert tracker.attempt == 1


def test_a_failed_start_never_counts_as_a_stable_run():
    tracker = RestartTracker(NO_JITTER)
    tracker.started(0)
    assert tracker.exited(100) == 0.5
    assert tracker.exited(200) == 1, "no start since the last exit: nothing ran, nothing was stable"


def test_the_exit_of_a_stable_child_still_counts_in_the_crash_window():
    tracker = RestartTracker(RestartPolicy(jitter=0, crash_limit=2, stable_after=10))
    assert tracker.exited(0) == 0.5
    tracker.started(1)
    assert tracker.exited(11) == 0.5
    tracker.started(12)
    assert tracker.exited(22) is None
    assert tracker.recent_exits == 3


def test_more_than_crash_limit_exits_within_the_crash_window_gives_up():
    tracker = RestartTracker(RestartPolicy(crash_limit=5, crash_window=60), random.Random(7))
    delays = [tracker.exited(float(now)) for now in range(5)]
    assert None not in delays
    assert tracker.exited(59.9) is None


def test_exits_spread_over_more_than_the_crash_window_never_trip_the_limit():
    # Five exits in every 60 s, forever: the sixth always falls exactly one window after the first.
    tracker = RestartTracker(RestartPolicy(crash_limit=5, crash_window=60), random.Random(42))
    for exit_number in range(200):
        assert tracker.exited(exit_number * 12.0) is not None, exit_number
    assert tracker.recent_exits == 5


def test_a_policy_whose_cap_is_under_its_floor_is_refused():
    with pytest.raises(ValueError, match="cap"):
        RestartPolicy(floor=1, cap=0.5)


# -- Supervisor, exact schedules in virtual time -------------------------------------------------


@attrs.define(eq=False)
class FakeChild:
    pid: int
    returncode: int | None = None


@attrs.define(eq=False)
class FakeSpawner:
    """Stands in for ``open_child``: records when each start happened; fails those in ``fail``."""

    fail: frozenset[int] = frozenset()
    starts: list[float] = attrs.field(factory=list)

    @asynccontextmanager
    async def __call__(self, spec: ChildSpec, limits: Limits) -> AsyncIterator[FakeChild]:
        number = len(self.starts)
        self.starts.append(trio.current_time())
        if number in self.fail:
            raise ChildStartError("cannot start 'fake': No such file or directory")
        child = FakeChild(1000 + number)
        try:
            yield child
        finally:
            child.returncode = 3


@pytest.fixture
def spawner(monkeypatch: pytest.MonkeyPatch) -> FakeSpawner:
    fake = FakeSpawner()
    monkeypatch.setattr(bridge._child.supervisor, "open_child", fake)
    return fake


def since_first(starts: list[float]) -> list[float]:
    return [round(start - starts[0], 6) for start in starts]


async def test_a_crash_looping_child_is_restarted_on_the_exact_backoff_schedule_then_given_up(
    autojump_clock, spawner, caplog
):
    supervisor = Supervisor(ChildSpec(argv=("fake",), name="fake"), LIMITS, NO_JITTER)

    async def exits_at_once(child: ChildProcess) -> None:
        pass

    with trio.fail_after(VIRTUAL_DEADLINE):
        with pytest.raises(CrashLoop) as raised:
            await supervisor.run(exits_at_once)
    assert since_first(spawner.starts) == [0, 0.5, 1.5, 3.5, 7.5, 15.5]
    assert str(raised.value) == (
        "fake is crash-looping: 6 unexpected exits within 60s "
        "(at most 5 allowed); last: pid 1005 exited with status 3"
    )
    assert supervisor.restarts == 5
    assert supervisor.state is S.FAILED
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings[0] == "[fake] pid 1000 exited with status 3; restarting in 0.50s (attempt 1)"
    assert len(warnings) == 5
    assert [r.levelno for r in caplog.records].count(logging.ERROR) == 1


async def test_a_child_up_for_stable_after_restarts_after_the_floor_again(autojump_clock, spawner):
    supervisor = Supervisor(ChildSpec(argv=("fake",)), LIMITS, NO_JITTER)
    uptimes = [0, 0, 10, 0]

    async def serve(child: ChildProcess) -> None:
        number = len(spawner.starts) - 1
        if number == len(uptimes):
            supervisor.stop()
            return
        await trio.sleep(uptimes[number])

    with trio.fail_after(VIRTUAL_DEADLINE):
        await supervisor.run(serve)
    # delays 0.5, 1 (doubling), then 10 s up: 0.5 again, then 1.
    assert since_first(spawner.starts) == [0, 0.5, 1.5, 12.0, 13.0]
    assert supervisor.state is S.STOPPED


async def test_a_start_that_fails_after_the_first_is_counted_and_retried_with_backoff(
    autojump_clock, spawner
):
    spawner.fail = frozenset({1, 2})
    supervisor = Supervisor(ChildSpec(argv=("fake",)), LIMITS, NO_JITTER)
    served: list[int] = []

    async def serve(child: ChildProcess) -> None:
        served.append(child.pid)
        if len(served) == 2:
            supervisor.stop()

    with trio.fail_after(VIRTUAL_DEADLINE):
        await supervisor.run(serve)
    assert since_first(spawner.starts) == [0, 0.5, 1.5, 3.5]
    assert served == [1000, 1003]
    assert supervisor.restarts == 3


# -- Supervisor with real children ----------------------------------------------------------------


@attrs.define(eq=False)
class Recorder:
    """A serve callback that waits for each child to exit, remembering them, and an on_state log."""

    children: list[ChildProcess] = attrs.field(factory=list)
    states: list[tuple[SupervisorState, int]] = attrs.field(factory=list)

    def on_state(self, state: SupervisorState, attempt: int) -> None:
        self.states.append((state, attempt))

    async def serve(self, child: ChildProcess) -> None:
        self.children.append(child)
        await child.wait()


async def crash_on_first_request(child: ChildProcess) -> None:
    await child.channel.send(request(1, "ping"))  # --crash-after 0: exits 3 on receiving it
    await child.wait()


async def test_a_crashing_child_is_restarted_with_backoff_until_the_supervisor_raises_crash_loop(
    caplog,
):
    caplog.set_level(logging.INFO, logger="bridge")
    supervisor = Supervisor(
        ChildSpec(argv=example_server("--crash-after", "0"), name="example"), LIMITS, FAST
    )
    pids: list[int] = []

    async def serve(child: ChildProcess) -> None:
        pids.append(child.pid)
        await crash_on_first_request(child)

    with trio.fail_after(TIMEOUT):
        with pytest.RaisesGroup(CrashLoop) as raised:  # raised by the task nursery.start started
            async with trio.open_nursery() as nursery:
                await nursery.start(supervisor.run, serve)
    message = str(raised.value.exceptions[0])
    assert message.startswith(
        "example is crash-looping: 4 unexpected exits within 10s (at most 3 allowed); last: pid "
    )
    assert message.endswith(" exited with status 3")
    assert len(set(pids)) == 4
    assert not any(process_exists(pid) for pid in pids)
    assert supervisor.restarts == 3
    assert supervisor.statistics() == SupervisorStatistics(S.FAILED, 3, 3, None)
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and r.name == "bridge.supervisor"
    ]
    assert len(warnings) == 3 and all("exited with status 3; restarting in" in w for w in warnings)
    assert "giving up" in [r for r in caplog.records if r.levelno == logging.ERROR][-1].getMessage()


async def test_the_states_seen_by_on_state_go_from_starting_to_ready_to_restarting_to_failed():
    recorder = Recorder()
    supervisor = Supervisor(ChildSpec(argv=EXITS_AT_ONCE), LIMITS, FAST, on_state=recorder.on_state)
    with trio.fail_after(TIMEOUT):
        with pytest.raises(CrashLoop, match=r"4 unexpected exits .* exited with status 3$"):
            await supervisor.run(recorder.serve)
    assert recorder.states == [
        (S.STARTING, 0),
        (S.READY, 0),
        (S.RESTARTING, 1),
        (S.READY, 1),
        (S.RESTARTING, 2),
        (S.READY, 2),
        (S.RESTARTING, 3),
        (S.READY, 3),
        (S.FAILED, 3),
    ]
    assert [child.returncode for child in recorder.children] == [3, 3, 3, 3]


async def test_a_command_that_does_not_exist_raises_child_start_error_at_once_without_retrying(
    caplog,
):
    recorder = Recorder()
    supervisor = Supervisor(
        ChildSpec(argv=("/nonexistent/mcp-server",)), LIMITS, FAST, on_state=recorder.on_state
    )
    with trio.fail_after(TIMEOUT):
        with pytest.RaisesGroup(
            pytest.RaisesExc(ChildStartError, match="cannot start '/nonexistent/mcp-server': No such file")
        ):
            async with trio.open_nursery() as nursery:
                await nursery.start(supervisor.run, recorder.serve)
    assert recorder.children == []
    assert recorder.states == [(S.STARTING, 0), (S.FAILED, 0)]
    assert supervisor.restarts == 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_command_that_disappears_after_the_first_start_ends_in_crash_loop(tmp_path: Path):
    # The binary removed during an upgrade: later starts fail, are counted, and end the loop.
    script = tmp_path / "server"
    script.write_text("#!/bin/sh\nexit 3\n")
    script.chmod(0o755)
    supervisor = Supervisor(ChildSpec(argv=(str(script),), name="gone"), LIMITS, FAST)
    pids: list[int] = []

    async def serve(child: ChildProcess) -> None:
        pids.append(child.pid)
        await child.wait()
        os.unlink(script)

    with trio.fail_after(TIMEOUT):
        with pytest.raises(CrashLoop) as raised:
            await supervisor.run(serve)
    assert len(pids) == 1
    assert supervisor.restarts == 3
    assert str(raised.value) == (
        f"gone is crash-looping: 4 unexpected exits within 10s (at most 3 "
        f"allowed); last: cannot start '{script}': No such file or directory"
    )


async def test_stop_ends_run_without_a_restart_once_serve_returns():
    recorder = Recorder()
    supervisor = Supervisor(
        ChildSpec(argv=example_server("--crash-after", "0")), LIMITS, FAST, on_state=recorder.on_state
    )

    async def serve(child: ChildProcess) -> None:
        recorder.children.append(child)
        assert supervisor.statistics() == SupervisorStatistics(S.READY, 0, 0, child.pid)
        supervisor.stop()
        await crash_on_first_request(child)  # even an exit with an error status is not restarted

    with trio.fail_after(TIMEOUT):
        await supervisor.run(serve)
    assert len(recorder.children) == 1
    assert recorder.children[0].returncode == 3
    assert recorder.states == [(S.STARTING, 0), (S.READY, 0), (S.STOPPED, 0)]
    assert supervisor.statistics() == SupervisorStatistics(S.STOPPED, 0, 0, None)


async def test_stop_while_waiting_to_restart_returns_at_once_without_another_start():
    recorder = Recorder()
    slow = RestartPolicy(floor=600, cap=600)

    def on_state(state: SupervisorState, attempt: int) -> None:
        recorder.on_state(state, attempt)
        if state is S.RESTARTING:
            supervisor.stop()

    supervisor = Supervisor(ChildSpec(argv=EXITS_AT_ONCE), LIMITS, slow, on_state=on_state)
    with trio.fail_after(TIMEOUT):
        await supervisor.run(recorder.serve)
    assert len(recorder.children) == 1
    assert recorder.states == [(S.STARTING, 0), (S.READY, 0), (S.RESTARTING, 1), (S.STOPPED, 1)]
    assert supervisor.restarts == 0


async def test_cancelling_run_stops_the_current_child_in_mcp_order():
    recorder = Recorder()
    supervisor = Supervisor(ChildSpec(argv=example_server()), LIMITS, FAST, on_state=recorder.on_state)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(supervisor.run, recorder.serve)
            child = recorder.children[0]
            assert supervisor.statistics().child_pid == child.pid
            nursery.cancel_scope.cancel()
    assert child.returncode == 0, "it exited on stdin EOF, the first step of the MCP order"
    assert not process_exists(child.pid)
    assert recorder.states == [(S.STARTING, 0), (S.READY, 0), (S.STOPPED, 0)]
    assert supervisor.statistics() == SupervisorStatistics(S.STOPPED, 0, 0, None)
