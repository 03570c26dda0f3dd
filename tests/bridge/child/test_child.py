"""The child process: launch (no shell, own process group, explicit environment), stop in MCP order,
stderr as tagged, escaped, rate-limited log lines.

Real processes throughout: the bundled example server with its fault switches, and tiny
``python -c`` children that report what they received as a JSON-RPC notification on stdout.
"""

from __future__ import annotations

import gc
import logging
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from bridge import ChildSpec, ChildStartError, Limits, open_child
from bridge._child.process import INHERITED_ENV, ChildProcess
from bridge._child.stderr import MAX_STDERR_LINE, STDERR_LINES_PER_SECOND, RateLimiter

from conftest import call, example_server, process_exists, request, result_text, wait_until_gone

TIMEOUT = 20  # seconds for one test: a few Python start-ups and at most a few stop timeouts

# Short stop timeouts so the SIGTERM and SIGKILL paths are fast.
FAST_STOP = Limits(stop_stdin_timeout=0.5, stop_term_timeout=0.5)
# For children that do exit on stdin EOF: room enough that a slow start-up never looks like a hang.
PATIENT_STOP = Limits(stop_stdin_timeout=10, stop_term_timeout=10)

# Reports its arguments, environment and working directory as one notification, then waits for
# stdin EOF.
REPORTER = """\
import json, os, sys
report = {"argv": sys.argv[1:], "env": dict(os.environ), "cwd": os.getcwd()}
sys.stdout.write(json.dumps({"jsonrpc": "2.0", "method": "report", "params": report}) + "\\n")
sys.stdout.flush()
sys.stdin.read()
"""


def python_child(script: str, *args: str) -> tuple[str, ...]:
    return (sys.executable, "-c", script, *args)


async def report_of(child: ChildProcess) -> dict[str, Any]:
    message = await child.channel.receive()
    assert message["method"] == "report"
    return message["params"]  # type: ignore[no-any-return]


async def ping(child: ChildProcess, request_id: int = 1) -> None:
    """One round trip: the child is running its main loop (signal dispositions are in place)."""
    await child.channel.send(request(request_id, "ping"))
    assert await child.channel.receive() == {"jsonrpc": "2.0", "id": request_id, "result": {}}


