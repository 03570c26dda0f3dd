"""The rules for an HTTP request to an MCP endpoint before it reaches a child (channels/_mcp/admission.py).

Sans-IO: every rule is a call with headers and a body. The cases named after a conformance check
(CONF ...) send what modelcontextprotocol/conformance sends in src/scenarios/server/stateless.ts
and http-standard-headers.ts. Header names are given lower-case, as the HTTP parser hands them
over: that names in any case on the wire reach these rules (CONF ServerAcceptsLowercaseHeaderName,
ServerAcceptsUppercaseHeaderName) is checked through a real listener in
tests/channels/http/test_http_edges.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from channels._mcp.admission import (
    ASSUMED_VERSION,
    HEADER_MISMATCH,
    LEGACY_VERSIONS,
    MISSING_CAPABILITY,
    MODERN_VERSIONS,
    UNSUPPORTED_VERSION,
    HttpRefusal,
    check_legacy_batch,
    check_legacy_version,
    check_modern_request,
    check_param_headers,
    check_post_headers,
    decode_header_value,
    encode_header_value,
    era_of,
    method_not_allowed,
    modern_request_headers,
    parse_body,
    status_for_error,
    tool_headers_from_list,
    x_mcp_headers,
)

MODERN = "2026-07-28"
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
INFO_KEY = "io.modelcontextprotocol/clientInfo"

Headers = list[tuple[bytes, bytes]]


def meta(version: str = MODERN, **extra: Any) -> dict[str, Any]:
    """A complete per-request _meta, as the conformance suite's withRequestMeta builds it."""
    return {
        VERSION_KEY: version,
        INFO_KEY: {"name": "conformance-test-client", "version": "1.0.0"},
        CAPABILITIES_KEY: {},
        **extra,
    }


def request(
    method: str, params: dict[str, Any] | None = None, id: Any = 1, **meta_extra: Any
) -> dict[str, Any]:
    """A modern request: params plus a complete _meta."""
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": method,
        "params": {**(params or {}), "_meta": meta(**meta_extra)},
    }


def headers_for(message: dict[str, Any], **replace: str | None) -> Headers:
    """The conformant headers for a modern message, with some replaced (None leaves one out)."""
    names = {"version": b"mcp-protocol-version", "method": b"mcp-method", "name": b"mcp-name"}
    result = [
        (name, value)
        for name, value in modern_request_headers(message)
        if name not in {names[k] for k in replace}
    ]
    result += [(names[key], value.encode("latin-1")) for key, value in replace.items() if value is not None]
    return result


def code(outcome: HttpRefusal | None) -> int | None:
    """The JSON-RPC code of a refusal, or None for a request that passes."""
    return None if outcome is None else outcome.code


def body_of(refusal: HttpRefusal) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(refusal.body())
    return result


# -- The refusal ----------------------------------------------------------------------------------


def test_a_refusal_body_is_a_json_rpc_error_with_its_reason_and_data_under_error_data() -> None:
    refusal = HttpRefusal(
        400, UNSUPPORTED_VERSION, "Unsupported protocol version", "why", 7, {"requested": "x"}
    )
    assert body_of(refusal) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"requested": "x", "reason": "why"},
        },
    }


def test_a_refusal_without_a_request_id_has_id_null() -> None:
    assert body_of(HttpRefusal(406, -32000, "no", "not-acceptable"))["id"] is None


def test_a_refusals_reason_is_not_overridden_by_its_data() -> None:
    assert (
        body_of(HttpRefusal(400, -32000, "no", "mine", data={"reason": "theirs"}))["error"]["data"]["reason"]
        == "mine"
    )


def test_response_headers_are_the_json_content_type_and_the_refusals_own() -> None:
    assert method_not_allowed(b"GET, POST, DELETE").response_headers() == [
        (b"content-type", b"application/json"),
        (b"allow", b"GET, POST, DELETE"),
    ]


def test_a_method_not_allowed_refusal_is_405_allowing_post_by_default() -> None:
    refusal = method_not_allowed()
    assert (refusal.status, refusal.headers) == (405, ((b"allow", b"POST"),))


# -- Accept and Content-Type ----------------------------------------------------------------------

JSON_BODY = (b"content-type", b"application/json")


def post_status(accept: list[bytes], content_type: list[bytes] | None = None) -> int:
    """The status check_post_headers answers (200 for a POST that passes)."""
    headers = [(b"accept", value) for value in accept]
    headers += [
        (b"content-type", value)
        for value in (content_type if content_type is not None else [b"application/json"])
    ]
    refusal = check_post_headers(headers)
    return 200 if refusal is None else refusal.status


def test_a_post_whose_accept_lists_both_types_passes() -> None:
    assert post_status([b"application/json, text/event-stream"]) == 200


def test_a_post_without_text_event_stream_in_accept_is_refused_with_406() -> None:
    refusal = check_post_headers([(b"accept", b"application/json"), JSON_BODY])
    assert refusal is not None
    assert (refusal.status, refusal.code, refusal.reason) == (406, -32000, "not-acceptable")


def test_a_post_without_application_json_in_accept_is_refused_with_406() -> None:
    assert post_status([b"text/event-stream"]) == 406


def test_a_post_without_accept_is_refused_with_406() -> None:
    assert post_status([]) == 406


@pytest.mark.parametrize(
    "accept",
    [b"*/*", b"application/*, text/*", b"application/json, text/*", b"application/*, text/event-stream"],
)
def test_wildcards_in_accept_admit_both_types(accept: bytes) -> None:
    assert post_status([accept]) == 200


def test_accept_media_types_are_case_insensitive_and_their_parameters_ignored() -> None:
    assert post_status([b"Application/JSON; charset=utf-8 , TEXT/Event-Stream;q=0.5"]) == 200


@pytest.mark.parametrize(
    "accept",
    [
        b"*/*, text/event-stream;q=0",
        b"application/json;q=0, text/event-stream, */*",
        b"text/*;q=0.000, application/json",
    ],
)
def test_a_range_with_q_zero_refuses_its_type_the_most_specific_range_deciding(accept: bytes) -> None:
    assert post_status([accept]) == 406


def test_an_unreadable_q_value_counts_as_one() -> None:
    assert post_status([b"application/json;q=high, text/event-stream;q=2"]) == 200


def test_accept_over_two_header_lines_is_one_list() -> None:
    assert post_status([b"application/json", b"text/event-stream"]) == 200


