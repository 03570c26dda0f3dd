"""Fuzzing the HTTP listener: request lines, headers, bodies, chunked encoding, pipelining, Upgrade.

Each example serves ``http://127.0.0.1:0/mcp`` with the echo server of :mod:`fuzzing`, opens a
legacy session of its own (so that the fuzzed requests can name a live session), and sends one to
four pipelined requests built from valid ones (legacy and 2026-07-28 POSTs, chunked bodies,
``Expect: 100-continue``, GET streams with ``Last-Event-ID``, DELETE, the 2024-11-05 endpoints,
OPTIONS, Upgrade, HTTP/1.0), a few byte edits, in chunks the server reads one by one. Then it ends
its side, at once or (one in twenty as many examples) after waiting past the head deadline. A well-behaved client
runs alongside with a session and a 2026-07-28 request of its own.

The invariant (h11's): every response the fuzzed connection gets is well-formed HTTP with a
status below 500 (never 101: nothing is upgraded here), the server ends the connection soon after
the client did, nothing is logged with a traceback or at ERROR, nothing leaves the listener's
tasks, and the other client gets exactly its own replies, its marker never reaching the fuzzed
connection.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import httptools
import trio
import trio.testing
from fuzzing import (
    LEGACY,
    MARKER,
    chunked,
    cut_lists,
    edit_lists,
    fuzz_settings,
    mutated,
    read_until_closed,
    run_example,
    send_and_vanish,
    send_in_chunks,
)
from hypothesis import given
from hypothesis import strategies as st

from channels import ListenOptions

from rawhttp import post

MODERN = "2026-07-28"
MAX_MESSAGE = 4096  # small, so that over-limit bodies cost little
HANDSHAKE = 1.0  # the head deadline; shorter ones expire a well-behaved client's head on a loaded machine
OPTIONS = ListenOptions(max_message_bytes=MAX_MESSAGE, handshake_timeout=HANDSHAKE)
# Seconds one example may take (a stalled one about STALL, any other a few milliseconds).
EXAMPLE_DEADLINE = 15
# How long a stalling client waits before it ends its side: the head deadline plus two of the
# listener's deadline ticks (channels._core.ticker.TICK, 0.25 s), so that the deadline has fired.
STALL = HANDSHAKE + 0.5
# Stalled examples cost STALL each: one in twenty as many as the others.
STALLED_SHARE = 0.05


def initialize(request_id: Any = 1, version: str = LEGACY) -> dict[str, Any]:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "f", "version": "1"}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


def modern(request_id: Any, method: str = "tools/list") -> dict[str, Any]:
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params: dict[str, Any] = {"_meta": meta}
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


# -- the requests the fuzzer starts from ---------------------------------------------------------


@attrs.frozen
class Context:
    """What a request template may name: the Host and the fuzzer's own live session."""

    host: bytes
    session: bytes


def head(method: bytes, target: bytes, headers: list[bytes], version: bytes = b"HTTP/1.1") -> bytes:
    return (
        method + b" " + target + b" " + version + b"\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n"
    )


def with_body(method: bytes, target: bytes, headers: list[bytes], body: bytes, **more: Any) -> bytes:
    return head(method, target, [*headers, b"content-length: %d" % len(body)], **more) + body


def chunked_body(body: bytes, cuts: list[int]) -> bytes:
    pieces = chunked(body, cuts)
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"


POST_HEADERS = [b"accept: application/json, text/event-stream", b"content-type: application/json"]

json_messages = st.one_of(
    st.builds(initialize, st.integers(0, 99), st.sampled_from([LEGACY, "2025-11-25", "2024-11-05"])),
    st.builds(modern, st.one_of(st.integers(), st.text(max_size=8)), st.sampled_from(["tools/list", "ping"])),
    st.builds(
        lambda i: {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "x"}}, st.integers()
    ),
    st.just({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    st.just({"jsonrpc": "2.0", "id": 5, "result": {}}),
    st.just([{"jsonrpc": "2.0", "id": 6, "method": "ping"}]),
    st.just({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"pad": "x" * MAX_MESSAGE}}),
)


