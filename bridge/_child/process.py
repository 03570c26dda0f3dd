"""The child: an MCP server launched as a process, its stdio as a channel, stopped in MCP order.

Launch (docs/design.md §5.7): argv is executed directly, never through a shell; the child gets its
own session and process group (so the whole group can be signalled); its environment is built
explicitly, from a short allowlist of inherited variables plus what the operator configured, so
nothing of the bridge's (socket-activation or notify variables, credentials) leaks into it, and no
client data ever reaches argv or the environment.

Stop, the MCP shutdown order, every step bounded and shielded from cancellation:

1. close the child's stdin;
2. wait ``stop_stdin_timeout`` for it to exit, still reading its stdout so that a child blocked on a
   full pipe can finish;
3. SIGTERM the process group, wait ``stop_term_timeout``;
4. SIGKILL the process group and reap the child (at once, skipping 2 and 3, once
   :meth:`ChildProcess.hurry` was called);
5. SIGKILL the group once more, so that grandchildren left behind by a leader that exited are not
   orphaned (a grandchild that started its own session escapes this; only a cgroup, such as
   systemd's ``KillMode=mixed``, reaches those).

A sandboxed child (:attr:`ChildSpec.sandbox`) is bwrap, its PID 1 and the server, all in this one
process group: the same steps reach the server, and SIGKILL takes its whole PID namespace down,
grandchildren in sessions of their own included (:mod:`bridge._child.sandbox` says how).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager

import attrs
import trio

from channels import PeerInfo, ProtocolError, StreamChannel, cancelled_when

from .._errors import ChildStartError, ConfigError
from .._limits import Limits
from .sandbox import Sandbox
from .stderr import RateLimiter, StderrReader, escape_for_log, log_stderr

logger = logging.getLogger("bridge.child")

# Children started at once: one per core, at most 4. trio starts each in a worker thread
# (subprocess.Popen: fork, exec, and the wait for exec to succeed), and its thread cache keeps every
# thread it made, idle, for 10 s: 50 clients connecting together left 24 threads, 0.6 MiB of stacks
# and malloc arenas. Popen took 12 ms (median) here, the kernel's work on a CPU: more starts at once
# than there are cores would start none sooner.
SPAWN_CONCURRENCY = min(os.cpu_count() or 1, 4)
_spawning: trio.lowlevel.RunVar[trio.CapacityLimiter] = trio.lowlevel.RunVar("bridge_spawning")


def _spawn_limiter() -> trio.CapacityLimiter:
    """This trio run's bound on children being started at once (one per run: a limiter belongs to it)."""
    try:
        return _spawning.get()
    except LookupError:
        limiter = trio.CapacityLimiter(SPAWN_CONCURRENCY)
        _spawning.set(limiter)
        return limiter


# Inherited from the bridge's environment: python-sdk's DEFAULT_INHERITED_ENV_VARS (HOME, LOGNAME,
# PATH, SHELL, TERM, USER) plus the locale and time zone, which interpreters need to decode text and
# print dates the way the host does. Everything else must be configured (--env, --pass-env).
INHERITED_ENV = (
    "HOME",
    "LOGNAME",
    "PATH",
    "SHELL",
    "TERM",
    "USER",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
)
# Never passed on, even if asked for: they describe the bridge's own systemd contract, and a child
# that adopted them would answer systemd in the bridge's name.
FORBIDDEN_ENV_PREFIXES = ("LISTEN_", "NOTIFY_SOCKET", "WATCHDOG_")
# Warnings about junk on a child's stdout, per second; the rest are counted in garbage_lines.
GARBAGE_LOGS_PER_SECOND = 5