def test_accept_is_checked_before_content_type() -> None:
    assert post_status([b"text/html"], [b"text/plain"]) == 406


@pytest.mark.parametrize(
    "content_type",
    [b"text/plain", b"text/plain; a=application/json", b"application/json-seq", b"application/jsonx", b""],
)
def test_a_post_whose_content_type_is_not_application_json_is_refused_with_415(content_type: bytes) -> None:
    refusal = check_post_headers(
        [(b"accept", b"application/json, text/event-stream"), (b"content-type", content_type)]
    )
    assert refusal is not None
    assert (refusal.status, refusal.code, refusal.reason) == (415, -32000, "unsupported-media-type")


def test_a_post_without_content_type_is_refused_with_415() -> None:
    assert post_status([b"*/*"], []) == 415


def test_a_post_with_two_content_type_headers_is_refused_with_415() -> None:
    assert post_status([b"*/*"], [b"application/json", b"application/json"]) == 415


@pytest.mark.parametrize(
    "content_type", [b"application/json; charset=utf-8", b"Application/JSON ;charset=UTF-8"]
)
def test_a_json_content_type_with_a_charset_passes(content_type: bytes) -> None:
    assert post_status([b"*/*"], [content_type]) == 200


# -- The body -------------------------------------------------------------------------------------


def test_a_body_holding_one_message_is_that_message() -> None:
    assert parse_body(b' {"jsonrpc":"2.0","id":1,"method":"tools/list"}\r\n') == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
    }


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"{",
        b"not json",
        b'{"jsonrpc":"2.0","method":"x","params":{"a":NaN}}',
        b"\xff\xfe",
        b'{"jsonrpc":"2.0","method":"x","params":{"a":"\\ud800"}}',
        b'{"jsonrpc":"2.0","method":"x"} {"jsonrpc":"2.0","method":"y"}',
        b"[" * 100_000,
    ],
)
def test_a_body_that_is_not_acceptable_json_is_refused_with_400_and_minus_32700(body: bytes) -> None:
    refusal = parse_body(body)
    assert isinstance(refusal, HttpRefusal)
    assert (refusal.status, refusal.code) == (400, -32700)


@pytest.mark.parametrize(
    "body",
    [b"3", b'"tools/list"', b"null", b'{"jsonrpc":"2.0"}', b'{"jsonrpc":"2.0","id":null,"method":"x"}'],
)
def test_json_that_is_not_a_message_is_refused_with_400_and_minus_32600(body: bytes) -> None:
    refusal = parse_body(body)
    assert isinstance(refusal, HttpRefusal)
    assert (refusal.status, refusal.code) == (400, -32600)


def test_an_invalid_message_with_a_readable_id_is_refused_naming_that_id() -> None:
    refusal = parse_body(b'{"jsonrpc":"1.0","id":"r-9","method":"tools/list"}')
    assert isinstance(refusal, HttpRefusal)
    assert (refusal.code, refusal.request_id) == (-32600, "r-9")


def test_an_array_of_messages_is_returned_as_a_batch() -> None:
    batch = parse_body(b'[{"jsonrpc":"2.0","id":1,"method":"a"}, {"jsonrpc":"2.0","method":"b"}]')
    assert batch == [{"jsonrpc": "2.0", "id": 1, "method": "a"}, {"jsonrpc": "2.0", "method": "b"}]


def test_an_empty_batch_is_refused_with_minus_32600() -> None:
    refusal = parse_body(b" [ ] ")
    assert isinstance(refusal, HttpRefusal)
    assert (refusal.code, refusal.reason) == (-32600, "empty-batch")


@pytest.mark.parametrize(
    "element", [b"3", b"[]", b'{"jsonrpc":"2.0"}', b'{"jsonrpc":"2.0","id":[1],"method":"x"}']
)
def test_a_batch_with_an_element_that_is_not_a_message_is_refused_with_minus_32600(element: bytes) -> None:
    refusal = parse_body(b'[{"jsonrpc":"2.0","method":"ok"},' + element + b"]")
    assert isinstance(refusal, HttpRefusal)
    assert refusal.code == -32600


@pytest.mark.parametrize(
    "body",
    [
        b'[{"jsonrpc":"2.0","method":"x","params":[Infinity]}]',
        b'[{"jsonrpc":"2.0","method":"\\udc00"}]',
        b"[\xff]",
        b"[1e400]",
    ],
)
def test_a_batch_that_is_not_acceptable_json_is_refused_with_minus_32700(body: bytes) -> None:
    refusal = parse_body(body)
    assert isinstance(refusal, HttpRefusal)
    assert refusal.code == -32700


# -- The era --------------------------------------------------------------------------------------

LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


def version_header(version: str) -> Headers:
    return [(b"mcp-protocol-version", version.encode())]


def test_a_request_without_a_version_header_or_a_meta_claim_is_legacy() -> None:
    assert era_of(LIST, []) == "legacy"


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_a_request_with_a_legacy_version_header_and_no_claim_is_legacy(version: str) -> None:
    assert era_of(LIST, version_header(version)) == "legacy"


def test_a_request_with_a_modern_version_header_is_modern_even_without_meta() -> None:
    assert era_of(LIST, version_header(MODERN)) == "modern"


def test_a_meta_claim_without_a_version_header_is_modern() -> None:
    assert era_of(request("tools/list"), []) == "modern"


def test_a_meta_claim_wins_over_a_legacy_version_header_and_the_disagreement_is_refused_with_minus_32020() -> (
    None
):
    message = request("tools/list")
    headers = headers_for(message, version="2025-11-25")
    assert era_of(message, headers) == "modern"
    assert code(check_modern_request(message, headers)) == HEADER_MISMATCH


def test_a_meta_claim_naming_a_legacy_version_is_modern_and_refused_as_unsupported() -> None:
    message = request("tools/list", version="2025-11-25")
    headers = headers_for(message)
    assert era_of(message, headers) == "modern"
    assert code(check_modern_request(message, headers)) == UNSUPPORTED_VERSION


@pytest.mark.parametrize(
    ("version", "era"), [("2027-01-01", "modern"), ("v999.0.0", "modern"), ("1900-01-01", "legacy")]
)
def test_an_unknown_version_in_the_header_is_modern_if_it_sorts_after_2026_07_28(
    version: str, era: str
) -> None:
    assert era_of(LIST, version_header(version)) == era