@st.composite
def requests(draw: st.DrawFn, context: Context) -> bytes:
    """One valid (or nearly) request of some kind, before byte edits."""
    host = b"host: " + context.host
    session = b"mcp-session-id: " + draw(st.sampled_from([context.session, b"0" * 32, b""]))
    version = b"mcp-protocol-version: " + draw(
        st.sampled_from([LEGACY.encode(), MODERN.encode(), b"1999-01-01"])
    )
    body = json.dumps(draw(json_messages)).encode()
    kind = draw(
        st.sampled_from(
            [
                "post",
                "post",
                "session",
                "modern",
                "chunked",
                "continue",
                "get",
                "delete",
                "sse",
                "options",
                "upgrade",
                "http10",
                "metadata",
            ]
        )
    )
    if kind == "post":
        return with_body(b"POST", b"/mcp", [host, *POST_HEADERS], body)
    if kind == "session":
        return with_body(b"POST", b"/mcp", [host, *POST_HEADERS, session, version], body)
    if kind == "modern":
        message = modern(draw(st.integers(0, 9)))
        headers = [
            host,
            *POST_HEADERS,
            b"mcp-protocol-version: " + MODERN.encode(),
            b"mcp-method: tools/list",
        ]
        return with_body(b"POST", b"/mcp", headers, json.dumps(message).encode())
    if kind == "chunked":
        headers = [host, *POST_HEADERS, session, version, b"transfer-encoding: chunked"]
        return head(b"POST", b"/mcp", headers) + chunked_body(
            body, draw(st.lists(st.integers(0, 4096), max_size=4))
        )
    if kind == "continue":
        return with_body(
            b"POST", b"/mcp", [host, *POST_HEADERS, session, version, b"expect: 100-continue"], body
        )
    if kind == "get":
        last = draw(
            st.sampled_from([b"", b"last-event-id: 0", b"last-event-id: abc:1", b"last-event-id: \xff"])
        )
        headers = [host, b"accept: text/event-stream", session, version, *([last] if last else [])]
        return head(b"GET", b"/mcp", headers)
    if kind == "delete":
        return head(b"DELETE", b"/mcp", [host, session, version])
    if kind == "sse":
        return draw(
            st.sampled_from(
                [
                    head(b"GET", b"/sse", [host, b"accept: text/event-stream"]),
                    with_body(
                        b"POST", b"/messages?sessionId=" + context.session, [host, POST_HEADERS[1]], body
                    ),
                ]
            )
        )
    if kind == "options":
        return head(
            b"OPTIONS", b"/mcp", [host, b"origin: http://localhost", b"access-control-request-method: POST"]
        )
    if kind == "upgrade":
        upgrade = [host, b"connection: upgrade", b"upgrade: " + draw(st.sampled_from([b"websocket", b"h2c"]))]
        return draw(
            st.sampled_from([head(b"GET", b"/mcp", upgrade), with_body(b"POST", b"/mcp", upgrade, body)])
        )
    if kind == "http10":
        return with_body(b"POST", b"/mcp", [host, *POST_HEADERS], body, version=b"HTTP/1.0")
    return head(b"GET", b"/.well-known/oauth-protected-resource/mcp", [host])


@st.composite
def inputs(draw: st.DrawFn, context: Context) -> bytes:
    pipelined = b"".join(draw(st.lists(requests(context), min_size=1, max_size=4)))
    return mutated(pipelined, draw(edit_lists))


# -- what comes back -----------------------------------------------------------------------------


class Responses:
    """httptools' response callbacks: the status of every response head the server sent."""

    def __init__(self) -> None:
        self.statuses: list[int] = []
        self.parser = httptools.HttpResponseParser(self)

    def on_headers_complete(self) -> None:
        self.statuses.append(self.parser.get_status_code())


def check_responses(received: bytes) -> None:
    assert MARKER.encode() not in received, "another connection's reply reached the fuzzed one"
    responses = Responses()
    try:
        responses.parser.feed_data(received)
    except httptools.HttpParserError as exc:
        raise AssertionError(f"malformed response ({exc}): {received[:300]!r}") from None
    assert all(100 <= status < 500 and status != 101 for status in responses.statuses), responses.statuses


# -- the clients ---------------------------------------------------------------------------------


async def open_session(port: int, request_id: Any) -> str:
    response = await post(port, initialize(request_id))
    assert response.status == 200 and response.json()["id"] == request_id, response
    session = response.header("mcp-session-id")
    assert session is not None
    return session


async def well_behaved(port: int) -> None:
    """A session and a 2026-07-28 request, each answered with exactly its own reply."""
    session = await open_session(port, "good-init")
    headers = [("mcp-session-id", session), ("mcp-protocol-version", LEGACY)]
    message = {"jsonrpc": "2.0", "id": "good-1", "method": "ping", "params": {"marker": MARKER}}
    response = await post(port, message, headers)
    assert response.status == 200, response
    assert response.messages() == [
        {"jsonrpc": "2.0", "id": "good-1", "result": {"method": "ping", "params": {"marker": MARKER}}}
    ]
    request = modern("good-2")
    request["params"]["marker"] = MARKER
    response = await post(port, request, [("mcp-protocol-version", MODERN), ("mcp-method", "tools/list")])
    assert response.status == 200, response
    [reply] = response.messages()
    assert reply["id"] == "good-2" and reply["result"]["params"]["marker"] == MARKER, response


def fuzz(data: st.DataObject, cuts: list[int], *, stall: bool = False, vanish: bool = False) -> None:
    async def scenario(address: str) -> None:
        port = int(address.rsplit(":", 1)[1].split("/")[0])
        context = Context(b"127.0.0.1:%d" % port, (await open_session(port, "fuzz-init")).encode())
        sent = data.draw(inputs(context), label="sent")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(well_behaved, port)
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with stream:
                if vanish:
                    await send_and_vanish(stream, chunked(sent, cuts))
                    return
                if stall:
                    await send_in_chunks(stream, chunked(sent, cuts), False)
                    await trio.sleep(STALL)  # a stalled client, not a synchronisation
                    await send_in_chunks(stream, [], True)
                else:
                    nursery.start_soon(send_in_chunks, stream, chunked(sent, cuts), True)
                received = await read_until_closed(stream)
        check_responses(received)

    run_example("http://127.0.0.1:0/mcp", OPTIONS, scenario, EXAMPLE_DEADLINE)


@fuzz_settings()
@given(st.data(), cut_lists, st.sampled_from(["ends", "ends", "ends", "vanishes"]))
def test_no_bytes_into_the_http_listener_get_a_5xx_a_traceback_a_hang_or_anothers_reply(
    data: st.DataObject, cuts: list[int], client: str
) -> None:
    fuzz(data, cuts, vanish=client == "vanishes")


@fuzz_settings(share=STALLED_SHARE)
@given(st.data(), cut_lists)
def test_no_bytes_from_a_client_that_stalls_past_the_head_deadline_wedge_the_http_listener(
    data: st.DataObject, cuts: list[int]
) -> None:
    fuzz(data, cuts, stall=True)
