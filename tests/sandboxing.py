"""Looking into bubblewrap sandboxes from the host: their PID namespaces, the processes in them.

Shared by the sandbox tests (tests/bridge/child, tests/e2e, tests/deploy). Import as
``from sandboxing import ...`` (tests/ is on ``sys.path``, as for ``conftest``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio


def bwrap_or_skip() -> None:
    """Skip a sandbox test where bwrap is missing or cannot sandbox; fail it if CI is set.

    .ci/run installs bubblewrap, so in CI a sandbox test that did not run is a failure.
    """
    from bridge._child.bwrap import check_sandbox
    from bridge._child.sandbox import Sandbox
    from bridge._errors import ConfigError

    try:
        check_sandbox(Sandbox())
        check_sandbox(Sandbox(network=True))
    except ConfigError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"{exc} (CI is set: .ci/run installs bubblewrap)")
        pytest.skip(str(exc))


def pid_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None  # gone, or a zombie


def processes_in(namespace: str) -> list[int]:
    return [
        int(entry)
        for entry in os.listdir("/proc")
        if entry.isdigit() and pid_namespace(int(entry)) == namespace
    ]


def sandbox_namespace(root: int) -> str:
    """The PID namespace of the sandbox under process ``root`` (bwrap, or the bridge above it)."""
    namespace = _find_sandbox_namespace(root)
    if namespace is None:
        raise AssertionError(f"no sandbox under pid {root}")
    return namespace


async def wait_for_sandbox_namespace(root: int) -> str:
    """:func:`sandbox_namespace`, once there is one: bwrap makes it a moment after it starts, so a
    daemon that started its child may not have a sandbox yet (callers bound it with fail_after)."""
    while (namespace := _find_sandbox_namespace(root)) is None:
        await trio.sleep(0.01)
    return namespace


def _find_sandbox_namespace(root: int) -> str | None:
    ours = pid_namespace(os.getpid())
    queue = [root]
    while queue:
        parent = queue.pop()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == parent:
                namespace = pid_namespace(int(entry))
                if namespace is not None and namespace != ours:
                    return namespace
                queue.append(int(entry))
    return None


async def until_namespace_is_empty(namespace: str) -> None:
    """Wait (bounded by the caller's fail_after) until no process of ``namespace`` is left.

    bwrap exits as soon as the sandbox's PID 1 reports its child's status; PID 1 itself is gone a
    moment later, and the kernel kills the rest of the namespace with it.
    """
    while processes_in(namespace):
        await trio.sleep(0.01)


def processes_with(marker: str) -> list[int]:
    """Processes whose command line holds ``marker``, this one excepted (a zombie's has none).

    A sandbox's bwrap, its PID 1 and everything in it carry a marker put in the sandboxed
    command's argv, even once the namespace they ran in is gone: what is left of a sandbox whose
    namespace was never seen (one that crashed at start-up) is still found.
    """
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found


def sandbox_server(namespace: str) -> int:
    """The host pid of the server in a sandbox: PID 2 of its namespace (PID 1 is bwrap's reaper)."""
    for pid in processes_in(namespace):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        nspids = next(line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:"))
        if nspids[-1] == "2":
            return pid
    raise AssertionError(f"no server in {namespace}")


def session_leaders_in(namespace: str) -> list[int]:
    """Processes of ``namespace`` that started a session of their own (setsid)."""
    leaders = []
    for pid in processes_in(namespace):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[3]) == pid:  # the session id, as this (the host's) namespace numbers it
            leaders.append(pid)
    return leaders
