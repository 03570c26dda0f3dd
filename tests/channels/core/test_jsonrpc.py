"""Strict JSON-RPC decoding, canonical encoding and classification (sans-IO).

Guarantee 2 (docs/design.md §5.2) starts here: whatever :func:`decode` accepts is one valid JSON-RPC message
that :func:`encode` turns back into one line; everything else is a ParseError (-32700) or an
InvalidMessage (-32600), never another exception, whatever the bytes: invalid UTF-8, UTF-16 JSON,
lone surrogates, NaN, huge integers, deep nesting.
"""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from channels import (
    INVALID_REQUEST,
    PARSE_ERROR,
    InvalidMessage,
    Kind,
    ParseError,
    ProtocolError,
    decode,
    encode,
    kind,
    validate,
)
from channels._core.jsonrpc import all_valid, decode_json, sniff_leading_id

REQUEST = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'


def nest(depth: int, opener: bytes, closer: bytes) -> bytes:
    head = b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"p":'
    return head + opener * depth + closer * depth + b"}}"


def with_result(value: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","id":1,"result":{"v":' + value + b"}}"


def with_error(error: bytes) -> bytes:
    return b'{"jsonrpc":"2.0","id":"e","error":' + error + b"}"


# (name, line, expected exception class, request id the error reply can name)
NASTY = [
    # -- not acceptable JSON text: -32700 ----------------------------------------------------
    ("invalid UTF-8", b'{"jsonrpc":"2.0","id":1,"method":"\xff"}', ParseError, None),
    ("overlong UTF-8", b'{"jsonrpc":"2.0","id":1,"method":"\xc0\xaf"}', ParseError, None),
    ("UTF-8 encoded surrogate", b'{"jsonrpc":"2.0","id":1,"method":"\xed\xa0\x80"}', ParseError, None),
    ("UTF-16 with BOM", REQUEST.decode().encode("utf-16"), ParseError, None),
    ("UTF-16-LE without BOM", REQUEST.decode().encode("utf-16-le"), ParseError, None),
    ("UTF-32", REQUEST.decode().encode("utf-32"), ParseError, None),
    ("UTF-8 BOM", b"\xef\xbb\xbf" + REQUEST, ParseError, None),
    ("lone high surrogate", with_result(b'"\\ud800"'), ParseError, None),
    ("lone low surrogate, upper case", with_result(b'"\\uDC00"'), ParseError, None),
    ("reversed surrogate pair", with_result(b'"\\udc00\\ud800"'), ParseError, None),
    ("lone surrogate in a key", b'{"jsonrpc":"2.0","id":1,"result":{"\\ud800":1}}', ParseError, None),
    ("NaN", with_result(b"NaN"), ParseError, None),
    ("Infinity", with_result(b"Infinity"), ParseError, None),
    ("-Infinity", with_result(b"-Infinity"), ParseError, None),
    ("1e400", with_result(b"1e400"), ParseError, None),
    ("-1e400", with_result(b"-1e400"), ParseError, None),
    ("5000-digit integer", with_result(b"9" * 5000), ParseError, None),
    ("100000-deep arrays", nest(100_000, b"[", b"]"), ParseError, None),
    ("100000-deep objects", nest(100_000, b'{"a":', b"}"), ParseError, None),
    ("two concatenated objects", REQUEST + REQUEST, ParseError, None),
    ("an object then a number", REQUEST + b" 1", ParseError, None),
    ("truncated", REQUEST[:-1], ParseError, None),
    ("empty", b"", ParseError, None),
    ("whitespace only", b" \t ", ParseError, None),
    ("trailing comma", b'{"jsonrpc":"2.0","method":"x",}', ParseError, None),
    ("single quotes", b"{'jsonrpc':'2.0','method':'x'}", ParseError, None),
    ("raw control character in a string", b'{"jsonrpc":"2.0","method":"a\tb"}', ParseError, None),
    ("NUL byte outside a string", b'{"jsonrpc":"2.0","method":"x"}\x00', ParseError, None),
    # -- JSON, but not one JSON-RPC message: -32600 ------------------------------------------
    ("a batch", b"[" + REQUEST + b"]", InvalidMessage, None),
    ("an empty batch", b"[]", InvalidMessage, None),
    ("a number", b"1", InvalidMessage, None),
    ("a string", b'"ping"', InvalidMessage, None),
    ("null", b"null", InvalidMessage, None),
    ("true", b"true", InvalidMessage, None),
    ("an empty object", b"{}", InvalidMessage, None),
    ("missing jsonrpc", b'{"id":1,"method":"ping"}', InvalidMessage, 1),
    ("jsonrpc 1.0", b'{"jsonrpc":"1.0","id":"a","method":"ping"}', InvalidMessage, "a"),
    ("jsonrpc as a number", b'{"jsonrpc":2.0,"id":3,"method":"ping"}', InvalidMessage, 3),
    ("bool id", b'{"jsonrpc":"2.0","id":true,"method":"ping"}', InvalidMessage, None),
    ("float id", b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', InvalidMessage, None),
    ("integral float id", b'{"jsonrpc":"2.0","id":1.0,"method":"ping"}', InvalidMessage, None),
    ("null id on a request", b'{"jsonrpc":"2.0","id":null,"method":"ping"}', InvalidMessage, None),
    ("object id", b'{"jsonrpc":"2.0","id":{},"method":"ping"}', InvalidMessage, None),
    ("method not a string", b'{"jsonrpc":"2.0","id":4,"method":4}', InvalidMessage, 4),
    ("params a string", b'{"jsonrpc":"2.0","id":5,"method":"x","params":"p"}', InvalidMessage, 5),
    ("neither method nor id", b'{"jsonrpc":"2.0","result":{}}', InvalidMessage, None),
    (
        "result and error",
        b'{"jsonrpc":"2.0","id":6,"result":{},"error":{"code":1,"message":"m"}}',
        InvalidMessage,
        6,
    ),
    ("neither result nor error", b'{"jsonrpc":"2.0","id":"r"}', InvalidMessage, "r"),
    ("result with a null id", b'{"jsonrpc":"2.0","id":null,"result":{}}', InvalidMessage, None),
    ("result with a bool id", b'{"jsonrpc":"2.0","id":false,"result":{}}', InvalidMessage, None),
    ("error as a string", with_error(b'"oops"'), InvalidMessage, "e"),
    ("error as null", with_error(b"null"), InvalidMessage, "e"),
    ("error code a string", with_error(b'{"code":"-1","message":"m"}'), InvalidMessage, "e"),
    ("error code a float", with_error(b'{"code":-1.0,"message":"m"}'), InvalidMessage, "e"),
    ("error code a bool", with_error(b'{"code":true,"message":"m"}'), InvalidMessage, "e"),
    ("error without message", with_error(b'{"code":-1}'), InvalidMessage, "e"),
    ("error message not a string", with_error(b'{"code":-1,"message":1}'), InvalidMessage, "e"),
    ("error without code", with_error(b'{"message":"m"}'), InvalidMessage, "e"),
]


@pytest.mark.parametrize(
    ("line", "expected", "request_id"), [pytest.param(*case[1:], id=case[0]) for case in NASTY]
)
def test_every_nasty_payload_is_answered_with_the_right_error_and_nothing_else(
    line: bytes, expected: type[ProtocolError], request_id: Any
) -> None:
    with pytest.raises(ProtocolError) as caught:
        decode(line)
    assert type(caught.value) is expected
    assert caught.value.rpc_code == (PARSE_ERROR if expected is ParseError else INVALID_REQUEST)
    assert caught.value.request_id == request_id
    assert type(caught.value.request_id) is type(request_id)


@given(st.binary())
def test_decode_raises_only_protocol_errors_for_any_bytes(line: bytes) -> None:
    try:
        decode(line)
    except ProtocolError:
        pass


any_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),  # NaN and Infinity too
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=10,
)
rpc_keys = st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "code", "message"])
rpc_like = st.dictionaries(rpc_keys, st.sampled_from(["2.0", 1, "1", None, True]) | any_json)
json_text = st.one_of(rpc_like, any_json).map(json.dumps)