@pytest.mark.parametrize(
    ("params", "era"),
    [
        (
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "c", "version": "1"},
            },
            "legacy",
        ),
        ({"_meta": {VERSION_KEY: "2025-11-25", CAPABILITIES_KEY: {}}}, "legacy"),
        ({"_meta": {VERSION_KEY: MODERN}}, "legacy"),
        ({"_meta": {VERSION_KEY: MODERN, CAPABILITIES_KEY: {}}}, "modern"),
    ],
)
def test_initialize_is_legacy_unless_it_carries_a_complete_modern_claim(
    params: dict[str, Any], era: str
) -> None:
    assert era_of({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}, []) == era


def test_initialize_with_a_modern_header_and_no_modern_claim_is_refused_with_minus_32020() -> None:
    message = {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
    headers = [*version_header(MODERN), (b"mcp-method", b"initialize")]
    assert era_of(message, headers) == "modern"
    refusal = check_modern_request(message, headers)
    assert refusal is not None
    assert (refusal.status, refusal.code, refusal.reason, refusal.request_id) == (
        400,
        HEADER_MISMATCH,
        "initialize-with-modern-header",
        3,
    )


def test_initialize_with_a_complete_modern_claim_passes_for_the_child_to_answer_minus_32601() -> None:
    message = request("initialize", id=500)  # CONF sep-2575-http-server-method-not-found-404-initialize
    assert era_of(message, headers_for(message)) == "modern"
    assert check_modern_request(message, headers_for(message)) is None


def test_a_posted_response_takes_the_era_of_its_header() -> None:
    response = {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert era_of(response, []) == "legacy"
    assert era_of(response, version_header("2025-06-18")) == "legacy"
    assert era_of(response, version_header(MODERN)) == "modern"


def test_a_batch_is_modern_if_an_element_claims_or_the_header_is_modern() -> None:
    assert era_of([LIST, LIST], []) == "legacy"
    assert era_of([LIST, request("tools/list")], []) == "modern"
    assert era_of([LIST], version_header(MODERN)) == "modern"


# -- Legacy ---------------------------------------------------------------------------------------


def test_a_legacy_request_without_a_version_header_passes_as_2025_03_26() -> None:
    assert ASSUMED_VERSION == "2025-03-26"
    assert check_legacy_version([]) is None


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_a_legacy_request_naming_a_legacy_version_passes(version: str) -> None:
    assert check_legacy_version([(b"mcp-protocol-version", b" " + version.encode() + b"\t")]) is None


def test_a_legacy_request_naming_an_unsupported_version_is_refused_with_400() -> None:
    refusal = check_legacy_version(version_header("1900-01-01"), ("2025-06-18", "2025-11-25"), request_id=4)
    assert refusal is not None
    assert (refusal.status, refusal.code, refusal.reason, refusal.request_id) == (
        400,
        -32000,
        "unsupported-protocol-version",
        4,
    )
    assert refusal.data == {"supported": ["2025-06-18", "2025-11-25"], "requested": "1900-01-01"}


def test_two_version_headers_on_a_legacy_request_are_refused_with_400() -> None:
    refusal = check_legacy_version(version_header("2025-06-18") * 2)
    assert refusal is not None
    assert (refusal.status, refusal.reason) == (400, "duplicate-header")


@pytest.mark.parametrize(
    ("headers", "allowed"),
    [([], True), (version_header("2025-03-26"), True), (version_header("2025-06-18"), False)],
)
def test_a_legacy_batch_is_allowed_only_at_2025_03_26(headers: Headers, allowed: bool) -> None:
    refusal = check_legacy_batch([LIST, LIST], headers)
    assert (refusal is None) == allowed
    if refusal is not None:
        assert (refusal.status, refusal.code, refusal.reason) == (400, -32600, "batch-not-allowed")


def test_initialize_in_a_legacy_batch_is_refused_with_minus_32600() -> None:
    refusal = check_legacy_batch([{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}], [])
    assert refusal is not None
    assert (refusal.code, refusal.reason) == (-32600, "initialize-in-batch")


# -- Modern: shape and _meta ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        request("server/discover"),
        request("tools/list", {"cursor": "c"}),
        request("tools/call", {"name": "test_simple_text", "arguments": {}}),
        request("prompts/get", {"name": "test_simple_prompt"}),
        request("resources/read", {"uri": "test://static-text"}),
        request("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id="listen-1"),
    ],
)
def test_a_conformant_modern_request_passes(message: dict[str, Any]) -> None:
    assert check_modern_request(message, headers_for(message)) is None


def test_a_batch_is_refused_with_minus_32600_in_the_modern_era() -> None:
    message = request("tools/list")
    refusal = check_modern_request([message], headers_for(message))
    assert refusal is not None
    assert (refusal.status, refusal.code, refusal.reason) == (400, -32600, "batch-not-allowed")


def test_a_posted_response_is_refused_with_minus_32600_in_the_modern_era() -> None:
    refusal = check_modern_request({"jsonrpc": "2.0", "id": 1, "result": {}}, version_header(MODERN))
    assert refusal is not None
    assert (refusal.status, refusal.code, refusal.reason) == (400, -32600, "response-not-allowed")


def test_a_message_that_is_not_json_rpc_is_refused_with_minus_32600_in_the_modern_era() -> None:
    refusal = check_modern_request(
        {"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}, version_header(MODERN)
    )
    assert code(refusal) == -32600


@pytest.mark.parametrize(
    ("params", "missing"),
    [
        (None, [VERSION_KEY, CAPABILITIES_KEY]),
        ({}, [VERSION_KEY, CAPABILITIES_KEY]),  # CONF missing-meta
        ([1, 2], [VERSION_KEY, CAPABILITIES_KEY]),
        ({"_meta": "no"}, [VERSION_KEY, CAPABILITIES_KEY]),
        (
            {"_meta": {INFO_KEY: {"name": "c", "version": "1"}, CAPABILITIES_KEY: {}}},
            [VERSION_KEY],
        ),  # CONF missing-protocol-version
        (
            {"_meta": {VERSION_KEY: MODERN, INFO_KEY: {"name": "c", "version": "1"}}},
            [CAPABILITIES_KEY],
        ),  # CONF missing-client-capabilities
    ],
)
def test_a_request_missing_a_required_meta_field_is_refused_with_400_and_minus_32602(
    params: Any, missing: list[str]
) -> None:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": 101, "method": "server/discover"}
    if params is not None:
        message["params"] = params
    headers = [*version_header(MODERN), (b"mcp-method", b"server/discover")]  # CONF sends a correct header
    refusal = check_modern_request(message, headers)
    assert refusal is not None
    assert (refusal.status, refusal.code, refusal.reason, refusal.request_id) == (
        400,
        -32602,
        "missing-meta",
        101,
    )
    assert refusal.data == {"missing": missing}


def test_a_request_whose_meta_lacks_client_info_passes() -> None:
    message = request("server/discover")  # CONF sep-2575-request-meta-client-info-optional
    del message["params"]["_meta"][INFO_KEY]
    assert check_modern_request(message, headers_for(message)) is None


@pytest.mark.parametrize(
    ("key", "value"),
    [(VERSION_KEY, 20260728), (VERSION_KEY, None), (CAPABILITIES_KEY, []), (CAPABILITIES_KEY, None)],
)
def test_a_meta_version_that_is_not_a_string_or_capabilities_that_are_not_an_object_are_refused_with_minus_32602(
    key: str, value: Any
) -> None:
    message = request("tools/list")
    message["params"]["_meta"][key] = value
    refusal = check_modern_request(message, [*version_header(MODERN), (b"mcp-method", b"tools/list")])
    assert refusal is not None
    assert (refusal.code, refusal.reason) == (-32602, "invalid-meta")


def test_meta_is_checked_before_the_headers() -> None:
    refusal = check_modern_request({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, [])
    assert code(refusal) == -32602


# -- Modern: MCP-Protocol-Version and Mcp-Method --------------------------------------------------


def test_a_request_without_an_mcp_protocol_version_header_is_refused_with_minus_32020() -> None:
    message = request("tools/list")
    refusal = check_modern_request(message, headers_for(message, version=None))
    assert refusal is not None
    assert (refusal.status, refusal.code, refusal.reason) == (400, HEADER_MISMATCH, "missing-header")
    assert refusal.data == {"header": "MCP-Protocol-Version"}


def test_an_mcp_protocol_version_header_unequal_to_the_meta_version_is_refused_with_400_and_minus_32020() -> (
    None
):
    message = request(
        "server/discover", id=302, version="v999.0.0"
    )  # CONF sep-2575-http-server-header-mismatch-400
    refusal = check_modern_request(message, headers_for(message, version=MODERN))
    assert refusal is not None
    assert (refusal.status, refusal.code, refusal.reason, refusal.request_id) == (
        400,
        HEADER_MISMATCH,
        "protocol-version-mismatch",
        302,
    )


def test_an_unsupported_version_is_refused_with_400_and_minus_32022_naming_the_supported_and_requested_ones() -> (
    None
):
    message = request(
        "server/discover", id=301, version="v999.0.0"
    )  # CONF sep-2575-http-server-unsupported-version-400
    refusal = check_modern_request(message, headers_for(message))
    assert refusal is not None
    assert (refusal.status, refusal.code, refusal.request_id) == (400, UNSUPPORTED_VERSION, 301)
    assert body_of(refusal)["error"]["message"] == "Unsupported protocol version"
    assert refusal.data == {"supported": list(MODERN_VERSIONS), "requested": "v999.0.0"}


def test_the_supported_versions_are_the_callers() -> None:
    message = request("tools/list")
    refusal = check_modern_request(message, headers_for(message), supported=("2027-01-01",))
    assert refusal is not None
    assert refusal.data == {"supported": ["2027-01-01"], "requested": MODERN}
    later = request("tools/list", version="2027-01-01")
    assert check_modern_request(later, headers_for(later), supported=(MODERN, "2027-01-01")) is None


def test_the_header_checks_come_before_the_version_check() -> None:
    message = request("tools/list", version="2099-01-01")
    assert code(check_modern_request(message, headers_for(message, method="tools/call"))) == HEADER_MISMATCH
    assert code(check_modern_request(message, headers_for(message))) == UNSUPPORTED_VERSION


def test_a_request_without_an_mcp_method_header_is_refused_with_minus_32020() -> None:
    message = request("tools/list")  # CONF ServerRejectsMissingMethodHeader
    refusal = check_modern_request(message, headers_for(message, method=None))
    assert refusal is not None
    assert (refusal.status, refusal.code, refusal.reason, refusal.data) == (
        400,
        HEADER_MISMATCH,
        "missing-header",
        {"header": "Mcp-Method"},
    )


@pytest.mark.parametrize("value", ["prompts/list", "TOOLS/LIST", "tools/list/", ""])
def test_an_mcp_method_header_unequal_to_the_method_case_sensitively_is_refused_with_minus_32020(
    value: str,
) -> None:
    message = request(
        "tools/list"
    )  # CONF ServerRejectsMismatchedMethodHeader, ServerRejectsCaseMismatchValue
    refusal = check_modern_request(message, headers_for(message, method=value))
    assert refusal is not None
    assert (refusal.status, refusal.code, refusal.reason) == (400, HEADER_MISMATCH, "method-mismatch")


@pytest.mark.parametrize("name", [b"mcp-protocol-version", b"mcp-method", b"mcp-name"])
def test_a_standard_header_given_twice_is_refused_with_minus_32020(name: bytes) -> None:
    message = request("tools/call", {"name": "t"})
    headers = headers_for(message)
    headers += [pair for pair in headers if pair[0] == name]
    refusal = check_modern_request(message, headers)
    assert refusal is not None
    assert (refusal.code, refusal.reason) == (HEADER_MISMATCH, "duplicate-header")


@pytest.mark.parametrize(
    ("key", "value"), [("method", "tools/list\x80"), ("version", "2026-07-28\x7f"), ("name", "t\x00")]
)
def test_a_standard_header_value_with_invalid_characters_is_refused_with_minus_32020(
    key: str, value: str
) -> None:
    message = request("tools/call", {"name": "t"})
    refusal = check_modern_request(message, headers_for(message, **{key: value}))
    assert refusal is not None
    assert (refusal.code, refusal.reason) == (HEADER_MISMATCH, "invalid-header-value")


def test_every_refusal_about_a_request_carries_its_id() -> None:
    message = request("tools/call", {"name": "t"}, id="req-α")  # CONF sep-2575-http-server-error-jsonrpc-id
    for headers in (
        [],
        headers_for(message, name="u"),
        headers_for(message, name=None),
        headers_for(message, method=None),
    ):
        refusal = check_modern_request(message, headers)
        assert refusal is not None
        assert body_of(refusal)["id"] == "req-α"


# -- Modern: Mcp-Name -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/call", {"name": "t", "arguments": {}}),
        ("prompts/get", {"name": "p"}),
        ("resources/read", {"uri": "file:///a b"}),
    ],
)
def test_mcp_name_is_required_for_tools_call_prompts_get_and_resources_read(
    method: str, params: dict[str, Any]
) -> None:
    message = request(method, params)  # CONF ServerRejectsMissingNameHeader
    refusal = check_modern_request(message, headers_for(message, name=None))
    assert refusal is not None
    assert (refusal.status, refusal.code, refusal.reason, refusal.data) == (
        400,
        HEADER_MISMATCH,
        "missing-header",
        {"header": "Mcp-Name"},
    )


def test_an_mcp_name_unequal_to_the_body_is_refused_with_minus_32020() -> None:
    message = request(
        "tools/call", {"name": "test_simple_text", "arguments": {}}
    )  # CONF ServerRejectsMismatchedNameHeader
    refusal = check_modern_request(message, headers_for(message, name="wrong_tool_name"))
    assert refusal is not None
    assert (refusal.status, refusal.code, refusal.reason) == (400, HEADER_MISMATCH, "name-mismatch")


def test_an_mcp_name_is_compared_with_params_uri_for_resources_read() -> None:
    message = request("resources/read", {"uri": "test://static-text", "name": "other"})
    assert check_modern_request(message, headers_for(message, name="test://static-text")) is None
    assert code(check_modern_request(message, headers_for(message, name="other"))) == HEADER_MISMATCH


def test_an_mcp_name_with_surrounding_whitespace_passes() -> None:
    message = request(
        "tools/call", {"name": "test_simple_text", "arguments": {}}
    )  # CONF ServerAcceptsWhitespaceHeaderValue
    assert check_modern_request(message, headers_for(message, name="  test_simple_text \t")) is None


def test_a_base64_mcp_name_is_decoded_before_comparing() -> None:
    message = request("tools/call", {"name": "wetter_für_heute"})
    assert (
        check_modern_request(message, headers_for(message, name=encode_header_value("wetter_für_heute")))
        is None
    )
    assert (
        code(check_modern_request(message, headers_for(message, name=encode_header_value("other"))))
        == HEADER_MISMATCH
    )


@pytest.mark.parametrize("value", ["=?base64?dA?=", "=?base64?d!==?=", "=?base64?/w==?="])
def test_an_invalid_base64_mcp_name_is_refused_with_minus_32020(value: str) -> None:
    message = request("tools/call", {"name": "t"})
    refusal = check_modern_request(message, headers_for(message, name=value))
    assert refusal is not None
    assert (refusal.code, refusal.reason) == (HEADER_MISMATCH, "invalid-header-value")


def test_mcp_name_is_not_required_when_the_body_lacks_the_field_and_the_child_answers_that() -> None:
    message = request("tools/call", {"arguments": {}})
    assert check_modern_request(message, headers_for(message)) is None


def test_an_mcp_name_for_a_body_without_the_field_is_refused_with_minus_32020() -> None:
    message = request("tools/call", {"arguments": {}})
    assert code(check_modern_request(message, headers_for(message, name="t"))) == HEADER_MISMATCH


def test_mcp_name_is_ignored_for_methods_without_a_name() -> None:
    message = request("tools/list")
    assert check_modern_request(message, headers_for(message, name="anything")) is None


def test_a_task_id_in_mcp_name_is_compared_when_present_but_not_required() -> None:
    message = request("tasks/get", {"taskId": "task-1"})
    assert check_modern_request(message, headers_for(message)) is None
    assert check_modern_request(message, headers_for(message, name=None)) is None
    assert code(check_modern_request(message, headers_for(message, name="task-2"))) == HEADER_MISMATCH


# -- Modern: notifications ------------------------------------------------------------------------


def test_a_modern_notification_needs_no_standard_headers() -> None:
    note = {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 1, "_meta": meta()},
    }
    assert check_modern_request(note, []) is None
    assert (
        check_modern_request({"jsonrpc": "2.0", "method": "notifications/x"}, version_header(MODERN)) is None
    )


