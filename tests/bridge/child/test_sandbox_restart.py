"""A sandboxed child that dies: restarted in a sandbox of its own (shared), given up on after a
crash loop, or ending its connection (per-connection); every request in flight answered, and
nothing of the dead sandbox left (docs/security.md, "Sandboxing children"; design §5.1, §6).

Each server is the bundled example server behind a launcher that first starts a grandchild in a
session of its own (``setsid``), holding the server's stdout, and makes SIGUSR1 end the server with
status 1, as a server that meets a fatal error exits. A marker in the launcher's argv, and so in
bwrap's, its PID 1's, the server's and the grandchild's command lines, finds what is left of a
sandbox even when its namespace was never seen.
"""

from __future__ import annotations

import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio
from sandboxing import (
    bwrap_or_skip,
    processes_with,
    sandbox_server,
    session_leaders_in,
    until_namespace_is_empty,
    wait_for_sandbox_namespace,
)

from bridge import ChildSpec, Limits, Sandbox
from bridge._child.process import ChildProcess
from bridge._child.supervisor import CrashLoop, RestartPolicy, Supervisor, SupervisorState

from conftest import (
    EXAMPLE_SERVER,
    LineClient,
    poll,
    process_exists,
    request,
    result_text,
    running_bridge,
)

TIMEOUT = 20  # seconds: a handful of sandboxed Python start-ups
# exit_drain_timeout: a sandboxed child's exit status is known once bubblewrap has torn its
# namespace down after the server died, which took over the default 0.5 s on a loaded machine (the
# in-flight errors then carried no returncode); the wait ends at the exit, so a longer one costs
# nothing when the machine is quiet.
QUICK = Limits(stop_stdin_timeout=0.5, stop_term_timeout=0.5, exit_drain_timeout=5.0)
FAST_RESTARTS = RestartPolicy(floor=0.01, cap=0.05, crash_limit=3, crash_window=10)
LAUNCHER = """\
import os, runpy, signal, subprocess, sys
marker, *flags = sys.argv[1:]
subprocess.Popen(["setsid", sys.executable, "-c", "import time; time.sleep(300)", marker])
signal.signal(signal.SIGUSR1, lambda *_: os._exit(1))
sys.argv = [{server!r}, *flags]
runpy.run_path({server!r}, run_name="__main__")
"""


@pytest.fixture(autouse=True)
def _bwrap() -> None:
    bwrap_or_skip()


@pytest.fixture
def marker() -> str:
    return f"mb-sandbox-restart-{uuid.uuid4().hex}"


def launcher(marker: str, *flags: str) -> tuple[str, ...]:
    return (sys.executable, "-c", LAUNCHER.format(server=str(EXAMPLE_SERVER)), marker, *flags)


def sleeping(request_id: int, seconds: float) -> dict[str, Any]:
    """A request that is in flight at the server once its progress notification arrives."""
    return request(
        request_id,
        "tools/call",
        {"name": "sleep", "arguments": {"seconds": seconds}, "_meta": {"progressToken": request_id}},
    )


def bwraps() -> list[int]:
    """This process's live children that are bwrap: the sandboxes of an in-process daemon."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text() if entry.isdigit() else ""
        except OSError:
            continue
        name, _, rest = stat.partition(" (")[2].rpartition(")")
        if name == "bwrap" and int(rest.split()[1]) == os.getpid() and process_exists(int(entry)):
            found.append(int(entry))
    return found


async def a_sandbox_with_its_grandchild() -> tuple[int, str, bytes]:
    """The one sandbox running, once its setsid grandchild is up: bwrap, namespace, bwrap's argv."""
    await poll(lambda: len(bwraps()) == 1)
    (box,) = bwraps()
    namespace = await wait_for_sandbox_namespace(box)  # bwrap makes it a moment after it starts
    await poll(lambda: bool(session_leaders_in(namespace)))
    return box, namespace, Path(f"/proc/{box}/cmdline").read_bytes()


async def until_nothing_of_it_is_left(box: int, namespace: str) -> None:
    await until_namespace_is_empty(namespace)  # PID 1, the server, the setsid grandchild
    await poll(lambda: not process_exists(box))  # bwrap itself, reaped