@given(json_text)
def test_decode_raises_only_protocol_errors_for_any_json_value(text: str) -> None:
    try:
        decode(text.encode())
    except ProtocolError:
        pass


VALID = [
    ("request, int id", {"jsonrpc": "2.0", "id": 1, "method": "ping"}, Kind.REQUEST),
    ("request, string id", {"jsonrpc": "2.0", "id": "1", "method": "ping"}, Kind.REQUEST),
    ("request, empty string id", {"jsonrpc": "2.0", "id": "", "method": "ping"}, Kind.REQUEST),
    ("request, negative id", {"jsonrpc": "2.0", "id": -1, "method": "x", "params": {}}, Kind.REQUEST),
    ("request, positional params", {"jsonrpc": "2.0", "id": 0, "method": "x", "params": [1]}, Kind.REQUEST),
    ("notification", {"jsonrpc": "2.0", "method": "notifications/initialized"}, Kind.NOTIFICATION),
    ("notification with params", {"jsonrpc": "2.0", "method": "n", "params": {"a": None}}, Kind.NOTIFICATION),
    ("result", {"jsonrpc": "2.0", "id": 7, "result": {}}, Kind.RESPONSE),
    ("null result", {"jsonrpc": "2.0", "id": "7", "result": None}, Kind.RESPONSE),
    ("error", {"jsonrpc": "2.0", "id": 7, "error": {"code": -32601, "message": "no"}}, Kind.RESPONSE),
    (
        "error with data",
        {"jsonrpc": "2.0", "id": 7, "error": {"code": 1, "message": "", "data": {"reason": "x"}}},
        Kind.RESPONSE,
    ),
    (
        "parse-error reply with a null id",
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}},
        Kind.RESPONSE,
    ),
]


