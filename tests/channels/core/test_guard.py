"""The Host, Origin and bearer-token checks of an HTTP request (channels/_core/guard.py), sans-IO.

The same rules over real sockets are in test_websocket.py; here every corner is one table row.
The rules are docs/design.md §5.7: a Host allowlist (so DNS rebinding fails), an Origin allowlist
(a missing Origin passes), and bearer tokens compared in constant time.
"""

from __future__ import annotations

import json

import pytest

from channels import TokenSet
from channels._core.guard import Rejection, RequestGuard, header_values, hostname_of
from channels._http.server.request import single_fields

TOKEN = "guard-test-token-4mYq7Rr2Lx"
OTHER_TOKEN = "guard-other-token-9KpW3sNv1T"
TOKENS = TokenSet.of([(TOKEN, "first"), (OTHER_TOKEN, "second")])


def loopback(
    *,
    allow_hosts: set[str] | None = None,
    allow_origins: set[str] | None = None,
    tokens: TokenSet | None = None,
) -> RequestGuard:
    """The guard of a listener bound to 127.0.0.1."""
    return RequestGuard.create(
        loopback=True,
        bind_host="127.0.0.1",
        allow_hosts=frozenset(allow_hosts or ()),
        allow_origins=frozenset(allow_origins or ()),
        tokens=tokens,
    )


def status(outcome: Rejection | str | None) -> int:
    """The HTTP status of an outcome: the rejection's, or 101 for a request that passes."""
    return outcome.status if isinstance(outcome, Rejection) else 101


# -- hostname_of ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "name"),
    [
        ("localhost", "localhost"),
        ("localhost:7301", "localhost"),
        ("LocalHost.:7301", "localhost"),
        ("  Example.ORG  ", "example.org"),
        ("127.0.0.1", "127.0.0.1"),
        ("127.0.0.1:80", "127.0.0.1"),
        ("[::1]", "::1"),
        ("[::1]:7301", "::1"),
        ("[2001:DB8::5]:443", "2001:db8::5"),
        # bare IPv6 addresses (a bind address from ws://[::1]:0/mcp, an --allow-host): no port
        ("::1", "::1"),
        ("2001:db8::5", "2001:db8::5"),
        ("fe80::1:2", "fe80::1:2"),
        # not a port: kept whole, so it matches no allowed name
        ("localhost:http", "localhost:http"),
        ("attacker.example:7301", "attacker.example"),
    ],
)
def test_hostname_of_strips_port_brackets_case_and_trailing_dot(value: str, name: str) -> None:
    assert hostname_of(value) == name


def test_header_values_are_every_value_of_a_name_in_order() -> None:
    headers = [(b"origin", b"a"), (b"x", b"y"), (b"origin", b"b")]  # names lower-case, as parsed
    assert header_values(headers, b"origin") == [b"a", b"b"]
    assert header_values(headers, b"missing") == []


# -- Host ---------------------------------------------------------------------------------------


def test_a_request_without_host_is_refused_with_400() -> None:
    outcome = loopback().check(None, [])
    assert isinstance(outcome, Rejection)
    assert (outcome.status, outcome.reason) == (400, "bad-host")


@pytest.mark.parametrize(
    "host", ["localhost:7301", "127.0.0.1", "[::1]:7301", "LOCALHOST", "localhost.:7301"]
)
def test_loopback_names_pass_on_a_loopback_bind(host: str) -> None:
    assert loopback().check(host, []) is None


@pytest.mark.parametrize(
    "host",
    [
        "attacker.example:7301",
        "localhost.attacker.example",
        "127.0.0.2",
        "[::2]:7301",
        "0.0.0.0",
        "localhost:http",
        "",
    ],
)
def test_any_other_host_is_refused_with_403_on_a_loopback_bind(host: str) -> None:
    outcome = loopback().check(host, [])
    assert isinstance(outcome, Rejection)
    assert (outcome.status, outcome.reason) == (403, "host-not-allowed")


def test_allow_hosts_add_names_on_a_loopback_bind_without_removing_the_loopback_ones() -> None:
    guard = loopback(allow_hosts={"MCP.internal:7301", "[fd00::7]"})
    assert [
        status(guard.check(host, []))
        for host in (
            "mcp.internal",
            "mcp.internal:9999",
            "[fd00::7]:7301",
            "localhost",
            "other.internal",
        )
    ] == [101, 101, 101, 101, 403]


