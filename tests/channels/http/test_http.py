"""The Streamable HTTP listener on the wire: every status rule, sessions, streams and resumption.

A real daemon in this process serves the bundled example server over ``http://127.0.0.1:0/mcp``;
the client is :mod:`rawhttp` (h11 on a TCP stream), so each status, header and event is checked
as sent. The SDK's clients against the same listener are in ``test_http_sdk.py``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import h11
import pytest
import trio

from bridge import Daemon, Limits
from channels import HttpOptions, ListenOptions, TokenSet, connect

from conftest import TlsFiles, bridge_process, call, example_server, poll, request, running_bridge
from rawhttp import ACCEPT_BOTH, JSON_BODY, POST_HEADERS, RawHttp, Response, post

TIMEOUT = 20
LEGACY = "2025-06-18"
RESUMING = "2025-11-25"
MODERN = "2026-07-28"
TOKEN = "http-test-token-Vb7nQ2xLk9RmT4sZ"


def initialize(version: str = LEGACY, request_id: Any = 1) -> dict[str, Any]:
    return request(
        request_id,
        "initialize",
        {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    )


def modern(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    return request(request_id, method, {**(params or {}), "_meta": meta})


def modern_headers(message: dict[str, Any]) -> list[tuple[str, str]]:
    headers = [("mcp-protocol-version", MODERN), ("mcp-method", message["method"])]
    name = message.get("params", {}).get("name")
    if name is not None:
        headers.append(("mcp-name", name))
    return headers


def port_of(daemon: Daemon) -> int:
    return int(daemon.addresses[0].rsplit(":", 1)[1].split("/")[0])


@asynccontextmanager
async def http_bridge(
    *flags: str,
    http: HttpOptions | None = None,
    child_mode: str = "per-connection",
    limits: Limits | None = None,
    **options: Any,
) -> AsyncIterator[int]:
    listen_options = ListenOptions(http=http or HttpOptions(), **options)
    async with running_bridge(
        example_server(*flags),
        ["http://127.0.0.1:0/mcp"],
        listen_options=listen_options,
        child_mode=child_mode,
        limits=limits,
    ) as daemon:
        yield port_of(daemon)


class Session:
    """A legacy session opened with initialize on its own connection."""

    def __init__(self, port: int, session_id: str, version: str) -> None:
        self.port = port
        self.id = session_id
        self.version = version

    def headers(self) -> list[tuple[str, str]]:
        return [*POST_HEADERS, ("mcp-session-id", self.id), ("mcp-protocol-version", self.version)]

    async def post(self, message: Any) -> Response:
        return await post(
            self.port, message, [("mcp-session-id", self.id), ("mcp-protocol-version", self.version)]
        )


async def open_session(port: int, version: str = LEGACY) -> Session:
    response = await post(port, initialize(version))
    assert response.status == 200, response
    session_id = response.header("mcp-session-id")
    assert session_id is not None
    session = Session(port, session_id, version)
    initialized = await session.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert initialized.status == 202
    return session


# -- POST: what is refused before anything reaches a child -------------------------------------


async def test_a_post_without_text_event_stream_in_accept_is_refused_with_406() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            client = await RawHttp.open(port)
            response = await client.request(
                "POST", "/mcp", [("accept", "application/json"), JSON_BODY], initialize()
            )
            assert response.status == 406


async def test_a_post_whose_body_is_not_declared_json_is_refused_with_415() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            client = await RawHttp.open(port)
            response = await client.request(
                "POST", "/mcp", [ACCEPT_BOTH, ("content-type", "text/plain")], initialize()
            )
            assert response.status == 415


async def test_a_body_over_the_message_limit_is_refused_with_413_before_it_is_read() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge(limits=Limits(max_client_message=1000)) as port:
            response = await post(port, call(1, "echo", text="x" * 2000))
            assert response.status == 413


async def test_malformed_json_is_answered_with_400_and_a_parse_error() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            response = await post(port, b'{"jsonrpc": "2.0", "id": 1, "method":')
            assert response.status == 400
            assert response.json()["error"]["code"] == -32700


async def test_a_request_without_a_session_id_that_is_not_initialize_gets_400() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            response = await post(port, call(1, "echo", text="hi"))
            assert response.status == 400


async def test_a_request_naming_an_unknown_session_gets_404() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            response = await post(port, call(1, "echo", text="hi"), [("mcp-session-id", "0" * 32)])
            assert response.status == 404
            assert response.json()["error"]["code"] == -32001


async def test_an_unsupported_protocol_version_header_gets_400() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            session = await open_session(port)
            response = await post(
                port,
                call(2, "echo", text="hi"),
                [("mcp-session-id", session.id), ("mcp-protocol-version", "1999-01-01")],
            )
            assert response.status == 400


async def test_a_request_without_a_protocol_version_header_is_served_as_2025_03_26() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            session = await open_session(port)
            response = await post(port, call(2, "echo", text="hi"), [("mcp-session-id", session.id)])
            assert response.status == 200
            assert response.messages()[0]["result"]["content"][0]["text"] == "hi"


async def test_other_methods_get_405_with_an_allow_header() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            client = await RawHttp.open(port)
            response = await client.request("PUT", "/mcp", POST_HEADERS, initialize())
            assert response.status == 405
            assert response.header("allow") == "GET, POST, DELETE"


async def test_a_path_other_than_the_endpoint_gets_404() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            response = await post(port, initialize(), path="/elsewhere")
            assert response.status == 404


# -- legacy sessions -------------------------------------------------------------------------------


async def test_initialize_opens_a_session_with_an_unguessable_visible_ascii_session_id() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            first = await open_session(port)
            second = await open_session(port)
            assert first.id != second.id
            assert len(first.id) == 32 and all(0x21 <= ord(char) <= 0x7E for char in first.id)


async def test_a_request_in_a_session_is_answered_with_its_own_id_as_json() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            session = await open_session(port)
            response = await session.post(call("a-string-id", "add", a=2, b=40))
            assert response.status == 200
            assert response.header("content-type") == "application/json"
            (reply,) = response.messages()
            assert reply["id"] == "a-string-id"
            assert reply["result"]["content"][0]["text"] == "42"


async def test_progress_notifications_come_before_the_reply_on_an_event_stream() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            session = await open_session(port)
            message = call(7, "progress", steps=3)
            message["params"]["_meta"] = {"progressToken": "p"}
            response = await session.post(message)
            assert response.status == 200
            assert response.header("content-type") == "text/event-stream"
            assert response.header("x-accel-buffering") == "no"
            messages = response.messages()
            assert [m.get("method") for m in messages[:-1]] == ["notifications/progress"] * 3
            assert messages[-1]["id"] == 7


async def test_a_notification_or_a_response_post_gets_202_with_no_body() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            session = await open_session(port)
            notified = await session.post({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
            assert (notified.status, notified.body) == (202, b"")
            answered = await session.post({"jsonrpc": "2.0", "id": "unknown", "result": {}})
            assert (answered.status, answered.body) == (202, b"")


async def test_a_server_request_goes_out_on_one_stream_and_its_answer_comes_back_by_post() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            session = await open_session(port)
            client = await RawHttp.open(port)
            await client.send_request(
                "POST",
                "/mcp",
                session.headers(),
                json.dumps(call(3, "ask_client", method="roots/list")).encode(),
            )
            status, headers = await client.read_head()
            assert status == 200 and dict(headers)["content-type"] == "text/event-stream"
            pending = b""
            asked = None
            while asked is None:
                events, pending = await client.next_events(pending)
                for event in events:
                    if event.get("data"):
                        asked = json.loads(event["data"])
            assert asked["method"] == "roots/list"
            answer = await session.post({"jsonrpc": "2.0", "id": asked["id"], "result": {"roots": []}})
            assert answer.status == 202
            reply = None
            while reply is None:
                events, pending = await client.next_events(pending)
                for event in events:
                    if event.get("data"):
                        reply = json.loads(event["data"])
            assert reply["id"] == 3


async def test_a_second_initialize_in_a_session_is_refused_with_400() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            session = await open_session(port)
            response = await session.post(initialize(request_id=2))
            assert response.status == 400


async def test_a_batch_is_refused_after_2025_03_26_and_accepted_in_it() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            session = await open_session(port)
            refused = await session.post([call(2, "echo", text="a"), call(3, "echo", text="b")])
            assert refused.status == 400
            old = await open_session(port, "2025-03-26")
            accepted = await old.post([call(2, "echo", text="a"), call(3, "echo", text="b")])
            assert accepted.status == 200
            assert sorted(message["id"] for message in accepted.messages()) == [2, 3]


async def test_delete_ends_the_session_and_stops_its_child_then_the_session_is_gone() -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), ["http://127.0.0.1:0/mcp"]) as daemon:
            port = port_of(daemon)
            session = await open_session(port)
            await poll(lambda: daemon.statistics().children == 1)
            client = await RawHttp.open(port)
            deleted = await client.request("DELETE", "/mcp", [("mcp-session-id", session.id)])
            assert deleted.status == 200
            await poll(lambda: daemon.statistics().children == 0)
            gone = await session.post(call(2, "echo", text="hi"))
            assert gone.status == 404


async def test_a_session_whose_child_exited_answers_404_so_the_client_initialises_again() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge("--crash-after", "2") as port:
            session = await open_session(port)
            answered = await session.post(call(2, "echo", text="hi"))  # then the child exits
            assert answered.status == 200
            await poll_status(session, 404)
            again = await open_session(port)
            assert again.id != session.id


async def poll_status(session: Session, status: int) -> None:
    while (await session.post(call(99, "echo", text="?"))).status != status:
        await trio.sleep(0.02)


async def test_an_idle_session_is_ended_and_its_child_stopped_after_the_idle_timeout() -> None:
    with trio.fail_after(TIMEOUT):
        options = ListenOptions(http=HttpOptions(session_idle_timeout=0.2))
        async with running_bridge(
            example_server(), ["http://127.0.0.1:0/mcp"], listen_options=options
        ) as daemon:
            session = await open_session(port_of(daemon))
            await poll(lambda: daemon.statistics().children == 1)
            await poll(lambda: daemon.statistics().children == 0)
            response = await session.post(call(2, "echo", text="hi"))
            assert response.status == 404


async def test_a_session_over_the_cap_evicts_the_idle_one_instead_of_being_refused() -> None:
    # With every session busy it is refused with 503 instead: test_http_sessions.py.
    with trio.fail_after(TIMEOUT):
        async with http_bridge(http=HttpOptions(max_sessions=1)) as port:
            await open_session(port)
            response = await post(port, initialize())
            assert response.status == 200


# -- GET streams ----------------------------------------------------------------------------------


async def test_get_opens_the_standalone_stream_and_a_second_get_gets_409() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            session = await open_session(port)
            standalone = await RawHttp.open(port)
            await standalone.send_request(
                "GET", "/mcp", [("accept", "text/event-stream"), ("mcp-session-id", session.id)]
            )
            status, _ = await standalone.read_head()
            assert status == 200
            second = await RawHttp.open(port)
            response = await second.request(
                "GET", "/mcp", [("accept", "text/event-stream"), ("mcp-session-id", session.id)]
            )
            assert response.status == 409


async def test_a_notification_unrelated_to_any_request_arrives_on_the_standalone_stream() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            session = await open_session(port)
            standalone = await RawHttp.open(port)
            await standalone.send_request(
                "GET", "/mcp", [("accept", "text/event-stream"), ("mcp-session-id", session.id)]
            )
            assert (await standalone.read_head())[0] == 200
            first = await session.post(call(2, "notify", method="notifications/tools/list_changed"))
            second = await session.post(call(3, "notify", method="notifications/tools/list_changed"))
            assert first.status == second.status == 200
            events: list[dict[str, str]] = []
            pending = b""
            while not [event for event in events if event.get("data")]:
                more, pending = await standalone.next_events(pending)
                events += more
            assert (
                json.loads(next(e for e in events if e.get("data"))["data"])["method"]
                == "notifications/tools/list_changed"
            )


async def test_get_without_text_event_stream_in_accept_gets_406() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            session = await open_session(port)
            client = await RawHttp.open(port)
            response = await client.request(
                "GET", "/mcp", [("accept", "application/json"), ("mcp-session-id", session.id)]
            )
            assert response.status == 406


async def test_a_2025_11_25_event_stream_starts_with_a_priming_event_and_a_retry_delay() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            session = await open_session(port, RESUMING)
            message = call(5, "progress", steps=1)
            message["params"]["_meta"] = {"progressToken": 1}
            response = await session.post(message)
            events = response.events()
            assert events[0].get("id") and events[0].get("data") == "" and events[0].get("retry")


async def test_get_with_last_event_id_replays_what_that_stream_missed() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            session = await open_session(port, RESUMING)
            message = call(5, "progress", steps=3)
            message["params"]["_meta"] = {"progressToken": 1}
            whole = await session.post(message)
            events = [event for event in whole.events() if "id" in event]
            priming, first_progress = events[0], events[1]
            client = await RawHttp.open(port)
            replay = await client.request(
                "GET",
                "/mcp",
                [
                    ("accept", "text/event-stream"),
                    ("mcp-session-id", session.id),
                    ("last-event-id", first_progress["id"]),
                ],
            )
            assert replay.status == 200
            replayed = [json.loads(event["data"]) for event in replay.events() if event.get("data")]
            assert [m.get("method", m.get("id")) for m in replayed] == [
                "notifications/progress",
                "notifications/progress",
                5,
            ]
            assert priming["id"].split("/")[0] == first_progress["id"].split("/")[0]


# -- Host, Origin, token ----------------------------------------------------------------------------


async def test_a_foreign_origin_is_refused_with_403_before_anything_reaches_a_child() -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), ["http://127.0.0.1:0/mcp"]) as daemon:
            response = await post(port_of(daemon), initialize(), [("origin", "https://evil.example")])
            assert response.status == 403
            assert daemon.statistics().children == 0


async def test_a_dns_rebinding_host_is_refused_with_403() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            client = await RawHttp.open(port)
            response = await client.request(
                "POST", "/mcp", POST_HEADERS, initialize(), host="evil.example:80"
            )
            assert response.status == 403


async def test_a_missing_token_gets_401_with_www_authenticate_and_the_right_one_is_served() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge(tokens=TokenSet.of([(TOKEN, "test")])) as port:
            refused = await post(port, initialize())
            assert refused.status == 401
            assert (refused.header("www-authenticate") or "").startswith("Bearer")
            served = await post(port, initialize(), [("authorization", f"Bearer {TOKEN}")])
            assert served.status == 200


async def test_a_request_head_that_never_ends_is_cut_off_after_the_handshake_timeout() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge(handshake_timeout=0.3) as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            answer = b""
            while chunk := await stream.receive_some(65536):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 408")
            head, _, body = answer.partition(b"\r\n\r\n")
            assert b"content-type: application/json" in head.lower()
            error = json.loads(body)
            assert error["id"] is None and error["error"]["code"] == -32000
            assert error["error"]["data"]["reason"] == "http-timeout"


@pytest.mark.parametrize(
    ("raw", "status", "reason"),
    [
        (b"NOT HTTP AT ALL\r\n\r\n", 400, "bad-http-request"),
        (
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"x" * 70000 + b"\r\n\r\n",
            431,
            "head-too-large",
        ),
    ],
    ids=["malformed", "head-too-large"],
)
async def test_a_request_the_listener_cannot_read_is_refused_with_a_json_rpc_error_body(
    raw: bytes, status: int, reason: str
) -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(raw)
            answer = b""
            while chunk := await stream.receive_some(65536):
                answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status}".encode())
    assert b"content-type: application/json" in head.lower()
    error = json.loads(body)
    assert error["jsonrpc"] == "2.0" and error["id"] is None
    assert error["error"]["code"] == -32600 and error["error"]["data"]["reason"] == reason


async def test_cors_is_off_by_default_and_exposes_the_session_id_when_configured() -> None:
    with trio.fail_after(TIMEOUT):
        origin = "https://app.example"
        async with http_bridge(http=HttpOptions(cors_origins=frozenset({origin}))) as port:
            client = await RawHttp.open(port)
            preflight = await client.request(
                "OPTIONS", "/mcp", [("origin", origin), ("access-control-request-method", "POST")]
            )
            assert preflight.status == 204
            assert preflight.header("access-control-allow-origin") == origin
            response = await post(port, initialize(), [("origin", origin)])
            assert response.status == 200
            assert "mcp-session-id" in (response.header("access-control-expose-headers") or "")
        async with http_bridge() as port:
            response = await post(port, initialize())
            assert response.header("access-control-allow-origin") is None


async def test_the_oauth_metadata_document_is_served_and_named_by_401_answers() -> None:
    with trio.fail_after(TIMEOUT):
        metadata = {"authorization_servers": ["https://auth.example"]}
        async with http_bridge(
            tokens=TokenSet.of([(TOKEN, "test")]), http=HttpOptions(resource_metadata=metadata)
        ) as port:
            client = await RawHttp.open(port)
            document = await client.request("GET", "/.well-known/oauth-protected-resource/mcp")
            assert document.status == 200
            assert document.json()["authorization_servers"] == ["https://auth.example"]
            assert document.json()["resource"].endswith("/mcp")
            refused = await post(port, initialize())
            assert "resource_metadata=" in (refused.header("www-authenticate") or "")


async def test_behind_a_trusted_proxy_the_metadata_names_the_public_https_url() -> None:
    with trio.fail_after(TIMEOUT):
        metadata = {"authorization_servers": ["https://auth.example"]}
        options = HttpOptions(trust_proxy=True, resource_metadata=metadata)
        forwarded = [("x-forwarded-host", "mcp.example"), ("x-forwarded-proto", "https")]
        async with http_bridge(
            http=options, tokens=TokenSet.of([(TOKEN, "test")]), allow_hosts=frozenset({"mcp.example"})
        ) as port:
            client = await RawHttp.open(port)
            document = await client.request("GET", "/.well-known/oauth-protected-resource/mcp", forwarded)
            assert document.json()["resource"] == "https://mcp.example/mcp"
            refused = await post(port, initialize(), forwarded)
            assert refused.status == 401
            challenge = refused.header("www-authenticate") or ""
            assert (
                'resource_metadata="https://mcp.example/.well-known/oauth-protected-resource/mcp"'
                in challenge
            )


async def test_behind_a_trusted_proxy_the_forwarded_host_is_the_one_checked() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge(
            http=HttpOptions(trust_proxy=True), allow_hosts=frozenset({"mcp.example"})
        ) as port:
            client = await RawHttp.open(port)
            proxied = await client.request(
                "POST",
                "/mcp",
                [*POST_HEADERS, ("x-forwarded-host", "mcp.example")],
                initialize(),
                host="127.0.0.1",
            )
            assert proxied.status == 200
            client = await RawHttp.open(port)
            rebound = await client.request(
                "POST",
                "/mcp",
                [*POST_HEADERS, ("x-forwarded-host", "evil.example")],
                initialize(),
                host="127.0.0.1",
            )
            assert rebound.status == 403


# -- the 2026-07-28 era ------------------------------------------------------------------------


async def test_a_modern_request_is_answered_as_json_without_a_session() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge(child_mode="shared") as port:
            message = modern(1, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
            response = await post(port, message, modern_headers(message))
            assert response.status == 200
            assert response.header("mcp-session-id") is None
            assert response.messages()[0]["result"]["content"][0]["text"] == "hi"


async def test_a_modern_request_for_an_unknown_method_gets_404_with_the_json_rpc_error() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge(child_mode="shared") as port:
            message = modern(1, "no/such/method")
            response = await post(port, message, modern_headers(message))
            assert response.status == 404
            assert response.json()["error"]["code"] == -32601
            assert response.json()["id"] == 1


async def test_get_and_delete_with_a_modern_version_get_405() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge(child_mode="shared") as port:
            client = await RawHttp.open(port)
            got = await client.request(
                "GET", "/mcp", [("accept", "text/event-stream"), ("mcp-protocol-version", MODERN)]
            )
            assert got.status == 405
            deleted = await client.request("DELETE", "/mcp", [("mcp-protocol-version", MODERN)])
            assert deleted.status == 405


async def test_closing_a_modern_response_stream_cancels_the_request_at_the_child() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge(child_mode="shared") as port:
            message = modern("slow-1", "tools/call", {"name": "sleep", "arguments": {"seconds": 0.3}})
            message["params"]["_meta"]["progressToken"] = "t"
            client = await RawHttp.open(port)
            await client.send_request(
                "POST", "/mcp", [*POST_HEADERS, *modern_headers(message)], json.dumps(message).encode()
            )
            status, _ = await client.read_head()
            assert status == 200
            await client.next_events()  # the progress notification: the child has the request
            await client.aclose()
            stats = modern(2, "tools/call", {"name": "stats", "arguments": {}})
            while True:
                response = await post(port, stats, modern_headers(stats))
                seen = json.loads(response.messages()[0]["result"]["content"][0]["text"])
                if seen["cancelled"]:
                    break
                await trio.sleep(0.02)
            assert len(seen["cancelled"]) == 1


async def test_a_modern_listen_request_is_a_long_lived_event_stream_ending_with_its_result() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge(child_mode="shared") as port:
            message = modern(
                "listen-1", "subscriptions/listen", {"notifications": {"toolsListChanged": True}}
            )
            response = await post(port, message, modern_headers(message))
            assert response.status == 200
            messages = response.messages()
            assert messages[0]["method"] == "notifications/subscriptions/acknowledged"
            assert messages[-1]["id"] == "listen-1"


# -- the 2024-11-05 HTTP+SSE transport -----------------------------------------------------------


async def test_the_legacy_sse_transport_names_its_endpoint_and_answers_on_the_stream() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            stream = await RawHttp.open(port)
            await stream.send_request("GET", "/sse", [("accept", "text/event-stream")])
            status, _ = await stream.read_head()
            assert status == 200
            events, pending = await stream.next_events()
            assert events[0]["event"] == "endpoint"
            endpoint = events[0]["data"]
            assert endpoint.startswith("/messages?session_id=")
            client = await RawHttp.open(port)
            accepted = await client.request("POST", endpoint, [JSON_BODY], initialize("2024-11-05"))
            assert accepted.status == 202
            events, pending = await stream.next_events(pending)
            reply = json.loads(events[0]["data"])
            assert events[0]["event"] == "message" and reply["id"] == 1


async def test_a_legacy_sse_post_naming_no_stream_gets_404() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            client = await RawHttp.open(port)
            response = await client.request("POST", "/messages?session_id=nope", [JSON_BODY], initialize())
            assert response.status == 404


@pytest.mark.parametrize("flags", [()])
async def test_keep_alive_serves_several_requests_on_one_connection(flags: tuple[str, ...]) -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge(*flags) as port:
            session = await open_session(port)
            client = await RawHttp.open(port)
            for index in range(3):
                response = await client.request(
                    "POST", "/mcp", session.headers(), call(index + 10, "echo", text=str(index))
                )
                assert response.messages()[0]["id"] == index + 10


# -- more bad input, disconnects and stopping -------------------------------------------------------


async def test_a_chunked_body_is_cut_off_with_413_once_it_passes_the_limit() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge(limits=Limits(max_client_message=1000)) as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            head = (
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            chunk = b"x" * 600
            await stream.send_all(head + b"%x\r\n%s\r\n" % (len(chunk), chunk) * 2)
            answer = b""
            while chunk := await stream.receive_some(65536):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 413")


async def test_two_json_values_in_one_body_are_a_parse_error_and_newlines_between_tokens_are_fine() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            doubled = await post(port, b'{"jsonrpc":"2.0","method":"a"}{"jsonrpc":"2.0","method":"b"}')
            assert doubled.status == 400 and doubled.json()["error"]["code"] == -32700
            pretty = json.dumps(initialize(), indent=2).encode()
            assert b"\n" in pretty
            served = await post(port, pretty)
            assert served.status == 200 and served.messages()[0]["id"] == 1


async def test_two_origin_headers_are_refused_with_403() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            origins = [("origin", "http://localhost"), ("origin", "https://evil.example")]
            response = await post(port, initialize(), origins)
            assert response.status == 403


async def test_a_legacy_clients_disconnect_is_not_a_cancellation_and_its_reply_can_be_resumed() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            session = await open_session(port, RESUMING)
            message = call("long", "sleep", seconds=0.3)
            message["params"]["_meta"] = {"progressToken": "t"}
            client = await RawHttp.open(port)
            await client.send_request("POST", "/mcp", session.headers(), json.dumps(message).encode())
            assert (await client.read_head())[0] == 200
            events, _ = await client.next_events()
            last_id = events[-1]["id"]
            await client.aclose()  # gone before the reply
            resumed = await RawHttp.open(port)
            replay = await resumed.request(
                "GET",
                "/mcp",
                [("accept", "text/event-stream"), ("mcp-session-id", session.id), ("last-event-id", last_id)],
            )
            replies = [m for m in replay.messages() if m.get("id") == "long"]
            assert replies and replies[0]["result"]["content"][0]["text"] == "slept"
            stats = await session.post(call(9, "stats"))
            assert json.loads(stats.messages()[0]["result"]["content"][0]["text"])["cancelled"] == []


async def test_a_graceful_stop_lets_an_http_request_in_flight_finish_and_refuses_new_ones() -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), ["http://127.0.0.1:0/mcp"]) as daemon:
            port = port_of(daemon)
            session = await open_session(port)
            busy = await RawHttp.open(port)
            message = call("in-flight", "sleep", seconds=0.3)
            message["params"]["_meta"] = {"progressToken": "t"}
            await busy.send_request("POST", "/mcp", session.headers(), json.dumps(message).encode())
            assert (await busy.read_head())[0] == 200
            await busy.next_events()  # the child has the request
            daemon.stop()
            body = b""
            while (chunk := await busy.read_chunk()) is not None:
                body += chunk
            assert b'"in-flight"' in body and b"slept" in body
            await daemon.wait_stopped()
            with pytest.raises(OSError):
                await RawHttp.open(port)


async def test_a_reply_larger_than_the_replay_budget_still_reaches_the_client_whole() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge(http=HttpOptions(event_budget=1000)) as port:
            session = await open_session(port, RESUMING)
            message = call(4, "blob", size=200_000)
            message["params"]["_meta"] = {"progressToken": "t"}
            response = await session.post(message)
            (reply,) = [m for m in response.messages() if m.get("id") == 4]
            assert len(reply["result"]["content"][0]["text"]) == 200_000


async def test_an_https_listener_serves_a_session_to_a_client_that_verifies_its_certificate(
    tls_files: TlsFiles,
) -> None:
    with trio.fail_after(TIMEOUT):
        options = tls_files.listen_options()
        async with running_bridge(
            example_server(), ["https://127.0.0.1:0/mcp"], listen_options=options
        ) as daemon:
            [address] = daemon.addresses
            assert address.startswith("https://127.0.0.1:")
            async with connect(address, tls_files.connect_options()) as channel:
                await channel.send(initialize())
                assert (await channel.receive())["result"]["serverInfo"]["name"] == "mcp-bridge-example"
                await channel.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
                await channel.send(call(2, "echo", text="over https"))
                assert (await channel.receive())["result"]["content"][0]["text"] == "over https"


# -- found in review --------------------------------------------------------------------------


OTHER_TOKEN = "http-other-token-Qw5zRt8yUi3oPa7s"


async def test_a_client_with_a_bad_token_gets_401_before_its_body_is_read_or_continued() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge(tokens=TokenSet.of([(TOKEN, "test")])) as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Accept: application/json, text/event-stream\r\nExpect: 100-continue\r\n"
                b"Content-Length: 1000000\r\n\r\n"
            )
            answer = b""
            while chunk := await stream.receive_some(65536):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 401")  # no "100 Continue" first


async def test_a_token_sent_only_as_a_chunked_trailer_is_not_accepted() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge(tokens=TokenSet.of([(TOKEN, "test")])) as port:
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            body = json.dumps(initialize()).encode()
            await stream.send_all(
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                + b"%x\r\n%s\r\n0\r\nAuthorization: Bearer %s\r\n\r\n"
                % (len(body), body, TOKEN.encode())
            )
            answer = await stream.receive_some(65536)
            assert answer.startswith(b"HTTP/1.1 401")


async def test_an_upgrade_request_with_a_body_is_refused_and_its_body_never_parsed_as_a_request() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            smuggled = b"GET /smuggled HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            await stream.send_all(
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: other\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(smuggled), smuggled)
            )
            answer = b""
            while chunk := await stream.receive_some(65536):
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 400") and answer.count(b"HTTP/1.1 ") == 1


async def test_a_batch_whose_requests_share_an_id_is_refused_with_400() -> None:
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            session = await open_session(port, "2025-03-26")
            response = await session.post([call(7, "echo", text="a"), call(7, "echo", text="b")])
            assert response.status == 400
            assert response.json()["error"]["data"]["reason"] == "duplicate-id"


async def _open_slow_stream(
    port: int, session: Session, seconds: float
) -> tuple[RawHttp, list[dict[str, str]]]:
    """POST a ``sleep`` with a progress token; return its connection and its events up to the progress."""
    message = call(5, "sleep", seconds=seconds)
    message["params"]["_meta"] = {"progressToken": "t"}
    open_stream = await RawHttp.open(port)
    await open_stream.send_request("POST", "/mcp", session.headers(), json.dumps(message).encode())
    assert (await open_stream.read_head())[0] == 200
    events, pending = await open_stream.next_events()
    while not [event for event in events if event.get("data")]:
        more, pending = await open_stream.next_events(pending)
        events += more
    return open_stream, events


async def _resume(port: int, session: Session, last_event_id: str) -> Response:
    client = await RawHttp.open(port)
    headers = [
        ("accept", "text/event-stream"),
        ("mcp-session-id", session.id),
        ("last-event-id", last_event_id),
    ]
    return await client.request("GET", "/mcp", headers)


async def _rest_of(connection: RawHttp) -> tuple[bytes, bool]:
    """What is left of a response: its bytes, and whether it was cut (closed before its end)."""
    rest = b""
    try:
        while (chunk := await connection.read_chunk()) is not None:
            rest += chunk
    except h11.RemoteProtocolError:
        return rest, True
    return rest, False


async def test_resuming_a_stream_that_is_still_open_takes_it_over_and_the_reply_comes_once_on_the_resumption() -> (
    None
):
    # The client gave up on its POST's stream but the bridge has not noticed (the connection is
    # still open from its side, as when a middlebox dropped it): the resumption is not refused.
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            session = await open_session(port, RESUMING)
            open_stream, events = await _open_slow_stream(port, session, 1.0)
            progress = next(event for event in events if event.get("data"))
            resumed = await _resume(port, session, progress["id"])
            assert resumed.status == 200
            replayed = [event for event in resumed.events() if event.get("data")]
            assert [json.loads(event["data"]).get("id") for event in replayed] == [5]
            assert json.loads(replayed[0]["data"])["result"]["content"][0]["text"] == "slept"
            rest, cut = await _rest_of(open_stream)
            assert cut and b"slept" not in rest  # the old response stopped; the reply went once


async def test_a_client_that_drops_its_stream_and_resumes_at_once_gets_the_rest_exactly_once() -> None:
    # As the soak's resumers do: close the POST's connection and send the GET right after,
    # without waiting for the bridge to notice the close; three times, as a race it might win.
    with trio.fail_after(TIMEOUT):
        async with http_bridge() as port:
            session = await open_session(port, RESUMING)
            for _ in range(3):
                open_stream, events = await _open_slow_stream(port, session, 0.3)
                await open_stream.aclose()
                resumed = await _resume(port, session, events[-1]["id"])
                assert resumed.status == 200, resumed.body
                replies = [m for m in resumed.messages() if isinstance(m, dict) and m.get("id") == 5]
                assert len(replies) == 1 and "result" in replies[0]


async def test_a_session_cannot_be_used_with_another_token_than_the_one_that_opened_it() -> None:
    with trio.fail_after(TIMEOUT):
        tokens = TokenSet.of([(TOKEN, "alice"), (OTHER_TOKEN, "bob")])
        async with http_bridge(tokens=tokens) as port:
            alice = [("authorization", f"Bearer {TOKEN}")]
            opened = await post(port, initialize(), alice)
            session = [("mcp-session-id", opened.header("mcp-session-id") or "")]
            bob = [("authorization", f"Bearer {OTHER_TOKEN}"), *session]
            assert (await post(port, call(2, "echo", text="x"), bob)).status == 404
            assert (await post(port, call(2, "echo", text="x"), [*alice, *session])).status == 200


async def test_a_connection_that_never_sent_a_byte_does_not_hold_up_a_graceful_stop() -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), ["http://127.0.0.1:0/mcp"]) as daemon:
            silent = await trio.open_tcp_stream("127.0.0.1", port_of(daemon))
            await open_session(port_of(daemon))
            daemon.stop()
            with trio.fail_after(3):  # the drain is 10 s: waiting on the silent client would show
                await daemon.wait_stopped()
            assert await silent.receive_some(1) == b""


async def test_running_out_of_file_descriptors_pauses_accepting_and_never_ends_the_daemon() -> None:
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--listen", "http://127.0.0.1:0/mcp", "--", *example_server(), max_open_files=64
        ) as bridge:
            port = int(bridge.addresses[0].rsplit(":", 1)[1].split("/")[0])
            flood = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(80)]  # over 64
            await poll(lambda: any("accept failed" in line for line in bridge.stderr_lines))
            for stream in flood:
                await stream.aclose()
            assert bridge.process.returncode is None
            response = await post(port, initialize())  # serving again once descriptors are free
            assert response.status == 200


def test_cors_origins_are_kept_as_they_are_compared_whoever_builds_the_options() -> None:
    assert HttpOptions(cors_origins=frozenset({"https://App.example/"})).cors_origins == {
        "https://app.example"
    }
