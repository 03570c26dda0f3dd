"""A child that writes the same reply twice: only the first reaches the client, in every mode.

Real child processes (a small ``python -c`` server that writes each reply twice in one write, so
both lines arrive in one read) and real Unix sockets; the dropped ones are counted in the metrics,
read from a real bridge process's admin endpoint.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest
import trio
from commands import admin_port, get, http

from conftest import LineClient, bridge_process, poll, request, running_bridge

TIMEOUT = 20

# Answers every request twice, both lines in one write (one pipe write under PIPE_BUF is atomic,
# so the bridge reads them together); answers nothing else.
DUPLICATING_CHILD = r"""
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "method" in message and "id" in message:
        reply = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"n": 1}}) + "\n"
        sys.stdout.write(reply + reply)
        sys.stdout.flush()
"""


def echo(request_id: Any) -> dict[str, Any]:
    return request(request_id, "tools/call", {"name": "echo", "arguments": {}})


@pytest.mark.parametrize("child_mode", ["per-connection", "shared"])
async def test_a_reply_the_child_writes_twice_in_one_read_reaches_the_client_once_and_is_logged(
    sock_dir, caplog: pytest.LogCaptureFixture, child_mode: str
) -> None:
    caplog.set_level(logging.WARNING, logger="bridge.relay")
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            (sys.executable, "-c", DUPLICATING_CHILD),
            [f"unix:{sock_dir}/d.sock"],
            child_mode=child_mode,
        ) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            for request_id in (1, 2, "3"):
                await client.send(echo(request_id))
                reply = await client.receive()
                assert reply["id"] == request_id and reply["result"] == {"n": 1}
            # Pipelined: both requests' duplicates arrive together with the originals.
            await client.send(echo(4), echo(5))
            assert [(await client.receive())["id"] for _ in range(2)] == [4, 5]
            await client.send_eof()
            assert await client.receive_until_eof() == []
            await poll(lambda: daemon.statistics().connections == 0)
            assert daemon.statistics().stray_replies == 5
    warnings = [r.getMessage() for r in caplog.records if "no request in flight" in r.getMessage()]
    assert warnings and all(
        r.levelno == logging.WARNING for r in caplog.records if r.getMessage() in warnings
    )
    assert any("id 1" in text or "id '3'" in text for text in warnings)


@pytest.mark.parametrize("child_mode", ["per-connection", "shared"])
async def test_replies_the_child_writes_twice_are_counted_in_the_stray_replies_metric(
    sock_dir, child_mode: str
) -> None:
    async def metric(name: str) -> str:
        _, _, metrics = await http(port, get("/metrics"))
        sample = f'mcp_bridge_{name}{{server="demo"}} '
        (line,) = (line for line in metrics.splitlines() if line.startswith(sample))
        return line.removeprefix(sample)

    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--admin",
            "tcp:127.0.0.1:0",
            "--name",
            "demo",
            "--child",
            child_mode,
            "--listen",
            f"unix:{sock_dir}/d.sock",
            "--",
            sys.executable,
            "-c",
            DUPLICATING_CHILD,
        ) as bridge:
            await poll(lambda: any("admin endpoint on" in line for line in bridge.stderr_lines))
            port = admin_port(bridge.stderr_lines)
            assert await metric("stray_replies_total") == "0"
            client = await LineClient.open(bridge.addresses[0])
            await client.send(echo(1), echo(2))
            assert [(await client.receive())["id"] for _ in range(2)] == [1, 2]
            counted_live = await metric("stray_replies_total")  # while the connection lasts
            await client.send_eof()
            assert await client.receive_until_eof() == []
            await client.aclose()
            while await metric("connections") != "0":  # polled: the bridge ends it on its own time
                await trio.sleep(0.01)
            counted_after = await metric("stray_replies_total")  # kept once the connection has ended
    assert (counted_live, counted_after) == ("2", "2")
