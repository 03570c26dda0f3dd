"""Shared test helpers: real child processes, real sockets, an independent line client.

Rules every test follows (trio-websocket's, adopted): loopback and port 0 only; Unix sockets in a
short private directory; every I/O test under ``trio.fail_after``; no sleeping to synchronise (wait
for a log line, a reply or an exit instead); every process started is killed and reaped.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from bridge import ChildSpec, Daemon, Limits, ServeConfig
from bridge._daemon.config import IDLE_STOP, PROBE_TIMEOUT
from channels import ConnectOptions, ListenOptions, MessageChannel, MessageListener, parse_address

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_SERVER = REPO / "bridge" / "example_server"  # a package; its directory runs as a script


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Keep the reason of a skip raised inside a trio test.

    pytest-trio (0.8) turns a ``pytest.skip(reason)`` that left a nursery, wrapped in an
    exception group, into a bare ``pytest.skip()``: the summary then says only "Skipped". The
    original skip is the context of the bare one; its reason and place go back on the report.
    """
    report = yield
    if report.skipped and call.excinfo is not None and isinstance(report.longrepr, tuple):
        original = _only_skip(call.excinfo.value.__context__)
        if original is not None and original.__traceback__ is not None:
            frames = traceback.extract_tb(original.__traceback__)
            frame = next((f for f in reversed(frames) if "_pytest" not in f.filename), frames[-1])
            report.longrepr = (frame.filename, frame.lineno or 0, f"Skipped: {original.msg}")
    return report


