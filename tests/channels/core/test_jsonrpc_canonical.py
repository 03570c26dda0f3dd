"""orjson's parse of a line it writes back unchanged is the strict parse (channels/_core/jsonrpc.py).

:func:`decode` lets orjson alone parse a small line that orjson writes back byte for byte; these
tests show that for any line, canonical or not, :func:`decode` gives exactly what the strict
standard-library parser gives: the same value with the same types, or the same error with the same
text and request id.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from channels import ProtocolError, decode
from channels._core.jsonrpc import _parse_canonical, decode_strict


def outcome(parse: Any, line: bytes | str) -> tuple[Any, ...]:
    """What parsing ``line`` gives: the value (its repr tells 1 from 1.0 and -0.0 from 0.0), or the error."""
    try:
        return ("value", repr(parse(line)))
    except ProtocolError as exc:
        return ("error", type(exc), str(exc), exc.request_id, type(exc.request_id))


def compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")


WRITERS = ["compact", "orjson", "spaced"]


def written(message: dict[str, Any], how: str) -> bytes:
    """``message`` as a writer of that kind writes it: compact, orjson, or json.dumps's spaces."""
    if how == "orjson":
        try:
            return orjson.dumps(message)
        except orjson.JSONEncodeError:  # an integer over 64 bits
            return compact(message)
    return compact(message) if how == "compact" else json.dumps(message).encode()


def nested(depth: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":1,"result":' + b'{"a":' * depth + b"1" + b"}" * depth + b"}"


CANONICAL = [
    b'{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}',
    b'{"jsonrpc":"2.0","id":"x","result":{"content":[{"type":"text","text":"caf\xc3\xa9 \\" \\\\ \\n"}]}}',
    b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":0.5,"total":1.0}}',
    b'{"jsonrpc":"2.0","id":18446744073709551615,"result":{}}',
    b'{"jsonrpc":"2.0","id":-9223372036854775808,"result":{"f":-0.0,"g":1e+16,"h":5e-324}}',
    nested(200),
    nested(253),
]

LINES = [
    *CANONICAL,
    # written back otherwise: the strict parser decides
    b'{"jsonrpc":"2.0","id":18446744073709551616,"result":{}}',  # over 64 bits
    b'{"jsonrpc":"2.0","id":-9223372036854775809,"result":{}}',
    b'{"jsonrpc":"2.0","id":1,"result":{"v":' + b"9" * 5000 + b"}}",
    b'{"jsonrpc":"2.0","id":1,"result":{"v":1.10}}',
    b'{"jsonrpc":"2.0","id":1,"result":{"v":1E2}}',
    b'{"jsonrpc":"2.0","id":1,"result":{"v":-0}}',
    b'{"jsonrpc":"2.0","id":1,"result":{"v":1e400}}',
    b'{"jsonrpc":"2.0","id":1,"result":{"v":0.30000000000000004441}}',
    b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
    b'{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":1,"method":"\\u0070ing"}',
    b'{"jsonrpc":"2.0","id":1,"method":"p\\/ing"}',
    b' {"jsonrpc":"2.0","id":1,"method":"ping"}',
    nested(254),
    nested(255),
    nested(990),
    nested(2000),
    # refused by both
    b'{"jsonrpc":"2.0","id":1,"result":{"v":"\\ud800"}}',
    b'{"jsonrpc":"2.0","id":1,"result":{"\\udc00":1}}',
    b'{"jsonrpc":"2.0","id":1,"method":"\xed\xa0\x80"}',
    b'{"jsonrpc":"2.0","id":1,"method":"\xff"}',
    b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":1,"result":{"v":NaN}}',
    b'{"jsonrpc":"2.0","id":1,"method":"a\tb"}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping"}{"jsonrpc":"2.0","id":2,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping",}',
    b'{"jsonrpc":"2.0","id":1,"method":"ping"',
    b"[]",
    b"1",
    b"",
    # JSON, but not a valid message: the same -32600 and id
    b'{"jsonrpc":"2.0","id":true,"method":"ping"}',
    b'{"jsonrpc":"2.0","id":1.0,"method":"ping"}',
    b'{"jsonrpc":"1.0","id":"a","method":"ping"}',
    b'{"jsonrpc":"2.0","id":6,"result":{},"error":{"code":1,"message":"m"}}',
    b'{"jsonrpc":"2.0","id":"e","error":{"code":-1.0,"message":"m"}}',
]


def test_the_canonical_lines_of_compact_encoders_take_the_orjson_parse() -> None:
    for line in CANONICAL:
        assert _parse_canonical(line) is not None, line[:60]
        assert _parse_canonical(line.decode()) is not None, line[:60]


@pytest.mark.parametrize("line", LINES, ids=lambda line: repr(line[:50]))
def test_decode_gives_what_the_strict_parser_gives_for_each_tricky_line(line: bytes) -> None:
    assert outcome(decode, line) == outcome(decode_strict, line)
    text = line.decode("utf-8", "surrogateescape")
    assert outcome(decode, text) == outcome(decode_strict, text)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=12,
)
messages = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0"), "id": st.integers(min_value=-(2**65), max_value=2**65) | st.text(max_size=4)},
    optional={"method": st.text(max_size=6), "params": json_values, "result": json_values},
)


@given(messages, st.sampled_from(WRITERS))
def test_decode_gives_what_the_strict_parser_gives_for_any_message_however_written(
    message: dict[str, Any], how: str
) -> None:
    line = written(message, how)
    assert outcome(decode, line) == outcome(decode_strict, line)


@given(st.binary(max_size=64).map(lambda junk: b'{"jsonrpc":"2.0","id":1,"result":' + junk + b"}"))
def test_decode_gives_what_the_strict_parser_gives_for_any_bytes_in_a_message(line: bytes) -> None:
    assert outcome(decode, line) == outcome(decode_strict, line)
