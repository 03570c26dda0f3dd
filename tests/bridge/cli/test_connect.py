"""``mcp-bridge connect ADDRESS``, run as a real process with its stdin and stdout as pipes, against a
bridge running in this process (``running_bridge``) or as a process (``bridge_process``).

connect is what a stdio-only MCP client launches in place of the server, so its stdout must carry
JSON-RPC lines and nothing else, its stdin EOF must half-close (replies in flight still arrive), and
its exit code says how the session ended: 0 done, 1 lost or closed by the bridge, 69 cannot connect,
78 bad address.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio
from commands import TIMEOUT, connect

from conftest import (
    REPO,
    bridge_argv,
    bridge_process,
    call,
    example_server,
    poll,
    request,
    result_text,
    running_bridge,
)

EXIT_OK, EXIT_LOST, EXIT_USAGE, EXIT_UNAVAILABLE, EXIT_CONFIG = 0, 1, 2, 69, 78


async def run_connect(*args: str) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        bridge_argv("connect", *args),
        stdin=b"",
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        cwd=REPO,
    )


# -- relaying ---------------------------------------------------------------------------------------


async def test_requests_on_stdin_get_replies_on_stdout_which_carries_only_json_rpc_lines(
    sock_dir: Path,
) -> None:
    address = f"unix:{sock_dir}/s.sock"
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server("--stderr-flood", "3"), [address]):
            async with connect(address, "--log-level", "debug") as client:
                await client.send(request(1, "ping"))
                assert await client.receive() == {"jsonrpc": "2.0", "id": 1, "result": {}}
                await client.send(call("two", "echo", text="é\nline ✓"))
                reply = await client.receive()
                assert reply["id"] == "two" and result_text(reply) == "é\nline ✓"
                await client.send(call(3, "add", a=2, b=40))
                assert result_text(await client.receive()) == "42"
                await client.close_stdin()
                assert await client.receive_until_eof() == []
                assert await client.exit_code() == EXIT_OK
    client.assert_stdout_is_only_jsonrpc()
    assert len(client.stdout_lines) == 3


async def test_notifications_from_the_server_reach_stdout_before_the_reply(sock_dir: Path) -> None:
    address = f"unix:{sock_dir}/s.sock"
    progress = request(
        1, "tools/call", {"name": "progress", "arguments": {"steps": 3}, "_meta": {"progressToken": "tok"}}
    )
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [address]):
            async with connect(address) as client:
                await client.send(progress)
                await client.close_stdin()
                messages = await client.receive_until_eof()
                assert await client.exit_code() == EXIT_OK
    assert [m.get("method") for m in messages] == ["notifications/progress"] * 3 + [None]
    assert [m["params"]["progress"] for m in messages[:3]] == [1, 2, 3]
    assert result_text(messages[3]) == "done"


async def test_pipelined_requests_all_get_their_replies_with_ids_unchanged(sock_dir: Path) -> None:
    address = f"unix:{sock_dir}/s.sock"
    ids: list[Any] = [1, "1", 0, -7, "x" * 100, 2**53]
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [address]):
            async with connect(address) as client:
                await client.send(*(call(i, "echo", text=str(n)) for n, i in enumerate(ids)))
                await client.close_stdin()
                replies = await client.receive_until_eof()
                assert await client.exit_code() == EXIT_OK
    assert [reply["id"] for reply in replies] == ids
    assert [type(reply["id"]) for reply in replies] == [type(i) for i in ids]


async def test_a_one_mib_reply_is_relayed_intact(sock_dir: Path) -> None:
    address = f"unix:{sock_dir}/s.sock"
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [address]):
            async with connect(address) as client:
                await client.send(call(1, "blob", size=1024 * 1024))
                reply = await client.receive()
                await client.close_stdin()
                assert await client.exit_code() == EXIT_OK
    assert result_text(reply) == "x" * (1024 * 1024)


async def test_connect_works_over_tcp() -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), ["tcp:127.0.0.1:0"]) as daemon:
            [address] = daemon.addresses
            assert address.startswith("tcp:127.0.0.1:") and not address.endswith(":0")
            async with connect(address) as client:
                assert result_text(await client.call_echo(1, "over tcp")) == "over tcp"
                await client.close_stdin()
                assert await client.receive_until_eof() == []
                assert await client.exit_code() == EXIT_OK


async def test_connect_works_over_http_with_a_legacy_session_and_a_modern_request() -> None:
    initialize = request(
        1,
        "initialize",
        {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    )
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    modern = request("m1", "tools/call", {"name": "echo", "arguments": {"text": "modern"}, "_meta": meta})
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), ["http://127.0.0.1:0/mcp"]) as daemon:
            [address] = daemon.addresses
            async with connect(address) as client:
                await client.send(initialize)
                assert (await client.receive())["result"]["serverInfo"]["name"] == "mcp-bridge-example"
                await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
                assert result_text(await client.call_echo("s1", "in a session")) == "in a session"
                await client.send(modern)
                reply = await client.receive()
                assert reply["id"] == "m1" and result_text(reply) == "modern"
                await client.close_stdin()
                assert await client.receive_until_eof() == []
                assert await client.exit_code() == EXIT_OK
            await poll(lambda: daemon.statistics().children == 0)  # the session was deleted


async def test_connect_over_http_initialises_again_when_the_session_is_gone() -> None:
    initialize = request(
        1,
        "initialize",
        {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    )
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server("--crash-after", "2"), ["http://127.0.0.1:0/mcp"]) as daemon:
            [address] = daemon.addresses
            async with connect(address) as client:
                await client.send(initialize)
                await client.receive()
                await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
                assert result_text(await client.call_echo(2, "before")) == "before"
                crashed = await client.call_echo(3, "the child exits on this one")
                assert crashed["error"]["data"]["reason"] == "child-exited"
                await poll(lambda: daemon.statistics().children == 0)  # the session is gone
                assert result_text(await client.call_echo(4, "after")) == "after"  # a new session
                await client.close_stdin()
                assert await client.exit_code() == EXIT_OK


async def test_connect_works_against_a_bridge_process(sock_dir: Path) -> None:
    address = f"unix:{sock_dir}/s.sock"
    with trio.fail_after(TIMEOUT):
        async with bridge_process("--listen", address, "--", *example_server()):
            async with connect(address) as client:
                assert result_text(await client.call_echo(1, "to a process")) == "to a process"
                await client.close_stdin()
                assert await client.exit_code() == EXIT_OK


# -- half-close and endings -------------------------------------------------------------------------


async def test_stdin_eof_half_closes_so_a_slow_reply_in_flight_still_arrives_then_exit_0(
    sock_dir: Path,
) -> None:
    address = f"unix:{sock_dir}/s.sock"
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [address]):
            async with connect(address) as client:
                await client.send(request(1, "ping"))
                assert (await client.receive())["id"] == 1  # connected and serving
                await client.send(call(2, "sleep", seconds=0.5))
                await client.close_stdin()
                replies = await client.receive_until_eof()
                assert await client.exit_code() == EXIT_OK
    assert len(replies) == 1
    assert replies[0]["id"] == 2 and result_text(replies[0]) == "slept"
    assert "closed by the bridge" not in client.stderr_text()


async def test_when_the_child_crashes_the_request_gets_a_32000_error_and_connect_exits_1(
    sock_dir: Path,
) -> None:
    address = f"unix:{sock_dir}/s.sock"
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server("--crash-after", "1"), [address]):
            async with connect(address) as client:
                assert result_text(await client.call_echo(1, "first")) == "first"
                await client.send(call(2, "echo", text="second"))
                reply = await client.receive()
                assert await client.receive_until_eof() == []
                assert await client.exit_code() == EXIT_LOST
    assert reply["id"] == 2
    assert reply["error"]["code"] == -32000
    assert reply["error"]["data"]["reason"] == "child-exited"
    assert "closed by the bridge" in client.stderr_text()
    client.assert_stdout_is_only_jsonrpc()


async def test_when_the_bridge_stops_connect_exits_1_with_a_message(sock_dir: Path) -> None:
    address = f"unix:{sock_dir}/s.sock"
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [address]) as daemon:
            async with connect(address) as client:
                await client.send(request(1, "ping"))
                assert (await client.receive())["id"] == 1
                daemon.stop()
                assert await client.receive_until_eof() == []
                assert await client.exit_code() == EXIT_LOST
    assert "closed by the bridge" in client.stderr_text()


async def test_when_the_bridge_process_is_killed_connect_exits_1_with_a_message(sock_dir: Path) -> None:
    address = f"unix:{sock_dir}/s.sock"
    with trio.fail_after(TIMEOUT):
        async with bridge_process("--listen", address, "--", *example_server()) as bridge:
            async with connect(address) as client:
                await client.send(request(1, "ping"))
                assert (await client.receive())["id"] == 1
                bridge.process.send_signal(signal.SIGKILL)
                assert await client.receive_until_eof() == []
                assert await client.exit_code() == EXIT_LOST
    stderr = client.stderr_text()
    assert "closed by the bridge" in stderr or "lost" in stderr, stderr
    assert "Traceback" not in stderr


# -- local errors ---------------------------------------------------------------------------------


async def test_garbage_on_stdin_is_answered_locally_with_32700_and_the_connection_goes_on(
    sock_dir: Path,
) -> None:
    address = f"unix:{sock_dir}/s.sock"
    # More bad lines in a row than the bridge tolerates before disconnecting (MAX_CONSECUTIVE_ERRORS
    # is 10): they never reach it, or the connection would be closed.
    garbage = [b"this is not json", b'{"jsonrpc": "2.0", "id": 1', b"\xff\xfe", b"NaN", b"{]"] * 3
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [address]) as daemon:
            async with connect(address) as client:
                await client.send_raw(b"".join(line + b"\n" for line in garbage))
                errors = [await client.receive() for _ in garbage]
                assert result_text(await client.call_echo(7, "still connected")) == "still connected"
                assert daemon.statistics().connections == 1
                await client.close_stdin()
                assert await client.exit_code() == EXIT_OK
    assert all(e["id"] is None and e["error"]["code"] == -32700 for e in errors), errors
    client.assert_stdout_is_only_jsonrpc()


async def test_an_invalid_json_rpc_message_on_stdin_is_answered_locally_with_32600(sock_dir: Path) -> None:
    address = f"unix:{sock_dir}/s.sock"
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [address]):
            async with connect(address) as client:
                await client.send_raw(
                    b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]\n'
                    b'{"jsonrpc": "1.0", "id": 5, "method": "ping"}\n'
                )
                errors = [await client.receive(), await client.receive()]
                assert result_text(await client.call_echo(6, "ok")) == "ok"
                await client.close_stdin()
                assert await client.exit_code() == EXIT_OK
    assert [e["error"]["code"] for e in errors] == [-32600, -32600]


async def test_an_over_long_message_on_stdin_is_answered_locally_by_id_and_the_connection_goes_on(
    sock_dir: Path,
) -> None:
    address = f"unix:{sock_dir}/s.sock"
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [address]):
            async with connect(address, "--max-message", "1KiB") as client:
                await client.send(call(1, "echo", text="y" * 3000))
                error = await client.receive()
                assert result_text(await client.call_echo(2, "short")) == "short"
                await client.close_stdin()
                assert await client.exit_code() == EXIT_OK
    assert error["id"] == 1
    assert error["error"]["code"] == -32600
    assert error["error"]["data"]["reason"] == "message-too-large"


async def test_a_reply_larger_than_max_message_is_answered_with_an_error_for_its_request(
    sock_dir: Path,
) -> None:
    address = f"unix:{sock_dir}/s.sock"
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [address]):
            async with connect(address, "--max-message", "64KiB") as client:
                await client.send(call(1, "blob", size=100_000), request(2, "ping"))
                first = await client.receive()  # id 2 arrives first if id 1 was dropped: no hang
                await client.close_stdin()
                await client.receive_until_eof()
                await client.exit_code()
    assert first["id"] == 1
    assert "error" in first


async def test_connect_reads_requests_from_a_regular_file_and_writes_replies_to_one(sock_dir: Path) -> None:
    address = f"unix:{sock_dir}/s.sock"
    requests, replies = sock_dir / "in.jsonl", sock_dir / "out.jsonl"
    requests.write_text(
        json.dumps(call(1, "echo", text="from a file"))
        + "\n"
        + json.dumps(call(2, "sleep", seconds=0.2))
        + "\n"
    )
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [address]):
            with requests.open("rb") as stdin, replies.open("wb") as stdout:
                result = await trio.run_process(
                    bridge_argv("connect", address),
                    stdin=stdin,
                    stdout=stdout,
                    capture_stderr=True,
                    check=False,
                    cwd=REPO,
                )
    assert result.returncode == EXIT_OK, result.stderr.decode()
    messages = [json.loads(line) for line in replies.read_text().splitlines()]
    assert [m["id"] for m in messages] == [1, 2]
    assert [result_text(m) for m in messages] == ["from a file", "slept"]


# -- cannot connect, bad address ----------------------------------------------------------------


async def test_a_socket_path_with_nobody_listening_exits_69_with_a_message(sock_dir: Path) -> None:
    missing = sock_dir / "nobody.sock"
    with trio.fail_after(TIMEOUT):
        result = await run_connect(f"unix:{missing}")
    stderr = result.stderr.decode()
    assert result.returncode == EXIT_UNAVAILABLE, stderr
    assert result.stdout == b""
    assert "cannot connect" in stderr and str(missing) in stderr
    assert "Traceback" not in stderr


async def test_a_stale_socket_file_nobody_listens_on_exits_69(sock_dir: Path) -> None:
    stale = sock_dir / "stale.sock"
    with socket.socket(socket.AF_UNIX) as bound:
        bound.bind(str(stale))  # bound, never listening: connect() is refused
        with trio.fail_after(TIMEOUT):
            result = await run_connect(f"unix:{stale}")
    assert result.returncode == EXIT_UNAVAILABLE, result.stderr.decode()
    assert "cannot connect" in result.stderr.decode()
    assert result.stdout == b""


async def test_a_tcp_port_with_nobody_listening_exits_69() -> None:
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))  # reserved but not listening: connections are refused
        port = bound.getsockname()[1]
        with trio.fail_after(TIMEOUT):
            result = await run_connect(f"tcp:127.0.0.1:{port}")
    assert result.returncode == EXIT_UNAVAILABLE, result.stderr.decode()
    assert f"127.0.0.1:{port}" in result.stderr.decode()
    assert result.stdout == b""


@pytest.mark.parametrize(
    ("address", "fragment"),
    [
        ("carrier-pigeon:/x", "unknown address kind"),
        ("/tmp/no-scheme.sock", "unknown address kind"),
        ("tcp:localhost", "expected tcp:HOST:PORT"),
        ("tcp:127.0.0.1:notaport", "expected tcp:HOST:PORT"),
        ("unix:", "expected unix:PATH"),
        ("tcp:127.0.0.1:\u00b2", "expected tcp:HOST:PORT"),
    ],
)
async def test_a_malformed_address_exits_78_with_a_message(address: str, fragment: str) -> None:
    with trio.fail_after(TIMEOUT):
        result = await run_connect(address)
    stderr = result.stderr.decode()
    assert result.returncode == EXIT_CONFIG, stderr
    assert fragment in stderr
    assert result.stdout == b""
    assert "Traceback" not in stderr


async def test_connect_without_an_address_is_a_usage_error_exiting_2() -> None:
    with trio.fail_after(TIMEOUT):
        result = await run_connect()
    assert result.returncode == EXIT_USAGE
    assert "ADDRESS" in result.stderr.decode()
    assert result.stdout == b""
