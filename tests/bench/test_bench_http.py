"""The benchmark's Streamable HTTP client (bench/streamable_http.py), which parses HTTP and SSE by
hand for speed (bench/http_wire.py): its parsers on bytes cut at every place, and whole sessions
against a small canned server (SSE and JSON replies, a notification's 202, an early 413, DELETE),
in the legacy era and in the 2026-07-28 era (bench/http_modern.py)."""

from __future__ import annotations

import functools
import json
import sys
from collections import Counter

import pytest
import trio

from conftest import REPO

sys.path.insert(0, str(REPO / "bench"))
import http_modern
import http_wire
import streamable_http
from wire import INITIALIZE, INITIALIZED, BenchError, echo_call, encode, open_session, parse_echo

BODY = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}],"isError":false}}'
SSE_BODY = b": a comment\n\nevent: ping\ndata: {}\n\nevent: message\ndata: " + BODY + b"\n\n"
RESPONSES = {
    "length": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
    % (len(BODY), BODY),
    "chunked": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5;ext=1\r\n"
    + SSE_BODY[:5]
    + b"\r\n%x\r\n" % (len(SSE_BODY) - 5)
    + SSE_BODY[5:]
    + b"\r\n0\r\nX-Trailer: 1\r\n\r\n",
    "until close": b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + BODY,
}
EXPECTED_BODY = {"length": BODY, "chunked": SSE_BODY, "until close": BODY}


class Recorder:
    def __init__(self) -> None:
        self.heads: list[int] = []
        self.body: list[bytes] = []
        self.ends = 0
        self.parser = http_wire.ResponseParser(
            self.head, lambda data: self.body.append(bytes(data)), self.end
        )

    def head(self, status: int, reason: str) -> None:
        self.heads.append(status)

    def end(self) -> None:
        self.ends += 1


@pytest.mark.parametrize("kind", list(RESPONSES))
def test_a_response_cut_anywhere_parses_to_the_same_body(kind: str) -> None:
    response = RESPONSES[kind]
    cuts = [[response[:i], response[i:]] for i in range(1, len(response))]
    for pieces in [*cuts, [response[i : i + 1] for i in range(len(response))]]:
        recorder = Recorder()
        recorder.parser.expect()
        for piece in pieces:
            recorder.parser.feed(piece)
        if kind == "until close":
            assert recorder.ends == 0
            recorder.parser.feed_eof()
        assert recorder.heads == [200], pieces
        assert b"".join(recorder.body) == EXPECTED_BODY[kind], pieces
        assert recorder.ends == 1
        assert recorder.parser.idle
        assert recorder.parser.keep_alive is (kind != "until close")


def test_bytes_after_a_response_and_a_close_mid_response_are_errors() -> None:
    recorder = Recorder()
    recorder.parser.expect()
    with pytest.raises(BenchError, match="no request in flight"):
        recorder.parser.feed(RESPONSES["length"] + b"HTTP/1.1 200 OK\r\n")
    recorder = Recorder()
    recorder.parser.expect()
    recorder.parser.feed(RESPONSES["length"][:-3])
    with pytest.raises(BenchError, match="in the middle of the response"):
        recorder.parser.feed_eof()


def test_the_event_stream_yields_the_data_of_message_events_only_whatever_the_line_ends() -> None:
    stream = (
        b': comment\n\nevent: ping\ndata: skipped\n\nid: 7\ndata: {"a":\ndata:1}\n\n'
        b"retry: 10\n\nevent: message\ndata: two\n\ndata\n\n"
    )
    expected = [b'{"a":\n1}', b"two", b""]
    for line_end in (b"\n", b"\r\n", b"\r"):
        text = stream.replace(b"\n", line_end)
        for pieces in ([text], [text[i : i + 1] for i in range(len(text))]):
            events = http_wire.EventStream()
            assert [payload for piece in pieces for payload in events.feed(piece)] == expected, line_end


def test_a_reply_is_told_from_a_request_or_notification_on_the_same_stream() -> None:
    assert not http_wire.is_response(b'{"jsonrpc":"2.0","method":"notifications/progress","params":{}}')
    assert not http_wire.is_response(b'{"jsonrpc":"2.0","id":"s1","method":"roots/list"}')
    assert http_wire.is_response(BODY)
    assert http_wire.is_response(b'{"id":1,"result":{"text":"\\"method\\": quoted"}}')
    assert http_wire.is_response(b'{"id":1,"result":{"method":"nested, not a member"}}')


