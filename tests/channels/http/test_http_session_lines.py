"""A legacy HTTP session forwards canonical lines: what is written is the canonical encoding either way.

A POST body that is its message's canonical line reaches the child as posted, and a child's
canonical reply line becomes the response body as is, neither encoded again; anything else, and a
reply the relay changes (a ``tools/list`` filtered by scopes), is encoded afresh (docs/design.md
§5.2). Real bridge, real child (a script that answers each request with the exact line it read, or
the example server), raw HTTP client; encoding is counted by wrapping the encoder where the session
and the child's channel call it.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2 as httpx
import pytest
import trio

from bridge import ChildSpec, Daemon, ServeConfig
from channels import decode, encode, parse_address
from channels._core import jsonrpc
from channels._http.server import session as session_module

TIMEOUT = 30  # seconds for a whole I/O test: a daemon, a child, a few round trips
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
VERSION = "2025-06-18"

# Answers initialize, then each request with the line it read, as a string; its replies are compact
# JSON (canonical for these messages), or spaced for the method "spaced".
RAW_ECHO = r"""
import json, sys
for line in sys.stdin.buffer:
    message = json.loads(line)
    if "id" not in message or "method" not in message:
        continue
    if message["method"] == "initialize":
        version = message["params"]["protocolVersion"]
        result = {"protocolVersion": version, "capabilities": {}, "serverInfo": {"name": "raw", "version": "1"}}
    else:
        result = {"raw": line.rstrip(b"\n").decode()}
    separators = (", ", ": ") if message["method"] == "spaced" else (",", ":")
    reply = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}, separators=separators, ensure_ascii=False)
    sys.stdout.buffer.write(reply.encode() + b"\n")
    sys.stdout.flush()
"""

NOT_CANONICAL_BODIES = [
    b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
    b'{"jsonrpc":"2.0","id":2,"method":"caf\\u00e9","params":{"s":"\\/"}}',
    b'{"jsonrpc":"2.0","id":3,"method":"big","params":{"n":123456789012345678901234567890}}',
]


@asynccontextmanager
async def session_to(
    child: tuple[str, ...], **config: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, str, dict[str, str]]]:
    """A bridge serving ``child`` over HTTP, a client, its URL and an initialised session's headers."""
    serve = ServeConfig(
        listen=(parse_address("http://127.0.0.1:0/mcp"),), child=ChildSpec(argv=child), **config
    )
    daemon = Daemon(serve)
    async with trio.open_nursery() as nursery:
        await nursery.start(daemon.run)
        try:
            url = daemon.addresses[0]
            async with httpx.AsyncClient(timeout=TIMEOUT) as client:
                params = {
                    "protocolVersion": VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                }
                initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
                response = await client.post(url, headers=HEADERS, json=initialize)
                assert response.status_code == 200, response.text
                headers = {**HEADERS, "mcp-session-id": response.headers["mcp-session-id"]}
                headers["mcp-protocol-version"] = VERSION
                yield client, url, headers
        finally:
            daemon.stop()


@pytest.fixture
def encoded(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The messages encoded from now on by the session (replies) and by the child's channel (requests)."""
    seen: list[Any] = []

    def spy(message: Any, **options: Any) -> bytes:
        seen.append(message)
        return real(message, **options)

    real = jsonrpc.encode
    monkeypatch.setattr(jsonrpc, "encode", spy)  # what encode_lines calls for a line not given
    monkeypatch.setattr(session_module, "encode", spy)
    return seen


async def test_a_canonical_post_body_reaches_the_child_byte_for_byte_as_posted_not_encoded_again(
    encoded: list[Any],
) -> None:
    body = encode({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "é", "n": [1, 2.5]}})
    body = body.rstrip(b"\n")
    with trio.fail_after(TIMEOUT):
        async with session_to((sys.executable, "-c", RAW_ECHO)) as (client, url, headers):
            response = await client.post(url, headers=headers, content=body)
            assert decode(response.content)["result"]["raw"].encode() == body
    assert not [message for message in encoded if message.get("id") == 7]  # before: the request was


async def test_post_bodies_with_spaces_escapes_or_big_integers_reach_the_child_canonical() -> None:
    with trio.fail_after(TIMEOUT):
        async with session_to((sys.executable, "-c", RAW_ECHO)) as (client, url, headers):
            for body in NOT_CANONICAL_BODIES:
                response = await client.post(url, headers=headers, content=body)
                raw = decode(response.content)["result"]["raw"].encode()
                assert raw == encode(decode(body), newline=False)  # the big integer exact, too


async def test_a_child_reply_line_becomes_the_response_body_as_is_and_a_spaced_one_is_encoded_afresh(
    encoded: list[Any],
) -> None:
    with trio.fail_after(TIMEOUT):
        async with session_to((sys.executable, "-c", RAW_ECHO)) as (client, url, headers):
            request = {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"s": 'a"b\\c/é'}}
            response = await client.post(url, headers=headers, json=request)
            raw = encode(request, newline=False).decode()
            written = {"jsonrpc": "2.0", "id": 8, "result": {"raw": raw}}
            assert response.content == encode(written, newline=False)  # the child's line
            assert written not in encoded  # before: the reply was encoded again
            spaced = await client.post(
                url, headers=headers, json={"jsonrpc": "2.0", "id": 9, "method": "spaced"}
            )
            assert spaced.content == encode(decode(spaced.content), newline=False)
            assert b" " not in spaced.content
            assert {"jsonrpc": "2.0", "id": 9, "result": decode(spaced.content)["result"]} in encoded


async def test_a_tools_list_reply_filtered_by_scopes_is_encoded_afresh_as_the_response_body(
    encoded: list[Any],
) -> None:
    example = (sys.executable, "-m", "bridge.example_server")
    with trio.fail_after(TIMEOUT):
        async with session_to(example, tool_scopes={"spawn_*": ["mcp:admin"]}) as (client, url, headers):
            request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            response = await client.post(url, headers=headers, json=request)
            assert response.content == encode(decode(response.content), newline=False)
            assert b'"echo"' in response.content
            assert b"spawn_grandchild" not in response.content
            assert decode(response.content) in encoded