@pytest.mark.parametrize(
    ("how", "returncode"),
    [(signal.SIGKILL, 128 + signal.SIGKILL), (signal.SIGUSR1, 1)],
    ids=["server SIGKILLed", "server exits with status 1"],
)
async def test_a_crashed_sandboxed_shared_child_is_restarted_sandboxed_and_nothing_of_the_old_box_is_left(
    sock_dir: Path, marker: str, how: signal.Signals, returncode: int
) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            launcher(marker),
            [f"unix:{sock_dir}/s.sock"],
            child_mode="shared",
            restart_policy=FAST_RESTARTS,
            limits=QUICK,
            sandbox=Sandbox(),
        ) as daemon:
            a = await LineClient.open(daemon.addresses[0])
            b = await LineClient.open(daemon.addresses[0])
            old, namespace, argv = await a_sandbox_with_its_grandchild()
            await a.send(sleeping(1, 60))
            assert (await a.receive())["method"] == "notifications/progress"  # at the server
            await b.send(sleeping(1, 60))  # queued behind a's: the server answers one at a time
            await poll(lambda: daemon.statistics().requests_in_flight == 2)
            os.kill(sandbox_server(namespace), how)
            for client in (a, b):
                reply = await client.receive()
                assert reply["id"] == 1 and reply["error"]["code"] == -32000, reply
                assert reply["error"]["data"]["reason"] == "child-exited"
                assert reply["error"]["data"]["returncode"] == returncode
            await until_nothing_of_it_is_left(old, namespace)
            for client, text in ((a, "a again"), (b, "b again")):
                reply = await client.call(2, "echo", text=text)
                assert result_text(reply) == text, reply
            new, new_namespace, new_argv = await a_sandbox_with_its_grandchild()
            assert new != old and new_namespace != namespace
            assert new_argv == argv  # the same sandbox, made anew
            assert daemon.statistics().child_restarts == 1
    await until_nothing_of_it_is_left(new, new_namespace)
    assert processes_with(marker) == []


async def test_a_sandboxed_shared_child_crashing_at_start_up_ends_in_crash_loop_and_leaks_no_sandbox(
    marker: str,
) -> None:
    # argparse refuses the flag: the server exits with status 2 at once, its setsid grandchild up.
    spec = ChildSpec(argv=launcher(marker, "--no-such-flag"), name="boxed", sandbox=Sandbox())
    states: list[SupervisorState] = []
    supervisor = Supervisor(spec, QUICK, FAST_RESTARTS, on_state=lambda state, _: states.append(state))
    boxes: set[int] = set()

    async def serve(child: ChildProcess) -> None:
        boxes.add(child.pid)
        await child.wait()

    with trio.fail_after(TIMEOUT):
        with pytest.raises(CrashLoop, match=r"4 unexpected exits within 10s .* exited with status 2$"):
            await supervisor.run(serve)
        assert len(boxes) == 4  # one sandbox per start
        assert supervisor.statistics().state is SupervisorState.FAILED
        assert states[-1] is SupervisorState.FAILED
        await poll(lambda: processes_with(marker) == [])
    assert not any(process_exists(box) for box in boxes)


@pytest.mark.parametrize("victim", ["server", "bwrap"])
async def test_a_killed_per_connection_sandboxed_child_answers_its_request_and_leaves_nothing(
    sock_dir: Path, marker: str, victim: str
) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            launcher(marker), [f"unix:{sock_dir}/p.sock"], limits=QUICK, sandbox=Sandbox()
        ) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            await client.send(sleeping(7, 60))
            assert (await client.receive())["method"] == "notifications/progress"
            box, namespace, _ = await a_sandbox_with_its_grandchild()
            os.kill(sandbox_server(namespace) if victim == "server" else box, signal.SIGKILL)
            replies = await client.receive_until_eof()
            assert [(r["id"], r["error"]["data"]["reason"]) for r in replies] == [(7, "child-exited")]
            await until_nothing_of_it_is_left(box, namespace)
            assert processes_with(marker) == []
            await poll(lambda: daemon.statistics().children == 0)