# -- whole sessions against a canned server --------------------------------------------------
SESSION = b"f00d"
LIMIT = 100_000  # the canned server's largest request body; above it: 413 at once, and close


def sse(message: dict, crlf: bool) -> bytes:
    events = (
        b": keep-alive\n\nevent: message\ndata: "
        + json.dumps({"jsonrpc": "2.0", "method": "notifications/x"}).encode()
    )
    events += b"\n\nevent: message\ndata: " + json.dumps(message).encode() + b"\n\n"
    return events.replace(b"\n", b"\r\n") if crlf else events


Seen = list[tuple[str, dict[str, str], dict]]  # (method, headers, message) of each request


async def canned_server(stream: trio.SocketStream, seen: Seen) -> None:
    """Answers requests one at a time on one connection, each reply framed differently."""
    buffer = b""
    calls = 0
    while True:
        while b"\r\n\r\n" not in buffer:
            data = await stream.receive_some()
            if not data:
                return
            buffer += data
        head, buffer = buffer.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        headers = {
            name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])
        }
        method = lines[0].split()[0]
        length = int(headers.get("content-length", "0"))
        if length > LIMIT:
            await stream.send_all(
                b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 9\r\nConnection: close\r\n\r\ntoo large"
            )
            await stream.aclose()
            return
        while len(buffer) < length:
            buffer += await stream.receive_some()
        body, buffer = buffer[:length], buffer[length:]
        message = json.loads(body) if body else {}
        seen.append((method if method != "POST" else message.get("method", "reply"), headers, message))
        if method == "DELETE":
            await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        elif "id" not in message:
            await stream.send_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
        elif message["method"] == "initialize":
            result = {"protocolVersion": "2025-03-26", "capabilities": {}, "serverInfo": {"name": "canned"}}
            events = sse({"jsonrpc": "2.0", "id": message["id"], "result": result}, crlf=False)
            await stream.send_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nMcp-Session-Id: %s\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (SESSION, len(events), events)
            )
        elif message["method"] == "server/discover":
            result = {"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {}}
            data = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
            await stream.send_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                % (len(data), data)
            )
        else:
            calls += 1
            text = message["params"]["arguments"]["text"]
            reply = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "result": {"content": [{"type": "text", "text": text}], "isError": False},
            }
            if calls % 2:  # JSON with Content-Length, header names in odd case
                data = json.dumps(reply).encode()
                await stream.send_all(
                    b"HTTP/1.1 200 OK\r\ncOnTeNt-TyPe: application/json; charset=utf-8\r\ncontent-length: %d\r\n\r\n%s"
                    % (len(data), data)
                )
            else:  # SSE with CRLF line ends, no length, the reply cut into two chunks sent apart
                events = sse(reply, crlf=True)
                await stream.send_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n"
                    % (len(events) - 7, events[:-7])
                )
                await trio.sleep(0)
                await stream.send_all(b"%x\r\n%s\r\n0\r\n\r\n" % (7, events[-7:]))


def run_client(port: int, stats: Counter) -> list[tuple[object, str]]:
    conn = open_session(lambda: streamable_http.http_connect(("127.0.0.1", port), "/mcp", stats))
    got = []
    try:
        conn.send(echo_call(1, "one"))
        got.append(parse_echo(conn.read_one()))
        conn.reserve(3)
        conn.send(b"".join(echo_call(i, f"call {i}") for i in range(2, 8)))
        while len(got) < 7:
            got += [parse_echo(line) for line in conn.read_lines()]
        conn.send(echo_call(8, "x" * (LIMIT + 1)))
        with pytest.raises(BenchError, match=r"HTTP 413 Payload Too Large .*too large"):
            conn.read_one()
    finally:
        conn.close()
    return got