class LogWatcher(logging.Handler):
    """Collects log records and lets a task wait for one (an event per record, no polling)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self._changed = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self._changed.set()
        self._changed = trio.Event()

    def messages(self, level: int | None = None) -> list[str]:
        return [r.getMessage() for r in self.records if level is None or r.levelno == level]

    async def wait_for(self, predicate: Callable[[str], bool]) -> str:
        while True:
            changed = self._changed
            for message in self.messages():
                if predicate(message):
                    return message
            await changed.wait()


@pytest.fixture
def bridge_log(caplog: pytest.LogCaptureFixture) -> Iterator[LogWatcher]:
    """Records of the ``bridge`` loggers at INFO and above (stderr lines are ``bridge.child``)."""
    caplog.set_level(logging.INFO, logger="bridge")
    caplog.set_level(logging.INFO, logger="bridge.child")
    watcher = LogWatcher()
    logger = logging.getLogger("bridge")
    logger.addHandler(watcher)
    try:
        yield watcher
    finally:
        logger.removeHandler(watcher)


# -- launch ---------------------------------------------------------------------------------------


async def test_the_child_runs_as_the_leader_of_its_own_process_group_and_session() -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(example_server()), PATIENT_STOP) as child:
            await ping(child)
            assert os.getpgid(child.pid) == child.pid
            assert os.getsid(child.pid) == child.pid
            assert os.getpgid(child.pid) != os.getpgrp()


async def test_argv_is_executed_without_a_shell_so_shell_syntax_arrives_verbatim(tmp_path: Path) -> None:
    witness = tmp_path / "a shell ran this"
    tricky = (
        f"$(touch '{witness}')",
        f"`touch '{witness}'`",
        ";",
        f"; touch '{witness}'",
        "&&",
        "|",
        "*",
        "$HOME",
        "'single'",
        '"double"',
        "a b  c",
        "",
        "\\n",
        "--flag=x y",
    )
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(python_child(REPORTER, *tricky)), PATIENT_STOP) as child:
            report = await report_of(child)
    assert report["argv"] == list(tricky)
    assert not witness.exists()


async def test_the_environment_holds_only_the_allowlist_configured_env_and_pass_env(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MB_UNRELATED_SECRET", "must not leak")
    monkeypatch.setenv("MB_PASSED", "passed on")
    monkeypatch.setenv("LISTEN_FDS", "3")
    monkeypatch.setenv("LISTEN_PID", str(os.getpid()))
    monkeypatch.setenv("LISTEN_FDNAMES", "mcp")
    monkeypatch.setenv("NOTIFY_SOCKET", "/run/systemd/notify")
    monkeypatch.setenv("WATCHDOG_USEC", "1000000")
    monkeypatch.setenv("PATH", os.environ.get("PATH", "/usr/bin:/bin"))
    spec = ChildSpec(
        python_child(REPORTER),
        env={"MB_CONFIGURED": "configured", "MB_PASSED": "configured wins", "NOTIFY_SOCKET": "/x"},
        pass_env=(
            "MB_PASSED",
            "MB_NOT_SET_ANYWHERE",
            "LISTEN_FDS",
            "LISTEN_PID",
            "NOTIFY_SOCKET",
            "WATCHDOG_USEC",
        ),
    )
    with trio.fail_after(TIMEOUT):
        async with open_child(spec, PATIENT_STOP) as child:
            env = (await report_of(child))["env"]
    assert env["MB_CONFIGURED"] == "configured"
    assert env["MB_PASSED"] == "configured wins"  # configured env overrides a passed-on value
    assert env["PATH"] == os.environ["PATH"]
    for name in (
        "MB_UNRELATED_SECRET",
        "MB_NOT_SET_ANYWHERE",
        "LISTEN_FDS",
        "LISTEN_PID",
        "LISTEN_FDNAMES",
        "NOTIFY_SOCKET",
        "WATCHDOG_USEC",
    ):
        assert name not in env, name
    # Nothing else at all (LC_CTYPE may be added by CPython's own locale coercion; it is allowlisted).
    assert set(env) <= {*INHERITED_ENV, "MB_CONFIGURED", "MB_PASSED"}


async def test_a_variable_named_in_pass_env_is_passed_on_with_its_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MB_PASSED", "value with spaces; and $(shell) syntax")
    with trio.fail_after(TIMEOUT):
        async with open_child(
            ChildSpec(python_child(REPORTER), pass_env=("MB_PASSED",)), PATIENT_STOP
        ) as child:
            env = (await report_of(child))["env"]
    assert env["MB_PASSED"] == "value with spaces; and $(shell) syntax"


async def test_the_child_runs_in_the_configured_working_directory(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(python_child(REPORTER), cwd=str(tmp_path)), PATIENT_STOP) as child:
            report = await report_of(child)
    assert Path(report["cwd"]).resolve() == tmp_path.resolve()


async def test_a_command_that_does_not_exist_raises_child_start_error_naming_it() -> None:
    with trio.fail_after(TIMEOUT):
        with pytest.raises(ChildStartError, match="mb-no-such-command-xyz"):
            async with open_child(ChildSpec(("mb-no-such-command-xyz", "--arg")), FAST_STOP):
                pytest.fail("the block must not run")  # pragma: no cover


async def test_a_command_that_is_not_executable_raises_child_start_error_naming_it(tmp_path: Path) -> None:
    script = tmp_path / "not-executable.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o644)
    with trio.fail_after(TIMEOUT):
        with pytest.raises(ChildStartError, match=r"not-executable\.sh"):
            async with open_child(ChildSpec((str(script),)), FAST_STOP):
                pytest.fail("the block must not run")  # pragma: no cover


async def test_messages_pass_through_the_childs_stdin_and_stdout_as_a_channel() -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(example_server()), PATIENT_STOP) as child:
            await child.channel.send(call("a", "echo", text="line one\nline two é"))
            reply = await child.channel.receive()
    assert reply["id"] == "a"
    assert result_text(reply) == "line one\nline two é"


# -- stop, MCP order ------------------------------------------------------------------------------


async def test_a_well_behaved_child_exits_on_stdin_eof_without_any_signal(bridge_log: LogWatcher) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(example_server()), PATIENT_STOP) as child:
            await ping(child)
        assert child.returncode == 0
    assert not any("SIGTERM" in m or "SIGKILL" in m for m in bridge_log.messages())


async def test_a_child_that_ignores_stdin_eof_is_stopped_by_sigterm(bridge_log: LogWatcher) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(example_server("--ignore-stdin-eof")), FAST_STOP) as child:
            await ping(child)
        assert child.returncode == -signal.SIGTERM
    assert any("sending SIGTERM" in m for m in bridge_log.messages())
    assert not any("sending SIGKILL" in m for m in bridge_log.messages())


async def test_a_child_that_ignores_stdin_eof_and_sigterm_is_killed_with_sigkill(
    bridge_log: LogWatcher,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(
            ChildSpec(example_server("--ignore-stdin-eof", "--ignore-sigterm")), FAST_STOP
        ) as child:
            await ping(child)
        assert child.returncode == -signal.SIGKILL
    messages = bridge_log.messages()
    assert any("sending SIGTERM" in m for m in messages)
    assert any("sending SIGKILL" in m for m in messages)
    assert not process_exists(child.pid)


async def test_the_stop_waits_the_stdin_timeout_before_signalling(bridge_log: LogWatcher) -> None:
    limits = Limits(stop_stdin_timeout=0.5, stop_term_timeout=5)
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(example_server("--ignore-stdin-eof")), limits) as child:
            await ping(child)
            started = trio.current_time()
        elapsed = trio.current_time() - started
    assert child.returncode == -signal.SIGTERM
    assert 0.5 <= elapsed < 5


@pytest.mark.parametrize(
    "flags",
    [(), ("--ignore-stdin-eof",), ("--ignore-stdin-eof", "--ignore-sigterm")],
    ids=["exits-on-eof", "needs-sigterm", "needs-sigkill"],
)
async def test_a_grandchild_in_the_childs_process_group_does_not_survive_the_stop(
    flags: tuple[str, ...],
) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(example_server(*flags)), FAST_STOP) as child:
            await child.channel.send(call(1, "spawn_grandchild"))
            grandchild = int(result_text(await child.channel.receive()))
            assert process_exists(grandchild)
            assert os.getpgid(grandchild) == child.pid
        await wait_until_gone(grandchild)
        assert not process_exists(child.pid)


def open_pipes() -> int:
    """Pipe file descriptors this process holds now."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:")
        except OSError:
            pass  # the listing's own fd, closed by now
    return count


