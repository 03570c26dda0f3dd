"""What ``mcp-bridge`` imports for a command line: ``--version`` loads neither trio nor the daemon.

Each check runs in a fresh interpreter (this one has long imported everything) and reads its
``sys.modules``, as tests/channels/oauth/test_oauth_imports.py does for the OAuth packages.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from conftest import example_server, python_output

TIMEOUT = 30  # seconds: one interpreter start-up, on a loaded CI machine

# What a command line that asks only for the version must not load: the event loop, the transports
# and the bridge's rooms below the command line.
HEAVY = (
    "trio",
    "channels",
    "bridge._child",
    "bridge._relay",
    "bridge._shared",
    "bridge._daemon",
    "bridge._ops",
)

# Prints which of HEAVY the interpreter has loaded (a module or any of its submodules), as a JSON list.
LOADED = f"print(json.dumps(sorted(h for h in {HEAVY!r} if any(m == h or m.startswith(h + '.') for m in sys.modules))))"

# `python -m bridge ARGS`, as runpy runs it, then the modules it loaded.
PYTHON_M_BRIDGE = """
import json, runpy, sys
sys.argv = ["mcp-bridge", *ARGS]
try:
    runpy.run_module("bridge", run_name="__main__", alter_sys=True)
except SystemExit as exit:
    assert exit.code in (None, 0), exit.code
"""

# The console script's entry point, called as the `mcp-bridge` script calls it.
CONSOLE_SCRIPT = """
import json, sys
from bridge._cli.main import main
assert main(ARGS) == 0
"""


async def loaded_after(script: str, args: list[str]) -> tuple[str, list[str]]:
    """Run ``script`` with ``ARGS`` in a fresh interpreter: what it printed first, and the list it printed last.

    That is LOADED's list of HEAVY modules, unless the script exits before LOADED runs.
    """
    source = f"import json, sys\nARGS = {args!r}\n{script}\n{LOADED}"
    with trio.fail_after(TIMEOUT):
        output = await python_output(source)
    *printed, loaded = output.splitlines()
    return "\n".join(printed), json.loads(loaded)


@pytest.mark.parametrize("args", [["--version"], ["serve", "--version"], ["connect", "--version"]])
@pytest.mark.parametrize(
    "script", [PYTHON_M_BRIDGE, CONSOLE_SCRIPT], ids=["python -m bridge", "console script"]
)
async def test_mcp_bridge_version_prints_the_version_without_importing_trio_or_the_daemon(
    script: str, args: list[str]
) -> None:
    printed, loaded = await loaded_after(script, args)
    assert printed.startswith("mcp-bridge ")
    assert loaded == []


async def test_mcp_bridge_version_prints_what_the_parsers_version_action_prints() -> None:
    fast, _ = await loaded_after(CONSOLE_SCRIPT, ["--version"])
    slow, loaded = await loaded_after(
        "from bridge._cli.serve_parser import serve_parser\n"
        "try:\n    serve_parser().parse_args(['--version'])\nexcept SystemExit as exit:\n    assert exit.code == 0\n",
        [],
    )
    assert "trio" in loaded  # the parser's own path, with everything imported
    assert fast == slow


async def test_importing_bridge_imports_no_room_until_a_public_name_is_used() -> None:
    _, loaded = await loaded_after("import bridge", [])
    assert loaded == []
    _, loaded = await loaded_after("from bridge import Limits", [])
    assert "bridge._daemon" not in loaded


# A bridge run by its console script's entry point in this interpreter, until one client has had its
# initialize answered over SOCKET; then what REPORT evaluates to (by default, which of WATCHED are
# loaded), and a SIGTERM. Readiness is systemd's READY=1 on a datagram socket of our own (bridge/_ops/systemd.py).
TRANSPORT_LIBRARIES = ("websockets", "h11", "httptools", "cattrs", "channels._ws", "channels._http")
SERVING = """
import json, os, signal, socket, sys, threading
from bridge._cli.main import main
notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
notify.bind(NOTIFY)
os.environ["NOTIFY_SOCKET"] = NOTIFY
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}