async def test_a_session_posts_each_message_and_reads_json_and_sse_replies_then_deletes() -> None:
    seen: Seen = []
    stats: Counter = Counter()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(
                functools.partial(trio.serve_tcp, host="127.0.0.1"), lambda s: canned_server(s, seen), 0
            )
            port = listeners[0].socket.getsockname()[1]
            got = await trio.to_thread.run_sync(run_client, port, stats, abandon_on_cancel=True)
            nursery.cancel_scope.cancel()
    assert sorted(got) == [(1, "one")] + [(i, f"call {i}") for i in range(2, 8)]
    methods = [method for method, _, _ in seen]
    assert methods[:3] == ["initialize", "notifications/initialized", "tools/call"]
    assert methods.count("tools/call") == 7
    initialize, *later = [headers for _, headers, _ in seen]
    assert "mcp-session-id" not in initialize and "mcp-protocol-version" not in initialize
    assert initialize["accept"] == "application/json, text/event-stream"
    assert initialize["content-type"] == "application/json"
    for headers in later:
        assert headers["mcp-session-id"] == SESSION.decode()
        assert headers["mcp-protocol-version"] == "2025-03-26"  # the server's, from its result
    # the 413 closed its connection; the session still ends with DELETE on another one
    assert stats["DELETE skipped: requests in flight"] == 0
    assert methods[-1] == "DELETE", methods
    assert stats["replies: JSON, length"] + stats["replies: SSE, chunked"] == 8


# -- the 2026-07-28 era ----------------------------------------------------------------------
def test_a_modern_post_splices_the_same_bytes_as_decoding_and_encoding_the_message() -> None:
    messages = [
        echo_call(7, 'text with \u00e9 and \\ and "'),
        echo_call("abc:1", "string id"),
        encode({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}),
        encode({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"cursor": "c"}}),
        encode({"jsonrpc": "2.0", "id": 4, "method": "resources/read", "params": {"uri": "file:///a b"}}),
    ]
    for line in messages:
        body = line.rstrip(b"\n")
        fast = http_modern.modern_post(body)
        slow = http_modern._decoded(body)
        assert fast == slow, body
        assert fast is not None
        message = json.loads(fast[0])
        assert message["params"]["_meta"] == http_modern.META
        assert {
            **message,
            "params": {k: v for k, v in message["params"].items() if k != "_meta"},
        } == json.loads(body)
    assert http_modern.modern_post(echo_call(1, "x").rstrip(b"\n"))[1:] == (b"tools/call", b"echo")


def test_a_modern_post_keeps_a_requests_own_meta_and_encodes_a_name_that_is_not_plain_ascii() -> None:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "caf\u00e9 ", "_meta": {"progressToken": 1}},
    }
    body, method, name = http_modern.modern_post(encode(message).rstrip(b"\n"))
    assert json.loads(body)["params"]["_meta"] == {**http_modern.META, "progressToken": 1}
    assert (method, name) == (b"tools/call", b"=?base64?Y2Fmw6kg?=")
    assert http_modern.modern_post(INITIALIZED.rstrip(b"\n")) is None
    assert http_modern.modern_post(INITIALIZE.rstrip(b"\n"))[0] == http_modern.DISCOVER_BODY


def run_modern_client(port: int, stats: Counter) -> list[tuple[object, str]]:
    conn = open_session(lambda: streamable_http.http_connect(("127.0.0.1", port), "/mcp", stats, modern=True))
    try:
        conn.reserve(2)
        conn.send(b"".join(echo_call(i, f"call {i}") for i in range(1, 5)))
        got: list[tuple[object, str]] = []
        while len(got) < 4:
            got += [parse_echo(line) for line in conn.read_lines()]
    finally:
        conn.close()
    return got


async def test_a_modern_session_discovers_then_posts_each_request_with_its_meta_and_headers_and_never_deletes() -> (
    None
):
    seen: Seen = []
    stats: Counter = Counter()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(
                functools.partial(trio.serve_tcp, host="127.0.0.1"), lambda s: canned_server(s, seen), 0
            )
            port = listeners[0].socket.getsockname()[1]
            got = await trio.to_thread.run_sync(run_modern_client, port, stats, abandon_on_cancel=True)
            nursery.cancel_scope.cancel()
    assert sorted(got) == [(i, f"call {i}") for i in range(1, 5)]
    assert [method for method, _, _ in seen] == ["server/discover"] + ["tools/call"] * 4
    for method, headers, message in seen:
        assert "mcp-session-id" not in headers
        assert headers["mcp-protocol-version"] == "2026-07-28"
        assert headers["mcp-method"] == method
        assert headers.get("mcp-name") == ("echo" if method == "tools/call" else None)
        assert message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
        assert message["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] == {}
    assert stats["not sent in the 2026-07-28 era: notifications/initialized"] == 1
