"""A sandboxed child, for real: what it can write, reach and see, and how every stop takes its
whole PID namespace down (docs/security.md, "Sandboxing children"; design §5.5).

A probe script run under bwrap reports what it could do as one JSON-RPC notification on stdout.
The namespace a child ran in is found through /proc (the pid namespace inode of bwrap's children)
and, after each stop, no process of it may be left.
"""

from __future__ import annotations

import logging
import shutil
import socket
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from sandboxing import bwrap_or_skip, processes_in, sandbox_namespace, until_namespace_is_empty

from bridge import ChildSpec, Limits, Sandbox, open_child

TIMEOUT = 10
QUICK = Limits(stop_stdin_timeout=0.5, stop_term_timeout=0.5)


@pytest.fixture(autouse=True)
def _bwrap() -> None:
    bwrap_or_skip()


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory the sandbox shows read-only (not under /tmp, /home, /root or /run)."""
    path = Path(tempfile.mkdtemp(prefix="mb-sandbox-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def probe(body: str) -> tuple[str, ...]:
    """argv of a Python script that runs ``body`` (which fills ``report``) and prints it."""
    script = "import json, os, socket, sys\nreport = {}\n" + textwrap.dedent(body)
    script += '\nprint(json.dumps({"jsonrpc": "2.0", "method": "report", "params": report}), flush=True)\n'
    script += "sys.stdin.read()\n"  # then behave as a server: exit on stdin EOF
    return (sys.executable, "-c", script)


async def report_of(spec: ChildSpec) -> dict[str, Any]:
    with trio.fail_after(TIMEOUT):
        async with open_child(spec, QUICK) as child:
            message = await child.channel.receive()
    return message["params"]  # type: ignore[no-any-return]


def sandbox_spec(argv: tuple[str, ...], **settings: Any) -> ChildSpec:
    return ChildSpec(argv=argv, name="boxed", sandbox=Sandbox(**settings))


async def test_a_sandboxed_child_cannot_write_outside_its_allowed_paths_and_can_inside_them(
    outside: Path,
) -> None:
    allowed = outside / "allowed"
    allowed.mkdir()
    body = f"""
    for name, path in (("outside", {str(outside / "x")!r}), ("usr", "/usr/mb-sandbox-test"),
                       ("allowed", {str(allowed / "written")!r})):
        try:
            with open(path, "w") as file:
                file.write("hello")
            report[name] = "written"
        except OSError as exc:
            report[name] = exc.strerror
    """
    report = await report_of(sandbox_spec(probe(body), read_write=(str(allowed),)))
    assert report == {
        "outside": "Read-only file system",
        "usr": "Read-only file system",
        "allowed": "written",
    }
    assert (allowed / "written").read_text() == "hello"
    assert not (outside / "x").exists()


async def test_a_sandboxed_child_cannot_reach_the_network_unless_allowed() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        body = f"""
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
            report["connect"] = "connected"
        except OSError as exc:
            report["connect"] = exc.strerror or str(exc)
        """
        closed = await report_of(sandbox_spec(probe(body)))
        allowed = await report_of(sandbox_spec(probe(body), network=True))
    assert closed == {"connect": "Connection refused"}  # its own loopback, where nobody listens
    assert allowed == {"connect": "connected"}


async def test_a_sandboxed_child_sees_a_private_tmp_and_no_home_run_or_bridge_secrets(outside: Path) -> None:
    secret = outside / "tokens"
    secret.write_text("s3cret\n")
    with tempfile.NamedTemporaryFile(prefix="mb-host-", dir="/tmp") as host_file:
        body = f"""
        report["tmp"] = sorted(os.listdir("/tmp"))
        open("/tmp/inside", "w").write("x")
        report["run"] = sorted(os.listdir("/run"))
        report["root"] = sorted(os.listdir("/root"))
        try:
            report["secret"] = open({str(secret)!r}).read()
        except OSError as exc:
            report["secret"] = exc.strerror
        report["pid"] = os.getpid()
        """
        report = await report_of(sandbox_spec(probe(body), hide=(str(secret),)))
        assert Path(host_file.name).exists()
    assert report["tmp"] == []  # the host's /tmp (and host_file in it) is not there
    assert not Path("/tmp/inside").exists()
    assert report["run"] == []
    assert all(name == ".pyenv" for name in report["root"])  # only the Python install, if there
    assert report["secret"] == "Permission denied"  # a device node on a nodev mount, not the file
    assert report["pid"] == 2  # PID 1 is bwrap's reaper, in a namespace of its own


@pytest.mark.parametrize(
    ("how", "server", "expected"),
    [
        ("stdin close", "sys.stdin.read()", 0),
        (
            "SIGTERM",
            "import signal, time\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n"
            "while True: time.sleep(0.05)",
            7,  # the server's own handler ran: SIGTERM reached it, and it could clean up
        ),
        (
            "SIGKILL",
            "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: time.sleep(0.05)",
            -9,
        ),
        ("SIGTERM, default action", "import time\nwhile True: time.sleep(0.05)", 128 + 15),
    ],
)
async def test_a_sandboxed_child_and_its_whole_pid_namespace_are_gone_after_every_stop(
    how: str, server: str, expected: int
) -> None:
    grandchild = "import subprocess, sys\nsubprocess.Popen(['setsid', 'sleep', '300'])\n"  # its own session
    argv = (
        sys.executable,
        "-c",
        grandchild + 'print(\'{"jsonrpc": "2.0", "method": "up"}\', flush=True)\n' + server,
    )
    with trio.fail_after(TIMEOUT):
        async with open_child(sandbox_spec(argv), QUICK) as child:
            assert (await child.channel.receive())["method"] == "up"  # the grandchild was started
            namespace = sandbox_namespace(child.pid)
            assert len(processes_in(namespace)) >= 3  # PID 1, the server, the grandchild
        assert child.returncode == expected, how
        await until_namespace_is_empty(namespace)


async def test_a_sandboxed_childs_stderr_is_logged_under_its_name(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "bridge.child")
    argv = (sys.executable, "-c", "import sys; sys.stderr.write('hello from the box\\n'); sys.stdin.read()")
    with trio.fail_after(TIMEOUT):
        async with open_child(sandbox_spec(argv), QUICK):
            while "hello from the box" not in caplog.text:
                await trio.sleep(0.01)
    assert any(
        "[boxed" in record.getMessage() and "hello from the box" in record.getMessage()
        for record in caplog.records
    )


async def test_a_missing_bwrap_at_launch_is_a_start_error_never_an_unsandboxed_start() -> None:
    from bridge import ChildStartError

    spec = ChildSpec(argv=(sys.executable, "-c", "pass"), sandbox=Sandbox(bwrap="/nonexistent/bwrap"))
    with trio.fail_after(TIMEOUT), pytest.raises(ChildStartError, match="bubblewrap"):
        async with open_child(spec, QUICK):
            pass