async def test_a_stopped_child_leaves_none_of_its_pipes_open_in_the_bridge() -> None:
    # The garbage collector would close a forgotten pipe some time later; the stop must not
    # count on it (a soak of per-connection children held hundreds of stderr pipes until then).
    gc.disable()
    try:
        before = open_pipes()
        with trio.fail_after(TIMEOUT):
            for _ in range(3):
                async with open_child(ChildSpec(example_server()), PATIENT_STOP) as child:
                    await ping(child)
        assert child.returncode == 0
        assert open_pipes() == before
    finally:
        gc.enable()


async def test_stop_is_idempotent_and_later_calls_return_at_once() -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(example_server()), PATIENT_STOP) as child:
            await ping(child)
            await child.stop()
            assert child.returncode == 0
            await child.stop()
            assert child.returncode == 0
        # ...and the block's own stop on exit is a third, harmless call.
    assert child.returncode == 0


async def test_concurrent_stops_all_return_after_the_child_is_reaped() -> None:
    finished: list[int | None] = []
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(example_server("--ignore-stdin-eof")), FAST_STOP) as child:
            await ping(child)

            async def stop() -> None:
                await child.stop()
                finished.append(child.returncode)

            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(stop)
    assert finished == [-signal.SIGTERM] * 3


async def test_stop_completes_when_its_caller_is_cancelled_leaving_no_orphan() -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(
            ChildSpec(example_server("--ignore-stdin-eof", "--ignore-sigterm")), FAST_STOP
        ) as child:
            await ping(child)
            with trio.CancelScope() as scope:
                scope.cancel()  # already cancelled when stop() starts
                await child.stop()
            assert child.returncode == -signal.SIGKILL
            assert not process_exists(child.pid)


async def test_cancelling_the_block_that_owns_the_child_still_stops_and_reaps_it() -> None:
    pid = None
    with trio.fail_after(TIMEOUT):
        with trio.CancelScope() as scope:
            async with open_child(
                ChildSpec(example_server("--ignore-stdin-eof", "--ignore-sigterm")), FAST_STOP
            ) as child:
                pid = child.pid
                await ping(child)
                scope.cancel()
                await trio.sleep_forever()
        assert scope.cancelled_caught
        assert child.returncode == -signal.SIGKILL
        assert pid is not None and not process_exists(pid)


class Boom(Exception):
    pass