def test_any_host_passes_on_a_non_loopback_bind_without_allow_hosts() -> None:
    guard = RequestGuard.create(
        loopback=False, bind_host="0.0.0.0", allow_hosts=frozenset(), allow_origins=frozenset(), tokens=None
    )
    assert guard.check("mcp.example.org:443", []) is None


def test_with_allow_hosts_a_non_loopback_bind_admits_them_and_its_own_address_only() -> None:
    guard = RequestGuard.create(
        loopback=False,
        bind_host="192.0.2.10",
        allow_hosts=frozenset({"mcp.example.org"}),
        allow_origins=frozenset(),
        tokens=None,
    )
    assert [
        status(guard.check(host, []))
        for host in (
            "mcp.example.org:443",
            "192.0.2.10:7301",
            "attacker.example",
            "localhost",
        )
    ] == [101, 101, 403, 403]


def test_a_non_loopback_ipv6_bind_address_is_an_allowed_host() -> None:
    # The listener passes the address as urlsplit gives it, without brackets.
    guard = RequestGuard.create(
        loopback=False,
        bind_host="2001:db8::5",
        allow_hosts=frozenset({"mcp.example.org", "2001:db8::6"}),
        allow_origins=frozenset(),
        tokens=None,
    )
    assert [
        status(guard.check(host, []))
        for host in (
            "[2001:db8::5]:7301",
            "[2001:db8::6]",
            "mcp.example.org",
            "[2001:db8::]:7301",
        )
    ] == [101, 101, 101, 403]


# -- Origin -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "origin",
    [
        b"http://localhost",
        b"http://localhost:5173",
        b"https://127.0.0.1:8443",
        b"http://[::1]:3000",
        b"HTTP://LOCALHOST:1",
        b"http://localhost/",
    ],
)
def test_a_loopback_origin_passes_on_a_loopback_bind(origin: bytes) -> None:
    assert loopback().check("localhost", [(b"origin", origin)]) is None


@pytest.mark.parametrize(
    "origin",
    [
        b"https://evil.example",
        b"http://localhost.evil.example",
        b"http://localhost@evil.example",
        b"http://evil.example#@localhost",
        b"null",
        b"file://",
        b"ws://localhost",
        b"localhost",
        b"http://localhost/path",
        b"chrome-extension://abcdef",
        b"",
    ],
)
def test_any_other_origin_is_refused_with_403_on_a_loopback_bind(origin: bytes) -> None:
    outcome = loopback().check("localhost", [(b"origin", origin)])
    assert isinstance(outcome, Rejection)
    assert (outcome.status, outcome.reason) == (403, "origin-not-allowed")


def test_a_request_without_origin_passes() -> None:
    assert loopback().check("localhost", [(b"user-agent", b"curl/8")]) is None


def test_two_origin_headers_are_refused_even_when_both_are_allowed() -> None:
    outcome = loopback().check(
        "localhost", [(b"origin", b"http://localhost"), (b"origin", b"http://localhost")]
    )
    assert isinstance(outcome, Rejection)
    assert outcome.status == 403 and "more than one Origin" in outcome.message


def test_allow_origins_are_compared_case_insensitively_and_without_a_trailing_slash() -> None:
    guard = loopback(allow_origins={"https://App.example/", "null"})
    assert [
        status(guard.check("localhost", [(b"origin", origin)]))
        for origin in (
            b"https://app.example",
            b"HTTPS://APP.EXAMPLE/",
            b"null",
            b"https://app.example:443",
            b"http://app.example",
            b"https://app.example.evil",
        )
    ] == [101, 101, 101, 403, 403, 403]


def test_on_a_non_loopback_bind_only_listed_origins_pass_not_loopback_ones() -> None:
    guard = RequestGuard.create(
        loopback=False,
        bind_host="0.0.0.0",
        allow_hosts=frozenset(),
        allow_origins=frozenset({"https://app.example"}),
        tokens=TOKENS,
    )
    bearer = (b"authorization", f"Bearer {TOKEN}".encode())
    assert [
        status(guard.check("mcp.example.org", [(b"origin", origin), bearer]))
        for origin in (
            b"https://app.example",
            b"http://localhost:5173",
        )
    ] == [101, 403]