def _strings(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(items)


@attrs.frozen
class ChildSpec:
    """What to launch. Fixed when the configuration is loaded; nothing in it comes from clients.

    Attributes:
        argv: the command and its arguments (``argv[0]`` is looked up in ``PATH``).
        name: the server's name in logs.
        env: variables set for the child.
        pass_env: further variable names inherited from the bridge's environment.
        cwd: the child's working directory (``None``: the bridge's).
        sandbox: run the child under bubblewrap with these settings (``None``: not sandboxed);
            see :mod:`bridge._child.sandbox`.

    Raises:
        ValueError: ``argv`` is empty.
    """

    argv: tuple[str, ...] = attrs.field(converter=_strings)
    name: str = "server"
    env: Mapping[str, str] = attrs.field(factory=dict)
    pass_env: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    cwd: str | None = None
    sandbox: Sandbox | None = None

    def __attrs_post_init__(self) -> None:
        if not self.argv:
            raise ValueError("ChildSpec.argv: expected the command and its arguments, got none")

    def environment(self, inherited: Mapping[str, str]) -> dict[str, str]:
        """The child's complete environment, built from ``inherited`` (normally ``os.environ``).

        That is the variables of :data:`INHERITED_ENV` and :attr:`pass_env` found in ``inherited``,
        then :attr:`env` over them; names starting with ``LISTEN_``, ``NOTIFY_SOCKET`` or
        ``WATCHDOG_`` are removed, even from :attr:`env`.
        """
        names = (*INHERITED_ENV, *self.pass_env)
        environment = {name: inherited[name] for name in names if name in inherited}
        environment.update(self.env)
        return {
            name: value for name, value in environment.items() if not name.startswith(FORBIDDEN_ENV_PREFIXES)
        }


def describe_exit(returncode: int) -> str:
    """``"exited with status 3"`` or ``"was killed by SIGKILL"``, for logs.

    Args:
        returncode: a ``returncode`` as ``subprocess`` reports it (negative: killed by that
            signal).
    """
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


@attrs.define(eq=False)
class ChildProcess:
    """A running child. Made by :func:`open_child`, which owns it and stops it on exit.

    Attributes:
        process: the ``trio.Process`` (its own session and process group).
        channel: the child's stdin/stdout as a message channel. Its receiving side is read by
            exactly one task at a time (the relay's); :meth:`stop` reads it only after that. It
            belongs to the child: :meth:`stop` closes it.
        spec: what was launched.
        limits: the limits it runs under (its stop timeouts, its message size).
    """

    process: trio.Process
    channel: StreamChannel
    spec: ChildSpec
    limits: Limits
    garbage_lines: int = attrs.field(init=False, default=0)
    """Lines of stdout dropped because they were not JSON-RPC messages."""
    _garbage_log: RateLimiter = attrs.field(init=False, factory=lambda: RateLimiter(GARBAGE_LOGS_PER_SECOND))
    _stopped: trio.Event = attrs.field(init=False, factory=trio.Event)
    _stopping: bool = attrs.field(init=False, default=False)
    _hurry: trio.Event = attrs.field(init=False, factory=trio.Event)

    @property
    def pid(self) -> int:
        """The process id (also the process group's id)."""
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        """The exit status once the process has been reaped, else ``None``."""
        return self.process.returncode

    async def wait(self) -> int:
        """Wait for the process to exit; return its status (negative: killed by that signal).

        Cancelling the wait does not affect the process.
        """
        return await self.process.wait()

    def note_garbage(self, error: ProtocolError) -> None:
        """Count (and log, rate-limited) a stdout line that was dropped.

        The spec forbids a server to write anything but MCP messages there, but killing it for that
        would turn a stray print into an outage.
        """
        self.garbage_lines += 1
        allowed, suppressed = self._garbage_log.admit(trio.current_time())
        if allowed:
            logger.warning(
                "[%s pid %d] dropped stdout line that is not a JSON-RPC message (%s): %s%s",
                self.spec.name,
                self.pid,
                error,
                escape_for_log(error.excerpt),
                f" ({suppressed} more dropped)" if suppressed else "",
            )

    def hurry(self) -> None:
        """Make :meth:`stop` skip its grace periods and SIGKILL the group at once.

        This is the second-signal path; a stop already waiting stops waiting. The child keeps
        running until its owner stops it, so its connection can still answer what is in flight.
        Does not block.
        """
        self._hurry.set()

    async def _wait_exit(self, timeout: float) -> None:
        """Wait up to ``timeout`` for the process to exit, or until :meth:`hurry` is called."""
        with trio.move_on_after(timeout):
            async with cancelled_when(self._hurry.wait):
                await self.process.wait()

    def _signal_group(self, signum: signal.Signals) -> None:
        try:
            os.killpg(self.process.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass  # the group is gone (PermissionError: a pid reused by someone else's process)

    async def stop(self) -> None:
        """Stop the child in MCP order (module docstring), reap it, and close :attr:`channel`.

        Idempotent: a second call waits for the first to finish (that wait can be cancelled; the
        stop goes on). Shielded and bounded: the sequence completes even if the enclosing scope is
        cancelled, within the two stop timeouts plus the reaping after SIGKILL, so a cancelled
        caller still leaves no orphan behind.
        """
        if self._stopping:
            await self._stopped.wait()
            return
        self._stopping = True
        with trio.CancelScope(shield=True):
            try:
                await self._stop_in_order()
            finally:
                self._stopped.set()

    async def _stop_in_order(self) -> None:
        process = self.process
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._discard_output)
            await trio.aclose_forcefully(process.stdin)  # type: ignore[arg-type]
            await self._wait_exit(self.limits.stop_stdin_timeout)
            if process.returncode is None and not self._hurry.is_set():
                logger.info(
                    "[%s pid %d] still running %.1fs after stdin closed; sending SIGTERM",
                    self.spec.name,
                    process.pid,
                    self.limits.stop_stdin_timeout,
                )
                self._signal_group(signal.SIGTERM)
                await self._wait_exit(self.limits.stop_term_timeout)
            if process.returncode is None:
                if self._hurry.is_set():
                    logger.info("[%s pid %d] stopping at once: sending SIGKILL", self.spec.name, process.pid)
                else:
                    logger.warning(
                        "[%s pid %d] ignored SIGTERM for %.1fs; sending SIGKILL",
                        self.spec.name,
                        process.pid,
                        self.limits.stop_term_timeout,
                    )
                self._signal_group(signal.SIGKILL)
                await process.wait()
            self._signal_group(signal.SIGKILL)  # grandchildren left in the group
            nursery.cancel_scope.cancel()
        await trio.aclose_forcefully(self.channel)
        logger.debug(
            "[%s pid %d] stopped: %s",
            self.spec.name,
            process.pid,
            describe_exit(process.returncode if process.returncode is not None else 0),
        )

    async def _discard_output(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            while await stdout.receive_some(65536):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass


@asynccontextmanager
async def open_child(
    spec: ChildSpec, limits: Limits, stderr_reader: StderrReader | None = None
) -> AsyncIterator[ChildProcess]:
    """Launch the child; on exit from the block, stop it in MCP order and reap it.

    Use as ``async with open_child(spec, limits) as child:``. ``open_child`` owns the child: the
    block borrows it and must not keep the :class:`ChildProcess` beyond the block. However the block
    ends, cancellation included, the child is stopped with :meth:`ChildProcess.stop` (shielded and
    bounded) before this returns. An exception from the block comes out unchanged, not wrapped in
    an ``ExceptionGroup``. The child's stderr is logged line by line (see :mod:`bridge._child.stderr`)
    for as long as the block runs, by a task of its own or by ``stderr_reader``.

    Args:
        spec: what to launch.
        limits: the child's message size limit and stop timeouts.
        stderr_reader: reads the stderr of many children in one task (the daemon's); it must run
            for as long as the block does. None: a task of this block's reads it.

    Raises:
        ChildStartError: the command could not be started (the message names it and why).
    """
    env = spec.environment(os.environ)
    argv = list(spec.argv)
    if spec.sandbox is not None:
        # The inherited TMPDIR names a directory of the host's; the sandbox has its own /tmp.
        if "TMPDIR" not in spec.env:
            env.pop("TMPDIR", None)
        try:
            from .bwrap import sandboxed  # loads only where a child is sandboxed

            argv = sandboxed(spec.sandbox, argv, spec.cwd, env)
        except ConfigError as exc:
            raise ChildStartError(f"cannot start {spec.argv[0]!r} sandboxed: {exc}") from None
    try:
        async with _spawn_limiter():
            process = await trio.lowlevel.open_process(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                env=env,
                cwd=spec.cwd,
            )
    except OSError as exc:
        raise ChildStartError(f"cannot start {spec.argv[0]!r}: {exc.strerror or exc}") from exc
    assert process.stdio is not None and process.stderr is not None
    channel = StreamChannel(
        process.stdio,
        max_message_bytes=limits.max_child_message,
        peer=PeerInfo("pipe", f"pid {process.pid}"),
    )
    child = ChildProcess(process, channel, spec, limits)
    assert isinstance(process.stderr, trio.lowlevel.FdStream)  # a pipe, on Linux
    stderr_fd = process.stderr.fileno()
    logger.debug("[%s pid %d] started: %s", spec.name, process.pid, " ".join(argv))
    del env, argv  # this frame lives as long as the child: it keeps nothing the block does not use
    body_error: BaseException | None = None
    try:
        if stderr_reader is not None:
            # The daemon's task logs stderr: this block starts none, and so needs no nursery
            # (one per connection).
            stderr_reader.add(stderr_fd, spec.name, process.pid)
            yield child
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(log_stderr, process.stderr, spec.name, process.pid)
            try:
                yield child
            except BaseException as exc:
                body_error = exc
                raise
            finally:
                await child.stop()
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # The nursery wraps what the caller's block raised; give the caller its own exception back,
        # so that `except SomeError` around `async with open_child(...)` works as it reads.
        if body_error is not None and group.exceptions == (body_error,):
            raise body_error from None
        raise
    finally:
        await child.stop()  # also when the nursery itself failed
        if stderr_reader is not None:
            stderr_reader.remove(stderr_fd)  # what it still holds is logged
        # stop() closed stdin and stdout; stderr is ours (its logger ended with the nursery).
        # Left to the garbage collector, one pipe per stopped child stays open for a while.
        await trio.aclose_forcefully(process.stderr)
