"""What a 2026-07-28 POST remembers from the last ones is what it would work out again.

Sans-IO: :class:`~channels._http.server.modern.ModernPosts` remembers each connection's peer
(:attr:`~channels._http.server.call.HttpCall.peer`, by the connection's address record, its
credential, ``Origin`` and ``User-Agent``), and :func:`~channels._mcp.headers.routing_header_texts`
reads every routing header in one pass (:func:`~channels._mcp.modern.check_modern_request` looks
them up in the request's fields); each against what it stands for, on requests parsed by the
listener's own parser.
"""

from __future__ import annotations

import itertools
from typing import Any, cast

from channels._core.channel import PeerInfo
from channels._core.oauth import Principal
from channels._core.options import HttpOptions
from channels._core.ticker import Ticker
from channels._http.server.call import HttpCall
from channels._http.server.modern import PEERS, ModernPosts
from channels._http.server.request import Parsing, Request, single_fields
from channels._mcp.headers import ROUTING_HEADERS, header_texts, routing_header_texts
from channels._mcp.modern import check_modern_request

BODY = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'


def parsed(*headers: bytes) -> Request:
    """A POST with ``headers`` (whole lines), read by the listener's parser."""
    parsing = Parsing(1 << 20, None)
    head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"".join(line + b"\r\n" for line in headers)
    parsing.feed(head + b"Content-Length: %d\r\n\r\n" % len(BODY) + BODY)
    request, _ = parsing.done.popleft()
    assert isinstance(request, Request)
    return request


def call_of(request: Request, address: PeerInfo, credential: str | None, principal: Any = None) -> HttpCall:
    nothing = cast(Any, None)  # no connection, handler or nursery: only the peer is worked out
    return HttpCall(nothing, request, address, credential, nothing, nothing, (), principal)


def test_a_2026_07_28_post_gets_the_peer_its_own_headers_and_token_make_whatever_came_before() -> None:
    posts = ModernPosts(HttpOptions(), Ticker())
    alice = Principal(issuer="https://issuer", subject="alice", client_id="app", scopes=frozenset({"a"}))
    bob = Principal(issuer="https://issuer", subject="bob", client_id="app", scopes=frozenset({"a"}))
    variants = [
        (),
        (b"Origin: https://one.example",),
        (b"Origin: https://two.example",),
        (b"Origin: https://one.example", b"Origin: https://two.example"),  # twice: no Origin
        (b"User-Agent: first/1.0",),
        (b"User-Agent: second/2.0", b"Origin: https://one.example"),
    ]
    tokens: list[tuple[str | None, Principal | None]] = [
        (None, None),
        ("token a", None),
        ("alice", alice),
        ("bob", bob),
    ]
    connections = [PeerInfo("http", "127.0.0.1:40001"), PeerInfo("http", "127.0.0.1:40002")]
    sequence = list(itertools.product(connections, tokens, variants))
    for _ in range(2):  # each worked out the first time, remembered (or not) the second
        for address, (credential, principal), headers in [*sequence, *reversed(sequence)]:
            call = call_of(parsed(*headers), address, credential, principal)
            assert posts._peer(call) == call.peer, (address, credential, headers)


def test_the_remembered_peers_are_bounded_and_still_right_past_the_bound() -> None:
    posts = ModernPosts(HttpOptions(), Ticker())
    request = parsed(b"User-Agent: client/1.0")
    for number in range(3 * PEERS):
        call = call_of(request, PeerInfo("http", f"127.0.0.1:{number}"), None)
        assert posts._peer(call) == call.peer
        assert len(posts._peers) <= PEERS


def test_one_pass_finds_every_routing_header_as_a_lookup_of_each_finds_it() -> None:
    values = [(), (b"2026-07-28",), (b" tools/call\t",), (b"a", b"b"), (b"=?base64?ZWNobw==?=",)]
    for version, method, name in itertools.product(values, repeat=3):
        headers = [
            (b"host", b"127.0.0.1"),
            *((b"mcp-protocol-version", value) for value in version),
            (b"accept", b"application/json"),
            *((b"mcp-method", value) for value in method),
            *((b"mcp-name", value) for value in name),
        ]
        found = routing_header_texts(headers)
        for header in ROUTING_HEADERS:
            assert found.get(header, []) == header_texts(headers, header), (header, headers)


def test_the_routing_headers_looked_up_in_the_fields_are_judged_as_when_scanned() -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "_meta": meta}},
        {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {}},
        {"jsonrpc": "2.0", "method": "notifications/x", "params": {"_meta": {}}},
    ]
    values = [
        (),
        (b"2026-07-28",),
        (b" tools/call\t",),
        (b"a", b"b"),
        (b"echo\x7f",),
        (b"=?base64?ZWNobw==?=",),
    ]
    for message, (version, method, name) in itertools.product(messages, itertools.product(values, repeat=3)):
        headers = [
            (b"host", b"127.0.0.1"),
            *((b"mcp-protocol-version", value) for value in version),
            *((b"mcp-method", value) for value in method),
            *((b"mcp-name", value) for value in name),
        ]
        scanned = check_modern_request(message, headers)
        looked_up = check_modern_request(message, headers, fields=single_fields(headers))
        assert looked_up == scanned, (message, headers)