@pytest.mark.parametrize(("message", "expected"), [pytest.param(*c[1:], id=c[0]) for c in VALID])
def test_requests_notifications_and_responses_are_classified(message: dict[str, Any], expected: Kind) -> None:
    assert validate(message) is expected
    assert kind(message) is expected
    assert decode(encode(message)[:-1]) == message


@pytest.mark.parametrize(
    ("id_text", "expected"),
    [
        (b"1", 1),
        (b'"1"', "1"),
        (b"0", 0),
        (b'"0"', "0"),
        (b"-5", -5),
        (b"12345678901234567890", 12345678901234567890),
    ],
)
def test_ids_keep_their_json_type(id_text: bytes, expected: Any) -> None:
    line = b'{"jsonrpc":"2.0","id":' + id_text + b',"result":{}}'
    message = decode(line)
    assert message["id"] == expected and type(message["id"]) is type(expected)
    assert encode(message) == line + b"\n"


AWKWARD_TEXT = ["a\nb", "\r\n", "\u2028\u2029", "\x85", "\x00\x1f\x7f", '"', "\\", "😀", "é", "\n" * 10]


@pytest.mark.parametrize("text", AWKWARD_TEXT)
def test_encode_always_gives_exactly_one_line(text: str) -> None:
    message = {"jsonrpc": "2.0", "id": text, "method": text, "params": {text: [text]}}
    line = encode(message)
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and b"\r" not in line
    assert decode(line[:-1]) == message


# What a bytes object holds beyond its bytes (CPython's header, 33 bytes on 64-bit builds), and
# room for the allocator's rounding: orjson's own output held 4 KiB at least and 8 to 13 times
# a longer message's length.
BYTES_OVERHEAD = 64


@pytest.mark.parametrize("length", [10, 1_000, 100_000, 1_000_000])
@pytest.mark.parametrize("char", ["x", "é"])
def test_an_encoded_message_holds_no_more_memory_than_its_length(length: int, char: str) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": char * length}]}}
    encode(message)  # a text not ASCII keeps its UTF-8 form once asked for it: the message's memory
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        line = encode(message)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(line) > length
    assert held <= len(line) + BYTES_OVERHEAD


def test_encode_is_compact_utf8() -> None:
    message = {"jsonrpc": "2.0", "method": "é", "params": {"a": [1, 2]}}
    assert encode(message) == '{"jsonrpc":"2.0","method":"é","params":{"a":[1,2]}}\n'.encode()


@pytest.mark.parametrize("value", ["\ud800", {"\udfff": 1}])
def test_encode_refuses_what_json_cannot_carry_with_value_error(value: Any) -> None:
    with pytest.raises(ValueError):
        encode({"jsonrpc": "2.0", "id": 1, "result": {"v": value}})


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_encode_writes_a_non_finite_float_built_locally_as_null_like_javascript(value: float) -> None:
    assert encode({"jsonrpc": "2.0", "id": 1, "result": {"v": value}}) == (
        b'{"jsonrpc":"2.0","id":1,"result":{"v":null}}\n'
    )


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, 10**300])
def test_integers_beyond_64_bits_are_decoded_and_encoded_exactly(value: int) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"v": value}}
    assert decode(encode(message)[:-1]) == message
    assert str(value).encode() in encode(message)


def test_nesting_beyond_what_orjson_encodes_is_still_encoded() -> None:
    deep: Any = "leaf"
    for _ in range(400):
        deep = [deep]
    message = {"jsonrpc": "2.0", "id": 1, "result": {"v": deep}}
    assert decode(encode(message)[:-1]) == message


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5),
    max_leaves=25,
)
request_ids = st.one_of(st.integers(), st.text())
params = st.dictionaries(st.text(), json_values, max_size=5)
messages = st.one_of(
    st.builds(
        lambda i, m, p: {"jsonrpc": "2.0", "id": i, "method": m, "params": p}, request_ids, st.text(), params
    ),
    st.builds(lambda m, p: {"jsonrpc": "2.0", "method": m, "params": p}, st.text(), params),
    st.builds(lambda i, r: {"jsonrpc": "2.0", "id": i, "result": r}, request_ids, json_values),
    st.builds(
        lambda i, c, t, d: {"jsonrpc": "2.0", "id": i, "error": {"code": c, "message": t, "data": d}},
        request_ids,
        st.integers(),
        st.text(),
        json_values,
    ),
)