def test_a_notification_whose_headers_disagree_with_its_body_is_refused_without_an_id() -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/x", "params": {"_meta": meta()}}
    for headers in (version_header("2025-11-25"), [(b"mcp-method", b"notifications/y")]):
        refusal = check_modern_request(note, headers)
        assert refusal is not None
        assert (refusal.code, refusal.request_id) == (HEADER_MISMATCH, None)


def test_a_notification_at_an_unsupported_version_is_refused_with_minus_32022() -> None:
    refusal = check_modern_request(
        {"jsonrpc": "2.0", "method": "notifications/x"}, version_header("2099-01-01")
    )
    assert refusal is not None
    assert (refusal.code, refusal.request_id, refusal.data["requested"]) == (
        UNSUPPORTED_VERSION,
        None,
        "2099-01-01",
    )


# -- Mcp-Param-{Name} -----------------------------------------------------------------------------

TOOLS_LIST = {
    "tools": [
        {
            "name": "execute_sql",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "region": {"type": "string", "x-mcp-header": "Region"},
                    "limit": {"type": "integer", "x-mcp-header": "Limit"},
                    "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
                    "target": {
                        "type": "object",
                        "properties": {"tenant": {"type": "string", "x-mcp-header": "Tenant"}},
                    },
                    "query": {"type": "string"},
                },
                "required": ["region", "query"],
            },
        },
        {"name": "plain", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}},
    ]
}
TOOL_HEADERS = tool_headers_from_list(TOOLS_LIST)