# -- bearer tokens ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("authorization", "label"),
    [
        (f"Bearer {TOKEN}", "first"),
        (f"bearer {TOKEN}", "first"),
        (f"BEARER   {OTHER_TOKEN}  ", "second"),
    ],
)
def test_a_right_token_passes_and_is_named_by_its_label(authorization: str, label: str) -> None:
    outcome = loopback(tokens=TOKENS).check("localhost", [(b"authorization", authorization.encode())])
    assert outcome == label


@pytest.mark.parametrize(
    "headers",
    [
        [],
        [(b"authorization", b"Bearer guard-wrong-token-0000000")],
        [(b"authorization", f"Basic {TOKEN}".encode())],
        [(b"authorization", TOKEN.encode())],
        [(b"authorization", b"Bearer")],
        [(b"authorization", f"Bearer {TOKEN}x".encode())],
        [(b"authorization", f"Bearer {TOKEN[:-1]}".encode())],
        [(b"authorization", f"Bearer {TOKEN}".encode()), (b"authorization", f"Bearer {TOKEN}".encode())],
    ],
    ids=["missing", "wrong", "basic", "no-scheme", "empty", "longer", "shorter", "twice"],
)
def test_a_missing_or_wrong_token_is_refused_with_401_and_www_authenticate(
    headers: list[tuple[bytes, bytes]],
) -> None:
    outcome = loopback(tokens=TOKENS).check("localhost", headers)
    assert isinstance(outcome, Rejection)
    assert (outcome.status, outcome.reason) == (401, "unauthorized")
    assert (b"www-authenticate", b'Bearer realm="mcp-bridge"') in outcome.headers()
    assert TOKEN.encode() not in outcome.body() and TOKEN not in outcome.message


def test_host_is_checked_before_origin_and_origin_before_the_token() -> None:
    guard = loopback(tokens=TOKENS)
    foreign_origin = (b"origin", b"https://evil.example")
    assert status(guard.check("attacker.example", [foreign_origin])) == 403
    assert guard.check("attacker.example", [foreign_origin]).reason == "host-not-allowed"  # type: ignore[union-attr]
    assert guard.check("localhost", [foreign_origin]).reason == "origin-not-allowed"  # type: ignore[union-attr]
    right_token = (b"authorization", f"Bearer {TOKEN}".encode())
    assert status(guard.check("localhost", [foreign_origin, right_token])) == 403


def test_without_tokens_an_authorization_header_is_ignored() -> None:
    assert loopback().check("localhost", [(b"authorization", b"Bearer anything")]) is None


# -- the refusal itself ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rejection",
    [
        Rejection(400, "bad-host", "Bad Request: x"),
        Rejection(403, "origin-not-allowed", "Forbidden: y"),
        Rejection(401, "unauthorized", "Unauthorized: z"),
    ],
)
def test_a_refusal_body_is_a_json_rpc_error_with_id_null_and_a_reason(rejection: Rejection) -> None:
    body = json.loads(rejection.body())
    assert body == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32000, "message": rejection.message, "data": {"reason": rejection.reason}},
    }
    headers = dict(rejection.headers())
    assert headers[b"content-type"] == b"application/json"
    assert (b"www-authenticate" in headers) == (rejection.status == 401)


@pytest.mark.parametrize(
    "headers",
    [
        [],
        [(b"origin", b"http://localhost:3000")],
        [(b"origin", b"https://evil.example")],
        [(b"origin", b"http://localhost:3000"), (b"origin", b"http://localhost:3000")],
        [(b"authorization", f"Bearer {TOKEN}".encode())],
        [(b"authorization", f"Bearer {TOKEN}".encode()), (b"authorization", b"Bearer x")],
        [(b"origin", b"http://127.0.0.1"), (b"authorization", f"Bearer {OTHER_TOKEN}".encode())],
    ],
)
def test_the_checks_decide_alike_given_the_headers_sent_once_by_name(
    headers: list[tuple[bytes, bytes]],
) -> None:
    for guard in (loopback(), loopback(allow_origins={"https://evil.example"}), loopback(tokens=TOKENS)):
        fields = single_fields(headers)
        assert guard.check("localhost", headers, fields) == guard.check("localhost", headers)