@given(messages)
def test_decode_of_encode_is_the_identity_for_valid_messages(message: dict[str, Any]) -> None:
    line = encode(message)
    assert line.count(b"\n") == 1 and line.endswith(b"\n")
    decoded = decode(line[:-1])
    assert decoded == message
    if "id" in message:
        assert type(decoded["id"]) is type(message["id"])


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":42,"result":{"text":"' + b"a" * 5000, 42),
        (b'{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{', "abc"),
        (b'{"id":7,"jsonrpc":"2.0"', 7),
        (b'  { "jsonrpc" : "2.0" , "id" : -3 }', -3),
        (b'{"jsonrpc":"2.0","id":"a\\"b","result":', 'a"b'),
        (b'{"jsonrpc":"2.0","id":"1","result":', "1"),
        (b'{"jsonrpc":"2.0","result":{},"id":1}', None),  # id not first: not guessed at
        (b'{"jsonrpc":"2.0","id":12', None),  # cut inside the id
        (b'{"jsonrpc":"2.0","id":"unterminated', None),
        (b'{"jsonrpc":"2.0","id":true,', None),
        (b'{"jsonrpc":"2.0","id":null,', None),
        (b'{"jsonrpc":"2.0","id":1.5,', None),
        (b'{"jsonrpc":"2.0","id":1234567890123456789,', None),  # over 18 digits
        (b"", None),
        (b"\xff\xfe", None),
    ],
)
def test_a_leading_id_is_recovered_from_a_prefix_and_nothing_is_guessed(prefix: bytes, expected: Any) -> None:
    found = sniff_leading_id(prefix)
    assert found == expected and type(found) is type(expected)


def test_a_sniffed_id_can_always_be_written_back_in_a_reply() -> None:
    found = sniff_leading_id(b'{"jsonrpc":"2.0","id":"\\ud800","method":"x","params":{"p":"aaa')
    if found is not None:
        encode({"jsonrpc": "2.0", "id": found, "error": {"code": -32600, "message": "too large"}})


# Envelopes of every shape, valid or not, for the fast paths of validate and all_valid.
ENVELOPES = st.fixed_dictionaries(
    {
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]),
        "id": st.one_of(st.integers(), st.text(max_size=3), st.booleans(), st.none(), st.floats()),
    },
    optional={
        "method": st.one_of(st.text(max_size=3), st.integers()),
        "params": st.one_of(
            st.none(),
            st.dictionaries(st.text(max_size=2), st.integers()),
            st.lists(st.integers()),
            st.integers(),
        ),
        "result": st.integers(),
        "error": st.one_of(
            st.integers(), st.fixed_dictionaries({"code": st.integers(), "message": st.text(max_size=3)})
        ),
    },
)


@given(message=ENVELOPES)
def test_the_fast_path_of_validate_agrees_with_the_thorough_checks(message: dict[str, Any]) -> None:
    from channels._core.jsonrpc import _validate_thoroughly

    try:
        expected: Any = _validate_thoroughly(message)
    except InvalidMessage:
        expected = InvalidMessage
    try:
        got: Any = validate(message)
    except InvalidMessage:
        got = InvalidMessage
    assert got == expected


def test_decode_json_reads_any_shape_with_exact_integers_and_the_same_strictness_as_decode() -> None:
    # A 2025-03-26 batch's array (channels/_mcp/admission.py) is read by it.
    assert decode_json('[{"id": 123456789012345678901234567890}, 1.5, "x"]') == [
        {"id": 123456789012345678901234567890},
        1.5,
        "x",
    ]
    for text in (
        "[NaN]",
        '{"a": Infinity}',
        "[-Infinity]",
        "[1e400]",
        '["\\udc00"]',
        b"[\xff]",
        "[" * 100_000,
    ):
        with pytest.raises(ParseError, match=r"not valid JSON|out of range|surrogate|not UTF-8|too deeply"):
            decode_json(text)


@given(st.lists(ENVELOPES, max_size=4))
def test_all_valid_says_a_batch_is_valid_only_when_each_message_is(batch: list[dict[str, Any]]) -> None:
    assert all_valid(batch) == all(all_valid([message]) for message in batch)
    if all_valid(batch):
        for message in batch:
            validate(message)  # raises InvalidMessage if all_valid was wrong


def test_all_valid_takes_the_usual_shapes() -> None:
    assert all_valid(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": "a", "result": {}},
        ]
    )
