"""The daemon's one stderr reader for many children logs what a task per child logs.

Real child processes (``python -c``) write to stderr; the same script runs once with its stderr
read by a task of its own (``open_child`` alone) and once through a :class:`StderrReader`, and the
log lines must be the same.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator

import pytest
import trio

from bridge import ChildSpec, Limits, open_child
from bridge._child.stderr import MAX_STDERR_LINE, StderrReader

TIMEOUT = 20  # seconds for one test: a few Python start-ups
PATIENT_STOP = Limits(stop_stdin_timeout=10, stop_term_timeout=10)

# Lines of every kind the log treats differently (plain, control characters, invalid UTF-8, over
# the length limit), then "ready" on stdout, then a last line without a newline once stdin ends.
WRITER = f"""\
import sys
err = sys.stderr.buffer
err.write(b"plain line\\n")
err.write(b"bell \\x07 escape \\x1b[31m bad \\xff utf-8\\n")
err.write(b"y" * {MAX_STDERR_LINE * 2} + b"\\nafter the long one\\n")
err.flush()
sys.stdout.write('{{"jsonrpc": "2.0", "method": "ready"}}\\n')
sys.stdout.flush()
sys.stdin.read()
err.write(b"last words without a newline")
err.flush()
"""


@pytest.fixture
def child_lines(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Records of ``bridge.child`` at INFO and above."""
    caplog.set_level(logging.INFO, logger="bridge.child")
    yield caplog


def untagged(log: pytest.LogCaptureFixture, pid: int) -> list[str]:
    tag = f"[writer pid {pid}] "
    return [r.getMessage().removeprefix(tag) for r in log.records if r.getMessage().startswith(tag)]


async def run_writer(reader: StderrReader | None) -> int:
    """Run WRITER to its end; return its pid."""
    async with open_child(
        ChildSpec((sys.executable, "-c", WRITER), name="writer"), PATIENT_STOP, reader
    ) as child:
        assert (await child.channel.receive())["method"] == "ready"
        return child.pid


async def test_the_shared_stderr_reader_logs_the_same_lines_as_a_task_per_child(
    child_lines: pytest.LogCaptureFixture,
) -> None:
    with trio.fail_after(TIMEOUT):
        own_pid = await run_writer(None)
        with StderrReader() as reader:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(reader.run)
                shared_pid = await run_writer(reader)
                nursery.cancel_scope.cancel()
    own, shared = untagged(child_lines, own_pid), untagged(child_lines, shared_pid)
    assert own == shared
    assert own[0] == "plain line"
    assert own[-1] == "last words without a newline"
    assert reader.children == 0


async def test_one_stderr_reader_serves_many_children_each_line_tagged_with_its_own_pid(
    child_lines: pytest.LogCaptureFixture,
) -> None:
    script = (
        "import sys; sys.stderr.write('hello from ' + sys.argv[1] + '\\n'); sys.stderr.flush(); "
        'sys.stdout.write(\'{"jsonrpc": "2.0", "method": "ready"}\\n\'); sys.stdout.flush(); '
        "sys.stdin.read()"
    )
    pids: dict[str, int] = {}

    async def one(name: str) -> None:
        spec = ChildSpec((sys.executable, "-c", script, name), name="writer")
        async with open_child(spec, PATIENT_STOP, reader) as child:
            pids[name] = child.pid
            # The line was in the pipe before "ready": read by now, or when the child is removed.
            assert (await child.channel.receive())["method"] == "ready"

    with trio.fail_after(TIMEOUT), StderrReader() as reader:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader.run)
            async with trio.open_nursery() as children:
                for name in ("a", "b", "c"):
                    children.start_soon(one, name)
            assert reader.children == 0
            nursery.cancel_scope.cancel()
    for name, pid in pids.items():
        assert untagged(child_lines, pid) == [f"hello from {name}"]


async def test_a_child_whose_stderr_the_daemons_reader_logs_opens_no_nursery_and_passes_errors_unchanged() -> (
    None
):
    # One nursery less for every connection; the block's own exception still comes out as itself.
    spec = ChildSpec((sys.executable, "-c", "import sys; sys.stdin.read()"), name="quiet")
    with trio.fail_after(TIMEOUT), StderrReader() as reader:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader.run)
            task = trio.lowlevel.current_task()
            nurseries = list(task.child_nurseries)
            with pytest.raises(KeyError, match="from the block"):
                async with open_child(spec, PATIENT_STOP, reader) as child:
                    assert task.child_nurseries == nurseries
                    assert child.returncode is None
                    raise KeyError("from the block")
            assert reader.children == 0
            nursery.cancel_scope.cancel()


async def test_a_child_stopped_after_the_readers_task_was_cancelled_is_still_read_to_its_end(
    child_lines: pytest.LogCaptureFixture,
) -> None:
    # A cancelled daemon: its reading task ends at once, while each connection still stops its
    # child (shielded) and removes the child's stderr from the set, which its owner keeps open.
    with trio.fail_after(TIMEOUT), StderrReader() as reader:
        with trio.CancelScope() as everything:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(reader.run)
                async with open_child(
                    ChildSpec((sys.executable, "-c", WRITER), name="writer"), PATIENT_STOP, reader
                ) as child:
                    assert (await child.channel.receive())["method"] == "ready"
                    everything.cancel()
                    await trio.sleep_forever()
        assert everything.cancelled_caught
        assert reader.children == 0
    assert untagged(child_lines, child.pid)[-1] == "last words without a newline"
    assert child.returncode == 0