def call(arguments: Any, id: Any = 200, tool: str = "execute_sql") -> dict[str, Any]:
    return request("tools/call", {"name": tool, "arguments": arguments}, id=id)


def param_outcome(arguments: Any, *param_headers: tuple[bytes, bytes]) -> HttpRefusal | None:
    message = call(arguments)
    return check_param_headers(message, [*headers_for(message), *param_headers], TOOL_HEADERS)


def test_a_tools_call_whose_param_headers_match_its_arguments_passes() -> None:
    arguments = {
        "region": "us-west1",
        "limit": 10,
        "dry": False,
        "target": {"tenant": "acme"},
        "query": "SELECT 1",
    }
    assert (
        param_outcome(
            arguments,
            (b"mcp-param-region", b"us-west1"),
            (b"mcp-param-limit", b"10"),
            (b"mcp-param-dry-run", b"false"),
            (b"mcp-param-tenant", b"acme"),
        )
        is None
    )


def test_a_missing_param_header_for_an_argument_in_the_body_is_refused_with_400_and_minus_32020() -> None:
    refusal = param_outcome({"region": "test-value", "query": "q"})  # CONF ServerRejectsMissingCustomHeader
    assert refusal is not None
    assert (refusal.status, refusal.code, refusal.reason, refusal.request_id) == (
        400,
        HEADER_MISMATCH,
        "missing-header",
        200,
    )
    assert refusal.data == {"header": "Mcp-Param-Region"}


