"""A legacy session's request the client cancels: its POST ends with no answer, as MCP asks."""

from __future__ import annotations

import trio

from bridge import Limits

from conftest import LEGACY_VERSION, call, example_server, http_port, initialize, poll, running_bridge
from rawhttp import POST_HEADERS, RawHttp, Response, post

TIMEOUT = 20
# The child sleeps far past the test; stopping it then takes no longer than this after its stdin
# closes (it is asleep, so SIGTERM ends it).
QUICK_STOP = Limits(stop_stdin_timeout=0.1)


async def test_a_request_cancelled_while_its_post_waits_for_the_answer_ends_as_an_event_stream_with_no_event() -> (
    None
):
    # Found by tests/e2e/test_fuzz_daemon_http.py: the POST got 503 with a JSON-RPC error
    # whose id was null (a branch meant never to be taken), which an SDK client reports as an error.
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(), ["http://127.0.0.1:0/mcp"], child_mode="shared", limits=QUICK_STOP
        ) as daemon:
            port = http_port(daemon.addresses[0])
            opened = await post(port, initialize())
            session = [
                ("mcp-session-id", opened.header("mcp-session-id") or ""),
                ("mcp-protocol-version", LEGACY_VERSION),
            ]
            responses: list[Response] = []

            async def slow_call() -> None:
                client = await RawHttp.open(port)
                responses.append(
                    await client.request(
                        "POST", "/mcp", [*POST_HEADERS, *session], call(7, "sleep", seconds=60)
                    )
                )
                await client.aclose()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow_call)
                await poll(lambda: daemon.statistics().requests_in_flight == 1)  # at the child
                cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
                assert (await post(port, cancel, session)).status == 202
    (response,) = responses
    assert response.status == 200
    assert response.header("content-type") == "text/event-stream"
    assert response.events() == []
