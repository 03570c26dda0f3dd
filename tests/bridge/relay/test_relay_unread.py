"""Requests a client had sent when its child died are all answered, even those the relay never read.

Real child processes and real Unix sockets: the child reads nothing, so the client's pipelined
requests fill its stdin pipe, then the relay's hands, then the socket; the child is then killed
with SIGKILL and every request must get exactly one reply.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import trio

from conftest import LineClient, deaf_child, deaf_child_pid, request, running_bridge

TIMEOUT = 20

# Requests of about 1 KiB, 300 of them: 300 KiB is more than the child's stdin pipe (64 KiB) and
# what the relay reads ahead (a batch in hand and one 64 KiB read) can take, so that some are
# still in the socket when the child dies, and less than the socket's buffers (about 200 KiB on
# Linux) can hold besides, so that the client's write completes.
REQUESTS = 200
PADDING = "x" * 900


def padded(request_id: int) -> dict[str, Any]:
    return request(request_id, "tools/call", {"name": "echo", "arguments": {"text": PADDING}})


async def test_every_request_sent_before_a_per_connection_child_is_killed_gets_exactly_one_reply(
    sock_dir: Path,
) -> None:
    pid_file = sock_dir / "child.pid"
    with trio.fail_after(TIMEOUT):
        async with running_bridge(deaf_child(pid_file), [f"unix:{sock_dir}/u.sock"]) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            pid = await deaf_child_pid(pid_file)
            payload = b"".join(json.dumps(padded(n)).encode() + b"\n" for n in range(REQUESTS))
            await client.send_raw(payload)  # completes: what the child does not take, buffers hold
            os.kill(pid, signal.SIGKILL)
            replies = await client.receive_until_eof()
    counts = Counter(reply["id"] for reply in replies)
    assert sorted(counts) == list(range(REQUESTS)), f"{REQUESTS - len(counts)} requests unanswered"
    assert set(counts.values()) == {1}
    for reply in replies:
        assert reply["error"]["code"] == -32000
        assert reply["error"]["data"]["reason"] == "child-exited"