@pytest.mark.parametrize("arguments", [{"query": "q"}, {"region": None, "query": "q"}, {}])
def test_a_param_header_for_an_argument_absent_or_null_in_the_body_is_refused(
    arguments: dict[str, Any],
) -> None:
    refusal = param_outcome(arguments, (b"mcp-param-region", b"us-west1"))
    assert refusal is not None
    assert (refusal.code, refusal.reason) == (HEADER_MISMATCH, "unexpected-param-header")


def test_no_param_header_is_expected_for_an_argument_absent_or_null_in_the_body() -> None:
    assert param_outcome({"region": None, "target": {"tenant": None}, "query": "q"}) is None
    assert param_outcome({"target": "not an object"}) is None


def test_a_param_header_unequal_to_its_argument_is_refused_with_minus_32020() -> None:
    refusal = param_outcome({"region": "us-west1"}, (b"mcp-param-region", b"US-WEST1"))
    assert refusal is not None
    assert (refusal.status, refusal.code, refusal.reason) == (400, HEADER_MISMATCH, "param-mismatch")


def test_a_base64_param_header_is_decoded_before_comparing() -> None:
    assert (
        param_outcome({"region": "Hello"}, (b"mcp-param-region", b"=?base64?SGVsbG8=?=")) is None
    )  # CONF ServerAcceptsValidBase64
    assert (
        param_outcome({"region": "Hello, 世界"}, (b"mcp-param-region", b"=?base64?SGVsbG8sIOS4lueVjA==?="))
        is None
    )


@pytest.mark.parametrize(
    "value",
    [b"=?base64?SGVsbG8?=", b"=?base64?SGVs!!!bG8=?=", b"=?base64?SGVsbG9=?=", b"=?base64?/w==?="],
)
def test_invalid_base64_in_a_param_header_is_refused_with_400_and_minus_32020(value: bytes) -> None:
    refusal = param_outcome(
        {"region": "Hello"}, (b"mcp-param-region", value)
    )  # CONF ServerRejectsInvalidBase64Padding, ...Chars
    assert refusal is not None
    assert (refusal.status, refusal.code, refusal.reason) == (400, HEADER_MISMATCH, "invalid-header-value")


@pytest.mark.parametrize("value", ["SGVsbG8=", "=?base64?SGVsbG8=", "SGVsbG8=?=", "=?BASE64?SGVsbG8=?="])
def test_a_value_without_both_lower_case_markers_is_compared_literally(value: str) -> None:
    # CONF ServerLiteralMissingBase64Prefix, ServerLiteralMissingBase64Suffix: the body holds the same literal
    assert param_outcome({"region": value}, (b"mcp-param-region", value.encode())) is None


@pytest.mark.parametrize(
    ("argument", "header"),
    [(42, b"42"), (42, b"42.0"), (42.0, b"42"), (-7, b"-7"), (2**60, b"1152921504606846976"), (42, b"042")],
)
def test_integer_arguments_compare_numerically(argument: Any, header: bytes) -> None:
    assert param_outcome({"limit": argument}, (b"mcp-param-limit", header)) is None


@pytest.mark.parametrize(
    ("argument", "header"),
    [(42, b"4.2e1"), (42, b"0x2a"), (42, b"42.5"), (42, b"forty-two"), (2**60, b"1152921504606846977")],
)
def test_integer_arguments_do_not_match_other_numbers_or_other_notations(
    argument: Any, header: bytes
) -> None:
    assert code(param_outcome({"limit": argument}, (b"mcp-param-limit", header))) == HEADER_MISMATCH


@pytest.mark.parametrize(
    ("argument", "header", "matches"),
    [(True, b"true", True), (False, b"false", True), (True, b"True", False), (True, b"1", False)],
)
def test_booleans_compare_as_lower_case_words(argument: bool, header: bytes, matches: bool) -> None:
    assert (param_outcome({"dry": argument}, (b"mcp-param-dry-run", header)) is None) == matches


def test_an_object_or_array_argument_never_matches_a_header() -> None:
    assert code(param_outcome({"region": ["a"]}, (b"mcp-param-region", b"a"))) == HEADER_MISMATCH


def test_a_param_header_declared_in_any_case_is_looked_up_by_its_lower_case_name() -> None:
    # The tool declares "Region"; the parsers give every header name lower-case.
    assert param_outcome({"region": "eu"}, (b"mcp-param-region", b"eu")) is None


def test_a_param_header_value_keeps_no_surrounding_whitespace() -> None:
    assert param_outcome({"region": "eu"}, (b"mcp-param-region", b"  eu\t")) is None


def test_unknown_param_headers_are_ignored() -> None:
    assert (
        param_outcome(
            {"region": "eu"},
            (b"mcp-param-region", b"eu"),
            (b"mcp-param-zone", b"z"),
            (b"mcp-param-query", b"q"),
        )
        is None
    )


def test_a_param_header_given_twice_is_refused_with_minus_32020() -> None:
    refusal = param_outcome({"region": "eu"}, (b"mcp-param-region", b"eu"), (b"mcp-param-region", b"eu"))
    assert refusal is not None
    assert (refusal.code, refusal.reason) == (HEADER_MISMATCH, "duplicate-header")


def test_a_param_header_with_invalid_characters_is_refused_with_minus_32020() -> None:
    refusal = param_outcome({"region": "eé"}, (b"mcp-param-region", "eé".encode()))
    assert refusal is not None
    assert (refusal.code, refusal.reason) == (HEADER_MISMATCH, "invalid-header-value")


