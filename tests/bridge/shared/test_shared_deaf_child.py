"""Shared mode: requests that time out while the shared child reads nothing are answered, once each.

Real child process (a small ``python -c`` server that reads one line and then nothing more) and a
real Unix socket. A second client fills the child's stdin pipe, so that every write to the child
blocks, as it does with a deaf or wedged server. The request timeout is passed with trio's
MockClock (flowing at the real rate, jumped once the pipe is full), so that it comes exactly then.
"""

from __future__ import annotations

import json
import sys
from collections import Counter

import trio
import trio.testing

from bridge import Limits

from conftest import LineClient, call, poll, running_bridge

TIMEOUT = 20

# The request timeout, in virtual seconds: never reached while the test sets up (the clock flows
# at the real rate); the clock is jumped past it once the child's stdin is full.
REQUEST_TIMEOUT = 3600
# What the filling client writes: more than the child's stdin pipe (64 KiB on Linux), the child's
# own read buffer and the socket buffers between that client and the bridge can hold, so that
# the bridge's writes to the child block.
FILLER_MESSAGES = 16
FILLER_BYTES = 64 * 1024
# Requests that time out together: the second must not wait for the first one's cancellation.
REQUESTS = 2
# Stopping the deaf child: it ignores the end of its stdin, and dies of SIGTERM.
LIMITS = Limits(request_timeout=REQUEST_TIMEOUT, stop_stdin_timeout=0.5, stop_term_timeout=5, drain_timeout=1)

# Reads one line, says so, then reads nothing more.
DEAF_CHILD = r"""
import sys, time
sys.stdin.buffer.readline()
sys.stdout.write('{"jsonrpc": "2.0", "method": "notifications/message", '
                 '"params": {"level": "info", "data": "deaf from now on"}}\n')
sys.stdout.flush()
time.sleep(600)
"""


async def test_requests_that_time_out_while_the_shared_child_reads_nothing_get_their_timeout_error_once_each(
    sock_dir, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.rate = 1
    filler = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": "x" * FILLER_BYTES}}
    async with running_bridge(
        (sys.executable, "-c", DEAF_CHILD), [f"unix:{sock_dir}/s.sock"], child_mode="shared", limits=LIMITS
    ) as daemon:
        with trio.fail_after(TIMEOUT):
            client = await LineClient.open(daemon.addresses[0])
            await client.send(*(call(n, "slow") for n in range(REQUESTS)))
            assert (await client.receive())["params"]["data"] == "deaf from now on"
            filling = await LineClient.open(daemon.addresses[0])
            async with trio.open_nursery() as nursery:
                payload = (json.dumps(filler).encode() + b"\n") * FILLER_MESSAGES
                nursery.start_soon(filling.stream.send_all, payload)
                await trio.testing.wait_all_tasks_blocked()  # the child's stdin is full
                nursery.cancel_scope.cancel()
        mock_clock.jump(REQUEST_TIMEOUT)  # outside fail_after, whose deadline would pass too
        with trio.fail_after(TIMEOUT):
            replies = [await client.receive() for _ in range(REQUESTS)]
            daemon.stop()  # the deaf child is stopped: nothing more may reach the client
            replies += await client.receive_until_eof()
            await poll(lambda: daemon.statistics().children == 0)
    counts = Counter(reply.get("id") for reply in replies)
    assert counts == dict.fromkeys(range(REQUESTS), 1), f"replies: {replies}"
    for reply in replies:  # each at its timeout, not held up by the cancellation the child never reads
        assert reply["error"]["code"] == -32001
        assert reply["error"]["data"]["reason"] == "request-timeout"