def client():
    while b"READY=1" not in notify.recv(4096).split(b"\\n"):
        pass
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(SOCKET)
        sock.sendall(json.dumps(INITIALIZE).encode() + b"\\n")
        assert b'"result"' in sock.makefile("rb").readline()
    print(json.dumps(eval(REPORT)), flush=True)
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=client, daemon=True).start()
sys.exit(main(ARGS))
"""


# What SERVING reports by default: which of WATCHED are loaded (modules or their submodules).
MODULES_LOADED = 'sorted(h for h in WATCHED if any(m == h or m.startswith(h + ".") for m in sys.modules))'


async def serving_loaded(
    sock_dir: Path, watched: tuple[str, ...], *flags: str, report: str = MODULES_LOADED
) -> list[str]:
    """Which of ``watched`` a bridge on a Unix socket with ``flags`` has loaded once it served a
    client (or the list the expression ``report`` gives then, in the bridge's process)."""
    run = len(list(sock_dir.iterdir()))  # each run its own names: the notify socket stays behind
    socket_path, notify = sock_dir / f"b{run}.sock", sock_dir / f"notify{run}"
    args = ["--listen", f"unix:{socket_path}", *flags, "--", *example_server()]
    prefix = f"NOTIFY = {str(notify)!r}\nSOCKET = {str(socket_path)!r}\nWATCHED = {watched!r}\nREPORT = {report!r}\n"
    _, loaded = await loaded_after(
        prefix + SERVING, args
    )  # its last line: SERVING's list, as LOADED's would be
    return loaded


async def test_a_bridge_serving_only_unix_sockets_never_imports_websockets_h11_httptools_or_cattrs(
    sock_dir: Path,
) -> None:
    assert await serving_loaded(sock_dir, TRANSPORT_LIBRARIES) == []


async def test_a_bridge_with_one_child_per_connection_never_imports_the_shared_childs_modules(
    sock_dir: Path,
) -> None:
    assert await serving_loaded(sock_dir, ("bridge._shared",), "--child", "per-connection") == []
    # The default (auto) probes the server's era first, with bridge._shared's probe.
    assert await serving_loaded(sock_dir, ("bridge._shared",)) == ["bridge._shared"]


# Modules a bridge serving Unix sockets with one child per connection has no use for: the client
# command, the mount table with its HTTP request guard (only WebSocket and HTTP hosts mount
# servers), the warm pool (--prespawn), the tap (--tap), the sandbox's bwrap machinery
# (--sandbox), the shared child's supervisor and the other socket kinds. Each costs memory for the daemon's life.
UNUSED_WHEN_SERVING_UNIX = (
    "bridge._cli.connect",
    "bridge._cli.connect_parser",
    "channels._core.mounts",
    "channels._core.guard",
    "bridge._child.pool",
    "bridge._relay.tap",
    "bridge._child.bwrap",
    "bridge._child.supervisor",
    # The other byte-stream kinds: TCP, TLS, stdio, systemd's fd: and URL-shaped endpoints.
    "channels._sockets.tcp",
    "channels._sockets.tls",
    "channels._sockets.stdio",
    "channels._sockets.activation",
    "channels._sockets.endpoint",
    # OAuth's settings and principals: only WebSocket and HTTP listeners take tokens of it.
    "channels._core.oauth",
    # TLS contexts and the TLS listener's stream.
    "channels._core.tlscontext",
    "channels._core.tlsstream",
    # Bearer tokens: none are given here.
    "channels._core.auth",
    # The auto mode's peek at a client's first messages, and HTTP's 2026-07-28 exchanges.
    "bridge._relay.peeked",
    "channels._core.virtual",
)


async def test_a_bridge_serving_unix_sockets_imports_no_module_only_other_commands_hosts_or_flags_need(
    sock_dir: Path,
) -> None:
    assert await serving_loaded(sock_dir, UNUSED_WHEN_SERVING_UNIX, "--child", "per-connection") == []


# Whether OpenSSL's libcrypto is mapped into the bridge's process (bridge/_cli/lazy_imports.py).
OPENSSL_MAPPED = '"libcrypto" in open("/proc/self/maps").read()'


async def test_a_bridge_serving_unix_tcp_or_plain_http_never_loads_openssl(sock_dir: Path) -> None:
    assert await serving_loaded(sock_dir, (), "--child", "per-connection", report=OPENSSL_MAPPED) is False
    others = ("--listen", "tcp:127.0.0.1:0", "--listen", "http://127.0.0.1:0/mcp")
    assert await serving_loaded(sock_dir, (), *others, report=OPENSSL_MAPPED) is False


async def test_a_serving_bridge_keeps_no_source_text_of_attrs_generated_methods(sock_dir: Path) -> None:
    report = '[name for name in __import__("linecache").cache if name.startswith("<attrs generated")]'
    assert await serving_loaded(sock_dir, (), "--child", "per-connection", report=report) == []


# What importlib.metadata's code imports to read a distribution's metadata: 1.25 MiB of a daemon's
# memory. The command line registers importlib.metadata itself to run on first use (lazy_imports).
METADATA_READERS = ("importlib.metadata._adapters", "email", "zipfile", "csv")


async def test_a_bridge_that_probed_its_childs_era_has_loaded_no_importlib_metadata(sock_dir: Path) -> None:
    # The probe names the bridge's version in its clientInfo: bridge/_version.py has it.
    assert await serving_loaded(sock_dir, (*METADATA_READERS, "bridge._shared.eras")) == [
        "bridge._shared.eras"
    ]