def test_only_tools_calls_of_tools_with_annotations_are_checked() -> None:
    plain = call({"q": "x"}, tool="plain")
    assert check_param_headers(plain, [(b"mcp-param-q", b"other")], TOOL_HEADERS) is None
    unknown = call({"region": "x"}, tool="never_listed")
    assert check_param_headers(unknown, [], TOOL_HEADERS) is None
    other = request("prompts/get", {"name": "execute_sql", "arguments": {"region": "x"}})
    assert check_param_headers(other, [], TOOL_HEADERS) is None


def test_arguments_that_are_not_an_object_count_as_empty() -> None:
    assert param_outcome("not an object") is None
    assert code(param_outcome(None, (b"mcp-param-region", b"x"))) == HEADER_MISMATCH


def test_a_top_level_parameter_may_be_named_by_a_string_instead_of_a_path() -> None:
    message = call({"region": "eu"})
    assert (
        check_param_headers(message, [(b"mcp-param-region", b"eu")], {"execute_sql": {"Region": "region"}})
        is None
    )
    assert code(check_param_headers(message, [], {"execute_sql": {"Region": "region"}})) == HEADER_MISMATCH


# -- x-mcp-header annotations from tools/list -----------------------------------------------------


def test_annotations_are_collected_by_tool_with_their_property_paths() -> None:
    assert TOOL_HEADERS == {
        "execute_sql": {
            "Region": ("region",),
            "Limit": ("limit",),
            "Dry-Run": ("dry",),
            "Tenant": ("target", "tenant"),
        },
        "plain": {},
    }


def annotated(prop: dict[str, Any], **schema: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"a": {"type": "string", "x-mcp-header": "A"}, "p": prop},
        **schema,
    }


@pytest.mark.parametrize(
    "schema",
    [
        annotated({"type": "string", "x-mcp-header": ""}),
        annotated({"type": "string", "x-mcp-header": "Has Space"}),
        annotated({"type": "string", "x-mcp-header": "Colon:"}),
        annotated({"type": "string", "x-mcp-header": "Ünicode"}),
        annotated({"type": "string", "x-mcp-header": 5}),
        annotated({"type": "string", "x-mcp-header": "a"}),  # not unique, case-insensitively
        annotated({"type": "number", "x-mcp-header": "P"}),
        annotated({"type": "object", "x-mcp-header": "P"}),
        annotated({"type": "array", "x-mcp-header": "P"}),
        annotated({"type": ["string", "null"], "x-mcp-header": "P"}),
        annotated({"x-mcp-header": "P"}),
        annotated({"type": "array", "items": {"type": "string", "x-mcp-header": "P"}}),
        annotated({"anyOf": [{"type": "string", "x-mcp-header": "P"}]}),
        annotated({"type": "object", "additionalProperties": {"type": "string", "x-mcp-header": "P"}}),
        annotated({"if": {"properties": {"q": {"type": "string", "x-mcp-header": "P"}}}}),
        annotated({"$ref": "#/$defs/d"}, **{"$defs": {"d": {"type": "string", "x-mcp-header": "P"}}}),
        {"type": "string", "x-mcp-header": "Root"},
    ],
)
def test_a_tool_whose_annotations_break_the_specs_constraints_is_left_out(schema: dict[str, Any]) -> None:
    assert x_mcp_headers(schema) is None
    assert tool_headers_from_list({"tools": [{"name": "bad", "inputSchema": schema}]}) == {}


def test_an_annotation_inside_instance_data_is_data() -> None:
    schema = annotated({"type": "object", "default": {"x-mcp-header": "P"}, "enum": [{"x-mcp-header": "Q"}]})
    assert x_mcp_headers(schema) == {"A": ("a",)}


def test_a_tool_without_an_input_schema_has_no_annotations() -> None:
    assert tool_headers_from_list({"tools": [{"name": "t"}, {"name": 3}, "junk"]}) == {"t": {}}


@pytest.mark.parametrize("result", [{}, {"tools": {}}, {"tools": None}, []])
def test_a_result_without_a_list_of_tools_gives_nothing(result: Any) -> None:
    assert tool_headers_from_list(result) == {}


def test_a_schema_nested_deeper_than_the_recursion_limit_is_walked() -> None:
    schema: dict[str, Any] = {"type": "string", "x-mcp-header": "Deep"}
    for _ in range(5000):
        schema = {"type": "object", "properties": {"n": schema}}
    assert x_mcp_headers(schema) == {"Deep": ("n",) * 5000}


# -- Statuses for a child's errors ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("error_code", "status"),
    [
        (-32601, 404),
        (-32602, 400),
        (-32600, 400),
        (-32700, 400),
        (HEADER_MISMATCH, 400),
        (MISSING_CAPABILITY, 400),
        (UNSUPPORTED_VERSION, 400),
        (-32603, 200),
        (-32000, 200),
        (-32002, 200),
        (-32042, 200),
        (1, 200),
    ],
)
def test_a_childs_error_is_sent_with_the_status_of_its_code(error_code: int, status: int) -> None:
    assert status_for_error(error_code) == status
    assert type(status_for_error(error_code)) is int


# -- The =?base64?...?= form ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "encoded"),
    [  # SPEC streamable-http.mdx §Value Encoding, its examples
        ("us-west1", "us-west1"),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
    ],
)
def test_values_are_encoded_as_the_spec_examples_show(value: str, encoded: str) -> None:
    assert encode_header_value(value) == encoded
    assert decode_header_value(encoded) == value


@pytest.mark.parametrize("value", ["", "a\tb", "\x7f", "=?base64?=", "x "])
def test_empty_values_tabs_controls_and_edge_spaces_are_encoded(value: str) -> None:
    assert encode_header_value(value).startswith("=?base64?")
    assert decode_header_value(encode_header_value(value)) == value


def test_a_plain_value_decodes_to_itself() -> None:
    assert decode_header_value("file:///a b?x=1") == "file:///a b?x=1"


def test_inner_spaces_leave_a_value_plain() -> None:
    assert encode_header_value("get weather") == "get weather"


def test_overlapping_markers_are_a_literal_value() -> None:
    assert decode_header_value("=?base64?=") == "=?base64?="


@pytest.mark.parametrize(
    "value",
    [
        "=?base64?SGVsbG8?=",
        "=?base64?SGVs bG8=?=",
        "=?base64?SGVsbG9=?=",
        "=?base64?/w==?=",
        "=?base64?ü===?=",
    ],
)
def test_decoding_refuses_base64_that_is_not_canonical_or_not_utf8(value: str) -> None:
    assert decode_header_value(value) is None


