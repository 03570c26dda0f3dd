"""Fuzzing a whole daemon over Streamable HTTP: the clients of tests/e2e/test_fuzz_daemon.py, every
line a POST of its own (docs/design.md §8).

Each client is a legacy session (opened with ``initialize``; the 2026-07-28 requests are left out
of its script: their subscriptions' notifications belong on the session's GET stream, which it
does not open) or a 2026-07-28 client (each request with the era's ``_meta`` and headers, no
session). It POSTs each of its lines at once, each on a connection of its own, so that they
reach the daemon in any order and overlap; a client that vanishes closes each connection as soon
as its POST is written, reading nothing (which, over 2026-07-28, cancels the request). What the
responses carry, JSON bodies and the events of event streams, is checked as the stream test
checks a client's lines (:func:`daemon_fuzzing.check`); a notification must get 202 with no body,
and so must a legacy client's stray reply (a 2026-07-28 client posts no replies: its are refused).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
from daemon_fuzzing import (
    EXAMPLE_DEADLINE,
    MODERN_KINDS,
    MODES,
    SETTINGS,
    Expected,
    Script,
    Setting,
    check,
    check_left_clean,
    fuzzed_daemon,
    lines_of,
    scripts,
)
from fuzzing import fuzz_settings, run_logged
from hypothesis import given
from hypothesis import strategies as st

from bridge._errors import REQUEST_TIMEOUT
from channels import INVALID_REQUEST

from conftest import LEGACY_VERSION, MODERN_META, http_port, initialize, poll
from rawhttp import POST_HEADERS, RawHttp, Response, parse_events

MODERN = MODERN_META["io.modelcontextprotocol/protocolVersion"]


def modern_post(line: bytes) -> tuple[bytes, list[tuple[str, str]]]:
    """A line as a 2026-07-28 client POSTs it: a request with the era's ``_meta``, and the
    headers that name its version, method and tool (a line that is not JSON goes as it is)."""
    headers: list[tuple[str, str]] = [*POST_HEADERS, ("mcp-protocol-version", MODERN)]
    try:
        message = json.loads(line)
    except ValueError:
        return line, headers
    if not isinstance(message, dict):
        return line, headers
    params = message.get("params")
    if "id" in message and "method" in message and isinstance(params, dict | None):
        params = {**(params or {}), "_meta": {**MODERN_META, **(params or {}).get("_meta", {})}}
        message["params"] = params
    if isinstance(message.get("method"), str):
        headers.append(("mcp-method", message["method"]))
        if message["method"] == "tools/call" and isinstance(params, dict):
            headers.append(("mcp-name", params["name"]))
    return json.dumps(message, ensure_ascii=False).encode(), headers


def messages_of(response: Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages a POST's response carried: none with 202, its body, or its events."""
    if response.status == 202:
        assert response.body == b"", response
        return []
    if response.header("content-type") == "text/event-stream":
        events, _ = parse_events(response.body)
        return [json.loads(event["data"]) for event in events if event.get("data")]
    assert response.header("content-type") == "application/json", response
    return [json.loads(response.body)]


async def open_session(port: int) -> list[tuple[str, str]]:
    """The headers of a new legacy session's POSTs. Under a request timeout its ``initialize`` may
    time out (the session then ends with it): it is tried again until it opens one."""
    while True:
        client = await RawHttp.open(port)
        response = await client.request("POST", "/mcp", POST_HEADERS, initialize("open"))
        await client.aclose()
        assert response.status == 200, response
        if "result" in response.json():
            session = response.header("mcp-session-id") or ""
            return [*POST_HEADERS, ("mcp-session-id", session), ("mcp-protocol-version", LEGACY_VERSION)]
        assert response.json()["error"]["code"] == REQUEST_TIMEOUT, response


async def run_clients(port: int, scripts: list[Script], modern: list[bool], errors: frozenset[int]) -> None:
    """Open a session per legacy script, POST every line of every client at once, and check what
    each client that stayed got."""
    expected = [Expected() for _ in scripts]
    lines = [lines_of(number, script, expected[number]) for number, script in enumerate(scripts)]
    for number, script in enumerate(scripts):
        if modern[number]:  # a 2026-07-28 client posts no responses: each is refused, as a bad line
            expected[number].bad += [INVALID_REQUEST] * script.kinds.count("stray")
    sessions = [None if modern[number] else await open_session(port) for number in range(len(scripts))]
    received: list[list[dict[str, Any]]] = [[] for _ in scripts]

    async def post_line(number: int, line: bytes) -> None:
        session = sessions[number]
        body, headers = modern_post(line.rstrip(b"\n")) if session is None else (line.rstrip(b"\n"), session)
        client = await RawHttp.open(port)
        try:
            if scripts[number].vanish:  # over 2026-07-28, closing the response cancels the request
                await client.send_request("POST", "/mcp", headers, body)
                return
            response = await client.request("POST", "/mcp", headers, body)
        finally:
            await client.aclose()
        received[number].extend(messages_of(response))

    async with trio.open_nursery() as nursery:
        for number, client_lines in enumerate(lines):
            for line in client_lines:
                nursery.start_soon(post_line, number, line)
    for number, script in enumerate(scripts):
        if not script.vanish:
            check(number, expected[number], received[number], errors, bad_line_codes=not modern[number])


# Per connection, a session's child starts within its initialize, which a 5 ms request timeout
# never leaves it time for (no session could open), and a crashing child ends its session (and
# a later POST's 404 carries -32001, as a timeout does).
HTTP_MODES = [mode for mode in MODES if mode.values[0] == "shared" or mode.values[1] == SETTINGS[0]]


@pytest.mark.parametrize(("child_mode", "setting"), HTTP_MODES)
@fuzz_settings(share=0.3)  # an example costs about 0.4 s here, several times a stream one
@given(
    scripts=st.lists(scripts, min_size=2, max_size=4), modern=st.lists(st.booleans(), min_size=4, max_size=4)
)
def test_any_clients_posts_get_exactly_their_own_replies_and_leave_nothing_behind(
    child_mode: str, setting: Setting, scripts: list[Script], modern: list[bool]
) -> None:
    for number, script in enumerate(scripts):
        if not modern[number]:
            script.kinds = [kind for kind in script.kinds if kind not in MODERN_KINDS]

    async def main() -> None:
        with trio.fail_after(EXAMPLE_DEADLINE):
            async with fuzzed_daemon(setting, child_mode, "http://127.0.0.1:0/mcp") as daemon:
                await run_clients(http_port(daemon.addresses[0]), scripts, modern, setting.errors)
                await poll(lambda: daemon.statistics().requests_in_flight == 0)
                check_left_clean(daemon, setting)

    run_logged(main)