async def test_an_exception_in_the_block_still_stops_and_reaps_the_child() -> None:
    with trio.fail_after(TIMEOUT):
        with pytest.raises(BaseException) as raised:
            async with open_child(ChildSpec(example_server("--ignore-stdin-eof")), FAST_STOP) as child:
                await ping(child)
                raise Boom
    assert raised.type is Boom or raised.group_contains(Boom, depth=None)
    assert child.returncode == -signal.SIGTERM
    assert not process_exists(child.pid)


async def test_an_exception_raised_in_the_block_propagates_unwrapped() -> None:
    with trio.fail_after(TIMEOUT):
        with pytest.raises(Boom):
            async with open_child(ChildSpec(example_server()), PATIENT_STOP) as child:
                await ping(child)
                raise Boom


async def test_a_child_that_already_exited_is_reaped_with_its_status_and_no_signal(
    bridge_log: LogWatcher,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(example_server("--crash-after", "0")), FAST_STOP) as child:
            await child.channel.send(request(1, "ping"))
            assert await child.wait() == 3
        assert child.returncode == 3
    assert not any("SIGTERM" in m for m in bridge_log.messages())


async def test_stop_does_not_hang_on_a_child_blocked_writing_a_full_stdout_pipe() -> None:
    """Nobody reads the reply of 4 MiB; the stop reads stdout while it waits, so the child finishes
    its write, sees stdin EOF and exits by itself."""
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(example_server()), PATIENT_STOP) as child:
            await ping(child)
            await child.channel.send(call(2, "blob", size=4 * 1024 * 1024))
            await child.channel.send(request(3, "ping"))
        assert child.returncode == 0


# -- stderr ---------------------------------------------------------------------------------------


async def test_stderr_lines_are_logged_at_info_tagged_with_server_name_and_pid(
    bridge_log: LogWatcher,
) -> None:
    script = "import sys; sys.stderr.write('hello from stderr\\n'); sys.stderr.flush(); sys.stdin.read()"
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(python_child(script), name="weather"), PATIENT_STOP) as child:
            await bridge_log.wait_for(lambda m: "hello from stderr" in m)
    [record] = [r for r in bridge_log.records if "hello from stderr" in r.getMessage()]
    assert record.name == "bridge.child"
    assert record.levelno == logging.INFO
    assert record.getMessage() == f"[weather pid {child.pid}] hello from stderr"


async def test_control_characters_and_invalid_utf8_on_stderr_are_escaped_in_the_log(
    bridge_log: LogWatcher,
) -> None:
    script = (
        "import sys; sys.stderr.buffer.write("
        "b'red \\x1b[31malert\\x1b[0m\\rforged 2024 ERROR root: fake\\x00\\x7f\\xff tab\\there\\n'"
        "); sys.stderr.flush(); sys.stdin.read()"
    )
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(python_child(script), name="s"), PATIENT_STOP) as child:
            message = await bridge_log.wait_for(lambda m: "alert" in m)
    assert message == (
        f"[s pid {child.pid}] red \\x1b[31malert\\x1b[0m\\x0dforged 2024 ERROR root: fake"
        "\\x00\\x7f\\xff tab\there"
    )
    assert not re.search(r"[\x00-\x08\x0a-\x1f\x7f]", message)


async def test_a_long_stderr_line_is_logged_truncated(bridge_log: LogWatcher) -> None:
    script = (
        f"import sys; sys.stderr.write('y' * {MAX_STDERR_LINE * 4} + '\\nafter\\n'); "
        "sys.stderr.flush(); sys.stdin.read()"
    )
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(python_child(script)), PATIENT_STOP):
            await bridge_log.wait_for(lambda m: m.endswith("] after"))
    [long] = [m for m in bridge_log.messages() if "yyy" in m]
    assert "truncated" in long
    assert len(long) < MAX_STDERR_LINE + 200


async def test_stderr_is_never_forwarded_as_protocol_data(bridge_log: LogWatcher) -> None:
    script = (
        "import sys\n"
        'sys.stderr.write(\'{"jsonrpc": "2.0", "method": "from-stderr"}\\n\'); sys.stderr.flush()\n'
        "sys.stdin.readline()\n"
        'sys.stdout.write(\'{"jsonrpc": "2.0", "id": 1, "result": {}}\\n\'); sys.stdout.flush()\n'
        "sys.stdin.read()\n"
    )
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(python_child(script)), PATIENT_STOP) as child:
            await bridge_log.wait_for(lambda m: "from-stderr" in m)
            await ping(child)
            with pytest.raises(trio.WouldBlock):
                child.channel.receive_nowait()


