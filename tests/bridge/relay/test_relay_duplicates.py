"""A child that writes the same reply twice: only the first reaches the client, in every mode.

Real child processes (a small ``python -c`` server that writes each reply twice in one write, so
both lines arrive in one read) and real Unix sockets.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest
import trio

from bridge._relay.strays import StrayReplies

from conftest import LineClient, request, running_bridge

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
    before = StrayReplies.total
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
    assert StrayReplies.total - before == 5
    warnings = [r.getMessage() for r in caplog.records if "no request in flight" in r.getMessage()]
    assert warnings and all(
        r.levelno == logging.WARNING for r in caplog.records if r.getMessage() in warnings
    )
    assert any("id 1" in text or "id '3'" in text for text in warnings)