@given(st.text())
def test_any_text_survives_encoding_and_decoding(value: str) -> None:
    encoded = encode_header_value(value)
    assert decode_header_value(encoded) == value
    assert encoded.isascii() and encoded.isprintable() and encoded == encoded.strip()


@given(st.text())
def test_any_text_shaped_like_the_sentinel_is_encoded_and_survives(inner: str) -> None:
    value = f"=?base64?{inner}?="
    encoded = encode_header_value(value)
    assert encoded != value
    assert decode_header_value(encoded) == value


@given(
    st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E)).filter(
        lambda s: not s.startswith("=?base64?")
    )
)
def test_printable_ascii_that_is_not_sentinel_shaped_is_sent_as_it_is(value: str) -> None:
    if value:
        assert encode_header_value(value) == value
        assert decode_header_value(value) == value


def test_a_lone_surrogate_is_encoded_without_raising_and_refused_by_the_decoder() -> None:
    encoded = encode_header_value("a\ud800")
    assert decode_header_value(encoded) is None


# -- The client's headers -------------------------------------------------------------------------


def test_a_client_sends_the_version_the_method_and_the_name() -> None:
    assert modern_request_headers(request("tools/call", {"name": "get_weather"})) == [
        (b"mcp-protocol-version", b"2026-07-28"),
        (b"mcp-method", b"tools/call"),
        (b"mcp-name", b"get_weather"),
    ]
    assert modern_request_headers(request("resources/read", {"uri": "file:///projects/myapp/config.json"}))[
        -1
    ] == (
        b"mcp-name",
        b"file:///projects/myapp/config.json",
    )
    assert modern_request_headers(request("tools/list")) == [
        (b"mcp-protocol-version", b"2026-07-28"),
        (b"mcp-method", b"tools/list"),
    ]


def test_a_client_encodes_a_name_that_is_not_plain_ascii() -> None:
    assert modern_request_headers(request("prompts/get", {"name": "café\r\nX-Evil: 1"}))[-1] == (
        b"mcp-name",
        b"=?base64?Y2Fmw6kNClgtRXZpbDogMQ==?=",
    )


def test_a_client_leaves_out_a_version_or_method_no_header_can_carry() -> None:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list\r\nX: y",
        "params": {"_meta": {VERSION_KEY: "2026-07-28 "}},
    }
    assert modern_request_headers(message) == []


@given(
    st.text(),
    st.sampled_from(["tools/call", "prompts/get", "resources/read"]),
    st.one_of(st.integers(), st.text()),
)
def test_what_a_client_sends_passes_the_servers_checks(name: str, method: str, request_id: int | str) -> None:
    field = "uri" if method == "resources/read" else "name"
    message = request(method, {field: name}, id=request_id)
    assert era_of(message, modern_request_headers(message)) == "modern"
    assert check_modern_request(message, modern_request_headers(message)) is None


# -- No input makes anything raise ----------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)
interesting_keys = st.sampled_from(
    ["jsonrpc", "id", "method", "params", "result", "error", "_meta", "name", "uri", "taskId", "arguments", "tools",
     "inputSchema", "properties", "type", "x-mcp-header", "items", "anyOf", VERSION_KEY, CAPABILITIES_KEY]
)  # fmt: skip
mcp_shaped = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=12)
    | st.sampled_from(["2.0", MODERN, "tools/call", "string"]),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(interesting_keys | st.text(max_size=6), children, max_size=5)
    ),
    max_leaves=30,
)
header_names = st.sampled_from(
    [
        b"accept",
        b"content-type",
        b"mcp-protocol-version",
        b"mcp-method",
        b"mcp-name",
        b"mcp-param-region",
        b"MCP-Param-A",
    ]
) | st.binary(max_size=12)
header_values_ = st.sampled_from(
    [b"2026-07-28", b"2025-11-25", b"tools/call", b"*/*", b"=?base64?SGVsbG8=?="]
) | st.binary(max_size=24)
header_lists = st.lists(st.tuples(header_names, header_values_), max_size=6)


@settings(max_examples=300)
@given(st.one_of(json_values, mcp_shaped), header_lists, st.one_of(json_values, mcp_shaped))
def test_no_message_and_headers_make_any_check_raise(message: Any, headers: Headers, tools: Any) -> None:
    era_of(message, headers)
    modern_request_headers(message)
    learned = tool_headers_from_list(tools)
    x_mcp_headers(tools)
    outcomes = [
        check_modern_request(message, headers),
        check_legacy_version(headers),
        check_post_headers(headers),
        check_param_headers(message, headers, learned),
        check_param_headers(message, headers, TOOL_HEADERS),
        check_legacy_batch(message, headers) if isinstance(message, list) else None,
    ]
    for refusal in outcomes:
        if refusal is not None:
            json.loads(refusal.body())


any_text = st.text(alphabet=st.characters(exclude_categories=()))  # lone surrogates included


@given(any_text, st.sampled_from(["tools/call", "resources/read", "tasks/get", any_text]))
def test_no_text_makes_the_client_side_raise(name: str, method: str) -> None:
    encode_header_value(name)
    modern_request_headers(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": method,
            "params": {"name": name, "uri": name, "taskId": name, "_meta": {VERSION_KEY: name}},
        }
    )


def test_a_huge_integer_in_a_locally_built_message_does_not_break_the_refusal_message() -> None:
    message = request("tools/call", {"name": 10**5000})
    refusal = check_modern_request(message, headers_for(message, name="t"))
    assert code(refusal) == HEADER_MISMATCH
    assert (
        code(check_param_headers(call({"limit": 10**5000}), [(b"mcp-param-limit", b"1")], TOOL_HEADERS))
        == HEADER_MISMATCH
    )


@given(st.binary() | st.builds(lambda v: json.dumps(v).encode(), st.one_of(json_values, mcp_shaped)))
def test_no_body_makes_parse_body_raise(body: bytes) -> None:
    outcome = parse_body(body)
    if isinstance(outcome, HttpRefusal):
        json.loads(outcome.body())


@given(st.text())
def test_no_text_makes_decoding_raise(value: str) -> None:
    decode_header_value(value)
    decode_header_value("=?base64?" + value + "?=")


@given(st.integers())
def test_every_code_has_a_status(error_code: int) -> None:
    assert status_for_error(error_code) in {200, 400, 404}