async def test_a_stderr_flood_is_rate_limited_with_a_suppressed_summary(bridge_log: LogWatcher) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(
            ChildSpec(example_server("--stderr-flood", "1000"), name="flood"), PATIENT_STOP
        ) as child:
            await ping(child)  # the whole flood was written before the server read stdin
            await bridge_log.wait_for(lambda m: m.endswith(f"stderr line {STDERR_LINES_PER_SECOND - 1}"))
    logged = [m for m in bridge_log.messages(logging.INFO) if "example server: stderr line" in m]
    summaries = [m for m in bridge_log.messages(logging.WARNING) if "suppressed" in m]
    assert logged[:3] == [f"[flood pid {child.pid}] example server: stderr line {n}" for n in range(3)]
    # The flood takes milliseconds: at most one or two one-second windows' worth is logged.
    assert STDERR_LINES_PER_SECOND <= len(logged) <= 2 * STDERR_LINES_PER_SECOND
    assert summaries and all(m.startswith(f"[flood pid {child.pid}] ") for m in summaries)
    suppressed = sum(
        int(re.search(r"\] (\d+) stderr lines suppressed", m).group(1))  # type: ignore[union-attr]
        for m in summaries
    )
    assert len(logged) + suppressed == 1000


async def test_a_last_stderr_line_without_a_newline_is_logged_with_its_text(bridge_log: LogWatcher) -> None:
    script = (
        "import sys; sys.stdin.read(); sys.stderr.write('fatal: disk full (no newline)'); sys.stderr.flush()"
    )
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(python_child(script)), PATIENT_STOP) as child:
            await child.channel.send(request(1, "ping"))
        assert child.returncode == 0
    assert any("fatal: disk full (no newline)" in m for m in bridge_log.messages())


async def test_stderr_written_just_before_the_child_exits_is_still_logged(bridge_log: LogWatcher) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(
            ChildSpec(example_server("--crash-after", "0"), name="crashy"), PATIENT_STOP
        ) as child:
            await child.channel.send(request(1, "ping"))
            await child.wait()
    assert f"[crashy pid {child.pid}] example server: crashing on request 1" in bridge_log.messages()


# -- RateLimiter, sans-IO -------------------------------------------------------------------------


def test_rate_limiter_admits_per_second_events_in_a_window_then_suppresses() -> None:
    limiter = RateLimiter(3)
    assert [limiter.admit(10.0 + i * 0.1) for i in range(5)] == [
        (True, 0),
        (True, 0),
        (True, 0),
        (False, 0),
        (False, 0),
    ]


def test_rate_limiter_reports_the_suppressed_count_once_when_the_next_window_opens() -> None:
    limiter = RateLimiter(2)
    for t in (0.0, 0.1, 0.2, 0.3, 0.4):
        limiter.admit(t)
    assert limiter.admit(1.0) == (True, 3)  # exactly one second later: a new window
    assert limiter.admit(1.1) == (True, 0)  # reported once only
    assert limiter.admit(1.2) == (False, 0)
    assert limiter.admit(5.0) == (True, 1)


def test_rate_limiter_window_does_not_roll_before_a_full_second() -> None:
    limiter = RateLimiter(1)
    assert limiter.admit(100.0) == (True, 0)
    assert limiter.admit(100.999) == (False, 0)
    assert limiter.admit(101.0) == (True, 1)


def test_rate_limiter_flush_returns_the_unreported_count_and_resets_it() -> None:
    limiter = RateLimiter(1)
    limiter.admit(0.0)
    limiter.admit(0.5)
    limiter.admit(0.6)
    assert limiter.flush() == 2
    assert limiter.flush() == 0
    assert limiter.admit(2.0) == (True, 0)  # what was flushed is not reported again


def test_rate_limiter_works_from_any_starting_clock_value() -> None:
    for start in (0.0, -1e6, 1e9):
        limiter = RateLimiter(1)
        assert limiter.admit(start) == (True, 0)
        assert limiter.admit(start) == (False, 0)


def test_rate_limiter_counts_every_event_admitted_or_suppressed_or_flushed() -> None:
    limiter = RateLimiter(7)
    admitted = reported = 0
    for i in range(1000):
        allowed, suppressed = limiter.admit(i * 0.003)  # 3 s of events at 333/s
        admitted += allowed
        reported += suppressed
    assert admitted + reported + limiter.flush() == 1000
    assert admitted == 7 * 3  # windows open at 0, 1.002 and 2.004
