"""A 2026-07-28 request stops being counted when its answer is written, not when its connection is next used.

Its response, answered by the task that routes the answer, waits for the client's next request on
the same keep-alive connection (``response.park``, up to ``response.QUICK_WAIT``). The request is
served all the same: it holds no place under ``max_connections`` and no use of the child for the
on-demand idle stop, and its connection still serves the client's next request. A real daemon with
the shared child, real TCP connections on loopback.
"""

from __future__ import annotations

from typing import Any

import trio

from bridge import Limits

from conftest import example_server, request, running_bridge
from rawhttp import POST_HEADERS, RawHttp

TIMEOUT = 20
MODERN = "2026-07-28"


def _modern(request_id: int) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """A 2026-07-28 ``tools/list`` request and the headers it goes with."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    headers = [*POST_HEADERS, ("mcp-protocol-version", MODERN), ("mcp-method", "tools/list")]
    return request(request_id, "tools/list", {"_meta": meta}), headers


async def _listed(client: RawHttp, request_id: int) -> int:
    message, headers = _modern(request_id)
    response = await client.request("POST", "/mcp", headers, message)
    assert response.messages()[0]["id"] == request_id
    return response.status


async def test_an_answered_2026_request_whose_connection_stays_open_holds_no_place_under_the_connection_cap() -> (
    None
):
    limits = Limits(max_connections=1)
    async with running_bridge(
        example_server(), ["http://127.0.0.1:0/mcp"], limits=limits, child_mode="shared"
    ) as daemon:
        port = int(daemon.addresses[0].rsplit(":", 1)[1].split("/")[0])
        with trio.fail_after(TIMEOUT):
            first = await RawHttp.open(port)
            second = await RawHttp.open(port)
            try:
                assert await _listed(first, 1) == 200
                # The first connection is open and idle, its response waiting for its next request.
                assert daemon.statistics().connections == 0
                assert daemon._children.usage.users == 0  # the on-demand idle stop may count from here
                assert await _listed(second, 2) == 200  # not 503: the cap is not reached
                assert await _listed(first, 3) == 200  # the waiting connection serves its next request
                assert daemon.statistics().connections_refused == 0
            finally:
                await first.aclose()
                await second.aclose()
