"""Stops that come early or twice: during the era probe, and while a child is being stopped.

Real children and real Unix sockets. Each child is a shell that writes its pid to a file (whole:
written aside, then renamed) at the point the test needs to reach, so the test waits for that file,
never for a while. The waits the old code made (the probe timeout, a stop timeout, the exit drain)
are set far past the test's deadline, so a stop that waited for one of them fails the test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from bridge import ChildSpec, ChildStartError, Daemon, Limits, ServeConfig

from conftest import (
    deaf_child_pid,
    example_server,
    process_exists,
    running_bridge,
    shell_child,
    wait_until_gone,
)

TIMEOUT = 20
NEVER = 600.0  # seconds: a probe timeout no passing test may wait for
# Stop timeouts past the deadline too, yet short: a child stop is shielded, so a stop that waited
# for them would fail the test only when it ends (about a minute), not in ten.
PAST_DEADLINE = TIMEOUT + 10.0
STOP_TIMEOUTS_PAST_DEADLINE = Limits(stop_stdin_timeout=PAST_DEADLINE, stop_term_timeout=PAST_DEADLINE)


def auto_daemon(sock_dir: Path, argv: tuple[str, ...], limits: Limits | None = None) -> Daemon:
    """A daemon in auto mode whose era probe waits for ever (NEVER) for the child's answer."""
    return Daemon(
        ServeConfig(
            listen=[f"unix:{sock_dir}/s.sock"],
            child=ChildSpec(argv=argv, name="silent"),
            child_mode="auto",
            probe_timeout=NEVER,
            limits=limits or Limits(),
        )
    )


async def test_a_stop_during_the_era_probe_ends_the_daemon_without_waiting_for_the_probe_timeout(
    sock_dir: Path,
) -> None:
    # The child never answers server/discover, and exits at its stdin's EOF (the MCP stop's step 1);
    # its stdout stays open until then (held by the inner shell, not given to cat).
    daemon = auto_daemon(sock_dir, shell_child(sock_dir / "pid", "sh -c 'cat > /dev/null'"))
    reported: list[list[str]] = []

    async def start() -> None:
        reported.append(await nursery.start(daemon.run))

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(start)
            probed = await deaf_child_pid(sock_dir / "pid")
            daemon.stop()
            await daemon.wait_stopped()
        assert not process_exists(probed)
    assert reported == [[f"unix:{sock_dir}/s.sock"]]  # nursery.start still returns, with the addresses
    assert daemon.mode == "auto"  # the probe never answered: no mode was chosen


async def test_a_second_stop_during_the_era_probe_kills_a_child_that_ignores_stdin_eof_at_once(
    sock_dir: Path,
) -> None:
    daemon = auto_daemon(sock_dir, shell_child(sock_dir / "pid", "sleep 600"), STOP_TIMEOUTS_PAST_DEADLINE)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(daemon.run)
            probed = await deaf_child_pid(sock_dir / "pid")
            daemon.stop()
            daemon.stop_now()
            await daemon.wait_stopped()
        await wait_until_gone(probed)


async def test_a_second_stop_reaches_a_shared_child_whose_stop_in_mcp_order_has_begun(sock_dir: Path) -> None:
    # The pid file appears once the child has read its stdin's EOF: its stop has begun, and it then
    # ignores the end of its input.
    argv = shell_child(sock_dir / "pid", "sleep 600", before="cat > /dev/null")
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            argv, [f"unix:{sock_dir}/s.sock"], child_mode="shared", limits=STOP_TIMEOUTS_PAST_DEADLINE
        ) as daemon:
            daemon.stop()
            stopping = await deaf_child_pid(sock_dir / "pid")
            daemon.stop_now()
            await daemon.wait_stopped()
        assert not process_exists(stopping)


async def test_a_graceful_stop_of_a_shared_child_does_not_wait_for_output_after_its_exit(
    sock_dir: Path,
) -> None:
    # The exit drain reads a child's last output after it exits by itself; a child stopped on
    # request has no output left for anyone (every client has gone), so the stop does not wait.
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(),
            [f"unix:{sock_dir}/s.sock"],
            child_mode="shared",
            limits=Limits(exit_drain_timeout=PAST_DEADLINE),
        ) as daemon:
            assert daemon._shared is not None and daemon._shared.child is not None
            pid = daemon._shared.child.pid
        assert not process_exists(pid)


async def test_an_eager_start_that_fails_raises_the_child_start_error_in_the_daemons_own_group_alone(
    sock_dir: Path,
) -> None:
    # Watching for a stop during the start adds a nursery; its wrapping is taken off again, so
    # callers see what they saw before: the services nursery's group around the error.
    daemon = auto_daemon(sock_dir, ("/nonexistent/mcp-server",))
    with trio.fail_after(TIMEOUT), pytest.RaisesGroup(ChildStartError):
        await daemon.run()
