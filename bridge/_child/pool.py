"""A warm pool for per-connection mode: children started before their connection arrives.

Starting an MCP server is most of a session's setup cost (a Python server: about 30 ms; node via
npx: seconds). With ``--prespawn N`` the daemon keeps N children started; a new connection takes one
at once, and the pool starts a replacement behind it.

Each of the N slots is a loop that starts a *keeper* task per child. The keeper holds the child's
``open_child`` block (which also logs its stderr) and offers the child; once a connection takes it
(a :class:`Lease`), the keeper tells its slot, which starts the next child at once, and the
connection owns this one: it relays, then stops it in MCP order exactly as it stops a child it
started itself (``ChildProcess.stop`` is idempotent), and releases the lease, which ends the keeper.
A child that exits while it waits to be taken is logged and replaced after ``RESPAWN_DELAY``.
"""

from __future__ import annotations

import logging

import attrs
import trio

from channels import cancelled_when

from .._errors import ChildStartError
from .._limits import Limits
from .process import ChildProcess, ChildSpec, describe_exit, open_child

logger = logging.getLogger("bridge.pool")

# Wait before replacing a pooled child that exited unused or failed to start: a command that fails
# at once must not become a busy loop (daemontools waits 1 s between starts, too).
RESPAWN_DELAY = 1.0
# After a child is taken, its replacement starts this much later: starting a process blocks the
# event loop for a few milliseconds (fork and exec run in the loop's thread), which would otherwise
# land on the new session's first exchange (benchmark, spaced setup p50: 6.7 ms without, 2.6 with).
REFILL_DELAY = 0.05


@attrs.define(eq=False)
class Lease:
    """A pooled child handed to a connection, which must call :meth:`release` when done."""

    child: ChildProcess
    _released: trio.Event = attrs.field(factory=trio.Event)

    def release(self) -> None:
        self._released.set()


@attrs.define(eq=False)
class ChildPool:
    """Keeps ``size`` children started and waiting for a connection.

    Args:
        spec: the child to start.
        limits: its limits (stop timeouts, message size).
        size: how many to keep ready.
    """

    spec: ChildSpec
    limits: Limits
    size: int
    _offers: trio.MemorySendChannel[Lease] = attrs.field(init=False)
    _takes: trio.MemoryReceiveChannel[Lease] = attrs.field(init=False)
    _waiting: set[ChildProcess] = attrs.field(init=False, factory=set)
    _idle_scopes: set[trio.CancelScope] = attrs.field(init=False, factory=set)
    _closed: bool = attrs.field(init=False, default=False)
    started: int = attrs.field(init=False, default=0)
    """Children the pool has started since it began."""

    def __attrs_post_init__(self) -> None:
        # Unbuffered: a lease exists only while its slot is blocked offering it, so a take never
        # returns a child whose slot has moved on.
        self._offers, self._takes = trio.open_memory_channel(0)

    @property
    def ready(self) -> list[ChildProcess]:
        """The children started and waiting to be taken."""
        return list(self._waiting)

    def take(self) -> Lease | None:
        """A ready child, or ``None`` if none is ready (the caller starts one itself)."""
        try:
            return self._takes.receive_nowait()
        except trio.WouldBlock:
            return None

    def close(self) -> None:
        """Stop offering children.

        Waiting children are stopped in MCP order; taken ones are left to their connections.
        :meth:`run` returns once every slot is done.
        """
        self._closed = True
        for scope in self._idle_scopes:
            scope.cancel()

    def hurry(self) -> None:
        """The second-signal path: waiting children are stopped with SIGKILL at once."""
        for child in self._waiting:
            child.hurry()
        self.close()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run until :meth:`close` and every leased child is released.

        Ready at once (for ``nursery.start``): children start in the background.
        """
        async with trio.open_nursery() as keepers:
            for _ in range(self.size):
                keepers.start_soon(self._slot, keepers)
            task_status.started()

    async def _slot(self, keepers: trio.Nursery) -> None:
        while not self._closed:
            idle = trio.CancelScope()  # cancelled by close() while no connection has the child
            self._idle_scopes.add(idle)
            try:
                with idle:
                    try:
                        taken = await keepers.start(self._keep)
                    except ChildStartError as exc:
                        logger.error("cannot prespawn a child: %s; retrying in %gs", exc, RESPAWN_DELAY)
                        taken = False
                    await trio.sleep(REFILL_DELAY if taken else RESPAWN_DELAY)
            finally:
                self._idle_scopes.discard(idle)

    async def _keep(self, *, task_status: trio.TaskStatus[bool]) -> None:
        """Start a child and offer it.

        Reports True once a connection took it (the keeper then lives on, outside the slot's idle
        scope, until the lease is released), False if it exited unused; cancelled (by close) while
        offering, it stops the child.
        """
        async with open_child(self.spec, self.limits) as child:
            self.started += 1
            lease = Lease(child)
            self._waiting.add(child)
            taken = False
            try:
                async with cancelled_when(child.wait):  # it exited unused
                    await self._offers.send(lease)
                    taken = True
            finally:
                self._waiting.discard(child)
            if not taken:  # it exited (a cancelled offer raises instead)
                assert child.returncode is not None
                logger.warning(
                    "[%s pid %d] prespawned child %s before use; replacing it in %gs",
                    self.spec.name,
                    child.pid,
                    describe_exit(child.returncode),
                    RESPAWN_DELAY,
                )
                task_status.started(False)
                return
            task_status.started(True)
            with trio.CancelScope(shield=True):  # the connection owns it now: wait, never stop it
                await lease._released.wait()