class _TracebackRecorder(logging.Handler):
    """Keeps every record of the bridge's or the channels' loggers that carries a traceback."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.name.partition(".")[0] in ("bridge", "channels"):
            self.records.append(record)


# Where each traceback a bridge process logged begins (see note_tracebacks): its log lines, and the
# index of the message before the traceback (while a test runs).
_PROCESS_TRACEBACKS: list[tuple[list[str], int]] = []
# How a traceback of the bridge's own starts a line of its log; a child's stderr comes tagged.
_TRACEBACK = "Traceback (most recent call last):"


def note_tracebacks(log: str) -> None:
    """Record each traceback in the log (stderr) of a bridge process: the test then fails."""
    lines = log.splitlines()
    for index, line in enumerate(lines):
        if line.startswith(_TRACEBACK):
            _PROCESS_TRACEBACKS.append((lines, max(index - 1, 0)))


@pytest.fixture(autouse=True)
def _no_traceback_in_the_log(request: pytest.FixtureRequest) -> Iterator[None]:
    """A bridge logs no traceback: a fault or bad input gets a clear error, a client going away is
    normal (docs/design.md, §5). A test whose bridge (in this process, or one bridge_process
    started) logged one fails, unless it is marked ``logs_tracebacks`` with the reason."""
    recorder = _TracebackRecorder()
    root = logging.getLogger()
    root.addHandler(recorder)
    _PROCESS_TRACEBACKS.clear()
    try:
        yield
    finally:
        root.removeHandler(recorder)
    if request.node.get_closest_marker("logs_tracebacks") is not None:
        return
    if recorder.records:
        first = recorder.records[0]
        pytest.fail(
            f"{len(recorder.records)} log record(s) with a traceback, the first from {first.name}: "
            f"{first.getMessage()}\n{logging.Formatter().formatException(first.exc_info)}"  # type: ignore[arg-type]
        )
    if _PROCESS_TRACEBACKS:
        lines, start = _PROCESS_TRACEBACKS[0]
        pytest.fail("a bridge process logged a traceback:\n" + "\n".join(lines[start : start + 40]))


def _only_skip(exc: BaseException | None) -> pytest.skip.Exception | None:
    """The one skip inside an exception group (or None if it holds anything else)."""
    leaves: list[BaseException] = []
    queue = [exc] if exc is not None else []
    while queue:
        current = queue.pop()
        if isinstance(current, BaseExceptionGroup):
            queue.extend(current.exceptions)
        else:
            leaves.append(current)
    if len(leaves) == 1 and isinstance(leaves[0], pytest.skip.Exception):
        return leaves[0]
    return None


def example_server(*flags: str) -> tuple[str, ...]:
    """argv of the bundled example server with fault switches (see its docstring)."""
    return (sys.executable, str(EXAMPLE_SERVER), *flags)


def servers_file(
    path: Path,
    directory: Path,
    names: list[str],
    *,
    child: str = "per-connection",
    max_connections: int | None = None,
) -> None:
    """Write a configuration file of ``names``, each serving the example server on ``DIRECTORY/NAME.sock``."""

    def server(name: str) -> str:
        text = f'[servers.{name}]\ncommand = {json.dumps(example_server())}\nchild = "{child}"\n'
        if max_connections is not None:
            text += f"[servers.{name}.limits]\nmax_connections = {max_connections}\n"
        return text + f'[[servers.{name}.listeners]]\nkind = "unix"\npath = "{directory}/{name}.sock"\n'

    path.write_text("".join(map(server, names)))


# A child that writes its pid to the file it is given (whole: written aside, then renamed) and then
# reads nothing: requests pile up in front of it, until the test kills it.
_DEAF_CHILD = r"""
import os, sys, time
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(600)
"""


def deaf_child(pid_file: Path) -> tuple[str, ...]:
    """argv of a child that reads nothing; :func:`deaf_child_pid` tells its pid once it runs."""
    return (sys.executable, "-c", _DEAF_CHILD, str(pid_file))


def shell_child(pid_file: Path, after: str, *, before: str = "true") -> tuple[str, ...]:
    """argv of a shell child that runs ``before``, writes its pid (whole, as :func:`deaf_child`
    does) and then execs ``after``, keeping that pid; :func:`deaf_child_pid` tells it."""
    script = f'{before}; echo $$ > "$1.tmp" && mv "$1.tmp" "$1" && exec {after}'
    return ("sh", "-c", script, "sh", str(pid_file))


async def deaf_child_pid(pid_file: Path) -> int:
    """The pid of :func:`deaf_child`'s child, once it has written it (callers bound it with fail_after)."""
    await poll(pid_file.exists)
    return int(pid_file.read_text())


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    """A short private directory for Unix sockets (pytest's tmp_path can exceed sun_path)."""
    path = Path(tempfile.mkdtemp(prefix="mb-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# -- messages ---------------------------------------------------------------------------------


def request(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def call(request_id: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    """A tools/call request for the example server."""
    return request(request_id, "tools/call", {"name": tool, "arguments": arguments})


def result_text(reply: dict[str, Any]) -> str:
    return reply["result"]["content"][0]["text"]


LEGACY_VERSION = "2025-06-18"  # a legacy version whose clients do not resume (no priming events)
# A 2026-07-28 request's ``_meta``: the era's version and the client's (empty) capabilities.
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def initialize(request_id: Any = 1, version: str = LEGACY_VERSION) -> dict[str, Any]:
    """A legacy client's ``initialize`` request."""
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}
    return request(request_id, "initialize", params)


def http_port(address: str) -> int:
    """The port of a bound HTTP or WebSocket address (``http://127.0.0.1:PORT/mcp``)."""
    return int(address.rsplit(":", 1)[1].split("/")[0])


# -- an independent client ----------------------------------------------------------------------


@attrs.define(eq=False)
class LineClient:
    """A client with its own framing (``json.loads`` per line), independent of ``channels``."""

    stream: trio.abc.HalfCloseableStream
    _buffer: bytearray = attrs.field(factory=bytearray)

    @classmethod
    async def open(cls, address: str) -> LineClient:
        if address.startswith("unix:"):
            return cls(await trio.open_unix_socket(address.removeprefix("unix:")))
        host, _, port = address.removeprefix("tcp:").rpartition(":")
        return cls(await trio.open_tcp_stream(host.strip("[]"), int(port)))

    async def send(self, *messages: dict[str, Any]) -> None:
        await self.stream.send_all(b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def send_eof(self) -> None:
        await self.stream.send_eof()

    async def receive(self) -> dict[str, Any]:
        """The next message; raises EOFError when the bridge closed the connection."""
        while b"\n" not in self._buffer:
            try:
                data = await self.stream.receive_some(1 << 20)
            except trio.BrokenResourceError as exc:  # a reset counts as the end here
                raise EOFError("connection reset") from exc
            if not data:
                raise EOFError("connection closed")
            self._buffer += data
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        return json.loads(line)  # type: ignore[no-any-return]

    async def receive_until_eof(self) -> list[dict[str, Any]]:
        messages = []
        while True:
            try:
                messages.append(await self.receive())
            except EOFError:
                return messages

    async def call(self, request_id: Any, tool: str, **arguments: Any) -> dict[str, Any]:
        await self.send(call(request_id, tool, **arguments))
        return await self.receive()

    async def aclose(self) -> None:
        await self.stream.aclose()


# -- TLS material, made at test time (never a private key in the repository) --------------------


@attrs.frozen
class TlsFiles:
    """PEM files from one trustme CA: a server certificate for 127.0.0.1, ::1 and localhost, a
    client certificate for ``CN=alice``, and a second CA that signed nothing we trust."""

    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str
    other_ca: str
    other_client_cert: str
    other_client_key: str

    def listen_options(self, **more: Any) -> ListenOptions:
        return ListenOptions(tls_cert=self.server_cert, tls_key=self.server_key, **more)

    def connect_options(self, **more: Any) -> ConnectOptions:
        return ConnectOptions(tls_ca=self.ca, **more)


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    import trustme

    directory = tmp_path_factory.mktemp("tls")
    ca, other = trustme.CA(), trustme.CA()
    server = ca.issue_cert("127.0.0.1", "::1", "localhost")
    client = ca.issue_cert("alice@example.org", common_name="alice")
    stranger = other.issue_cert("mallory@example.org", common_name="mallory")

    def write(name: str, blob: Any) -> str:
        path = directory / name
        blob.write_to_path(str(path))
        path.chmod(0o600)
        return str(path)

    return TlsFiles(
        ca=write("ca.pem", ca.cert_pem),
        server_cert=write("server.pem", server.cert_chain_pems[0]),
        server_key=write("server.key", server.private_key_pem),
        client_cert=write("client.pem", client.cert_chain_pems[0]),
        client_key=write("client.key", client.private_key_pem),
        other_ca=write("other-ca.pem", other.cert_pem),
        other_client_cert=write("mallory.pem", stranger.cert_chain_pems[0]),
        other_client_key=write("mallory.key", stranger.private_key_pem),
    )


# -- channels over real listeners ----------------------------------------------------------------


@asynccontextmanager
async def channel_pair(
    listener: MessageListener, options: ConnectOptions | None = None, address: str | None = None
) -> AsyncIterator[tuple[MessageChannel, MessageChannel]]:
    """Connect to ``listener`` (at ``address``, by default its own) while it accepts and
    establishes; yield ``(client, server)``, both closed on exit.

    A failed handshake on either side raises out of the block (the server side's
    ``HandshakeError``, the client side's ``ConnectError``).
    """
    send, receive = trio.open_memory_channel[MessageChannel](1)
    done = trio.Event()

    async def serve() -> None:
        incoming = await listener.accept()
        async with incoming:
            async with incoming.establish() as channel:
                await send.send(channel)
                await done.wait()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        try:
            async with parse_address(address or listener.address).connect(
                options or ConnectOptions()
            ) as client:
                server = await receive.receive()
                yield client, server
        finally:
            done.set()


@asynccontextmanager
async def pair_maker(
    address: str,
    listen_options: ListenOptions | None = None,
    connect_options: ConnectOptions | None = None,
) -> AsyncIterator[Callable[[int], Any]]:
    """A conformance-suite pair maker over a real listener at ``address``: each call connects a
    new ``(client, server)`` pair with that ``max_message_bytes`` on both sides; every pair and
    listener is closed when the block ends."""
    async with trio.open_nursery() as nursery:
        done = trio.Event()

        async def keep_pair(
            max_message_bytes: int, task_status: trio.TaskStatus[tuple[MessageChannel, MessageChannel]]
        ) -> None:
            options = attrs.evolve(listen_options or ListenOptions(), max_message_bytes=max_message_bytes)
            listeners = await parse_address(address).listen(options)
            try:
                connect = attrs.evolve(
                    connect_options or ConnectOptions(), max_message_bytes=max_message_bytes
                )
                async with channel_pair(listeners[0], connect) as pair:
                    for listener in listeners:
                        await listener.aclose()
                    task_status.started(pair)
                    await done.wait()
            finally:
                for listener in listeners:
                    await trio.aclose_forcefully(listener)

        async def make_pair(max_message_bytes: int) -> tuple[MessageChannel, MessageChannel]:
            return await nursery.start(keep_pair, max_message_bytes)

        try:
            yield make_pair
        finally:
            done.set()


# -- the bridge in this process -----------------------------------------------------------------

# Seconds running_bridge's daemon may take to start (bind; with start="eager", start its child and
# probe its era): the longest of the tests' own deadlines (TIMEOUT, 20 or 30 s), far above a start
# (well under a second; a probe gives up after probe_timeout, 20 s at the longest in these tests).
BRIDGE_START_TIMEOUT = 30


@asynccontextmanager
async def running_bridge(
    child_argv: tuple[str, ...],
    listen: list[str],
    *,
    limits: Limits | None = None,
    listen_options: ListenOptions | None = None,
    prespawn: int = 0,
    child_mode: str = "per-connection",
    restart_policy: Any = None,
    start: str = "eager",
    idle_stop: float = IDLE_STOP,
    probe_timeout: float = PROBE_TIMEOUT,
    **child: Any,
) -> AsyncIterator[Daemon]:
    """Run a :class:`Daemon` in this process; stop it gracefully on exit.

    ``daemon.addresses`` holds the bound addresses (real TCP ports) inside the block. Its start is
    bounded here (BRIDGE_START_TIMEOUT), for the tests that jump a MockClock and so cannot hold the
    whole block under ``fail_after``.
    """
    config = ServeConfig(
        listen=tuple(parse_address(text) for text in listen),
        child=ChildSpec(argv=child_argv, **child),
        limits=limits or Limits(),
        listen_options=listen_options or ListenOptions(),
        prespawn=prespawn,
        child_mode=child_mode,
        start=start,
        idle_stop=idle_stop,
        probe_timeout=probe_timeout,
        **({"restart_policy": restart_policy} if restart_policy is not None else {}),
    )
    daemon = Daemon(config)
    async with trio.open_nursery() as nursery:
        with trio.fail_after(BRIDGE_START_TIMEOUT):
            await nursery.start(daemon.run)
        try:
            yield daemon
        finally:
            daemon.stop()


# -- the bridge as a separate process -----------------------------------------------------------

_LISTENING = re.compile(r"listening on (\S+)")


@attrs.define(eq=False)
class BridgeProcess:
    process: trio.Process
    addresses: list[str]
    stderr_lines: list[str]

    def log(self) -> str:
        return "\n".join(self.stderr_lines)


def bridge_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "bridge", *args]


@asynccontextmanager
async def bridge_process(
    *args: str,
    listeners: int = 1,
    max_open_files: int | None = None,
    soft_open_files: int | None = None,
    command: list[str] | None = None,
    cwd: Path = REPO,
) -> AsyncIterator[BridgeProcess]:
    """Start ``python -m bridge ARGS`` and wait until ``listeners`` addresses are bound.

    Its stderr is collected in ``stderr_lines`` while the block runs. On exit the process gets
    SIGTERM if still running, SIGKILL after 10 s, and is always reaped. ``max_open_files`` lowers
    its file descriptor limit (``RLIMIT_NOFILE``, soft and hard), ``soft_open_files`` the soft one
    alone; ``command`` runs another ``mcp-bridge`` (an
    installed one) in place of ``python -m bridge``, in ``cwd``.
    """
    argv = [*command, *args] if command is not None else bridge_argv(*args)
    if max_open_files is not None:  # prlimit(1) would do too; the shell's ulimit is everywhere
        argv = ["sh", "-c", f'ulimit -n {max_open_files} && exec "$@"', "sh", *argv]
    if soft_open_files is not None:
        argv = ["sh", "-c", f'ulimit -Sn {soft_open_files} && exec "$@"', "sh", *argv]
    process = await trio.lowlevel.open_process(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=cwd,
        start_new_session=True,
    )
    lines: list[str] = []
    addresses: list[str] = []
    ready = trio.Event()

    async def collect() -> None:
        buffer = b""
        assert process.stderr is not None
        async for chunk in process.stderr:
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            for raw in complete:
                line = raw.decode(errors="replace")
                lines.append(line)
                if match := _LISTENING.search(line):
                    addresses.append(match.group(1))
                    if len(addresses) >= listeners:
                        ready.set()
        ready.set()  # exited before binding: let the caller see why

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(collect)
            await ready.wait()
            if len(addresses) < listeners:
                await process.wait()
                raise AssertionError("bridge exited before listening:\n" + "\n".join(lines))
            yield BridgeProcess(process, addresses, lines)
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                with trio.move_on_after(10):
                    await process.wait()
            if process.returncode is None:
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
        note_tracebacks("\n".join(lines))


# -- processes ----------------------------------------------------------------------------------


async def python_output(script: str) -> str:
    """What ``python -c script`` prints, run by a fresh interpreter from the repository's root
    (so that what it imports at start-up is measured); callers bound it with fail_after.

    A script that fails fails the test, with its stderr.
    """
    result = await trio.run_process(
        [sys.executable, "-c", script], cwd=REPO, capture_stdout=True, capture_stderr=True, check=False
    )
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode()


async def python_json_lines(script: str) -> list[Any]:
    """Each line ``python -c script`` prints (:func:`python_output`), decoded as JSON: how the
    checks of a fresh interpreter report what it loaded. Callers bound it with fail_after."""
    return [json.loads(line) for line in (await python_output(script)).splitlines()]


def resident_bytes(pid: int) -> int:
    """A process's resident set size (``VmRSS`` in ``/proc/PID/status``)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def process_exists(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


async def poll(condition: Callable[[], bool]) -> None:
    """Wait until ``condition()`` holds (callers bound it with fail_after); for states that have
    no event to wait on, such as a counter kept by another task."""
    while not condition():
        await trio.sleep(0.01)


async def reap(process: trio.Process) -> None:
    """Wait for ``process`` (shielded: this runs on the way out) and close our ends of its pipes."""
    with trio.CancelScope(shield=True):
        await process.wait()
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                await trio.aclose_forcefully(pipe)


async def wait_until_gone(pid: int) -> None:
    """Wait (polling /proc, there is no event for another process's death) until ``pid`` is gone.

    Callers bound it with fail_after. This polls a condition, it does not sleep to synchronise.
    """
    while process_exists(pid):
        await trio.sleep(0.01)
