r"""JSON-RPC 2.0 messages, sans-IO: strict decoding, canonical encoding, classification.

A message is a plain ``dict`` (the JSON object). Bodies stay opaque: on the hot path nothing is
structured into classes, and only ``jsonrpc``, ``id``, ``method``, ``result`` and ``error`` are looked at.

Decoding is strict, because whatever is accepted here is forwarded to a child or a client
(docs/design.md §5.2):

* UTF-8 only, decoded strictly *before* parsing (``json.loads(bytes)`` would guess UTF-16/32);
* one JSON object per line: arrays (JSON-RPC batches, removed from MCP in 2025-06-18), scalars and two
  concatenated values are rejected;
* no ``NaN``/``Infinity`` literals and no number that overflows to infinity (``1e400``);
* no lone surrogates (``"\ud800"`` parses in Python but cannot be re-encoded as UTF-8);
* nesting deeper than the interpreter's recursion limit and integers over 4300 digits (CPython's
  ``int_max_str_digits``) are rejected cleanly instead of crashing the task.

Every rejection is a :class:`~channels.ParseError` (``-32700``) or :class:`~channels.InvalidMessage`
(``-32600``); nothing else escapes :func:`decode`.

Encoding is canonical and compact (UTF-8, no insignificant whitespace, no NaN), so a peer always
receives exactly one line, and receives the value the bridge routed on: a message is never forwarded
as the raw bytes it arrived in (no parser differential on duplicate keys or odd escapes) unless those
bytes are proven to be exactly its canonical encoding (:func:`decode_line`).

Two libraries, each for what it does best. Decoding is the standard library's, whose integers are
exact (orjson turns an integer over 64 bits into a float, silently changing the value); a small line
that orjson writes back byte for byte is provably parsed the same by both, and is parsed by orjson
alone (:func:`_parse_canonical`). Encoding uses orjson, seven times faster than ``json`` on a 16 MiB
message (8 ms against 60) and twenty times on a small one; where orjson refuses a value (an integer
over 64 bits, nesting over 254 levels) the standard library encodes it instead. The one difference:
orjson writes a NaN or an infinity built by local code as ``null``; decoded messages never hold one.
"""

from __future__ import annotations

import enum
import json
import math
import re
from collections.abc import Sequence
from typing import Any, TypeAlias, TypeGuard

import orjson

from .errors import InvalidMessage, ParseError

JSONObject: TypeAlias = dict[str, Any]
"""One JSON-RPC message, as decoded."""

RequestId: TypeAlias = int | str
"""A request id: JSON-RPC allows strings and numbers; MCP forbids null and the bridge refuses
fractions, so an id is an ``int`` (never a ``bool``) or a ``str``."""


class Kind(enum.Enum):
    """What a (valid) message is."""

    REQUEST = "request"
    NOTIFICATION = "notification"
    RESPONSE = "response"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number {text[:40]!r} is out of range")
    return value


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_parse_finite_float)
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
# The C scanner behind _DECODER: JSONDecoder.decode wraps it in Python (whitespace skipping, error
# positions) that costs a microsecond a message; lines without surrounding whitespace, nearly all of
# them, go to the scanner directly and everything else through decode() for its exact errors.
_SCAN = _DECODER.scan_once  # type: ignore[attr-defined]  # set by JSONDecoder.__init__
# Lines shorter than this that orjson writes back unchanged are parsed by orjson alone
# (_parse_canonical): what compact encoders write (the bridge, pydantic, JSON.stringify), parsed and
# checked in about two thirds of the strict parser's time. Longer lines are left to the strict
# parser (docs/design.md §5.2).
CANONICAL_LINE_LIMIT = 64 * 1024


def decode(line: bytes | bytearray | str) -> JSONObject:
    """Decode and validate one line (without its newline) as a JSON-RPC message.

    ``line`` is UTF-8 bytes, or text already decoded (a WebSocket text frame, whose UTF-8 the
    channel checked itself, since invalid UTF-8 there ends the connection).

    Raises:
        ParseError: the line is not acceptable JSON.
        InvalidMessage: it is JSON, but not one JSON-RPC 2.0 message. ``request_id`` is set when the
            message had a usable id, so the error reply can name it.
    """
    return _decode(line)[0]


def decode_line(line: bytes | bytearray) -> tuple[JSONObject, bytes | None]:
    r""":func:`decode`, and ``line`` itself if it is byte for byte what :func:`encode` writes.

    The second item is ``line`` when the canonical check of :func:`_parse_canonical` passed: then
    ``encode(message) == line + b"\n"``, and a relay may write ``line`` instead of encoding the
    message again, as long as it does not change the message (docs/design.md §5.2). Otherwise
    (a line not written back the same, or one of :data:`CANONICAL_LINE_LIMIT` or more) it is
    ``None``; always for a ``bytearray`` (a large line or body handed over in the buffer it was
    read into, channels/_core/framing.py), which is only decoded. Raises as :func:`decode`.
    """
    # _decode and _parse_canonical inlined for the usual line (bytes, short, canonical): two calls
    # fewer for every message a relay moves.
    if type(line) is bytes and len(line) < CANONICAL_LINE_LIMIT:
        try:
            message = orjson.loads(line)
            canonical = type(message) is dict and orjson.dumps(message) == line
        except (orjson.JSONDecodeError, orjson.JSONEncodeError):
            canonical = False
        if canonical:
            validate(message)
            return message, line
        return decode_strict(line), None
    if not isinstance(line, bytes):
        return decode_strict(line), None
    message, canonical = _decode(line)
    return message, line if canonical else None


def _decode(line: bytes | bytearray | str) -> tuple[JSONObject, bool]:
    """The message in ``line``, and whether ``line`` is its canonical encoding (both decoders' path)."""
    if len(line) < CANONICAL_LINE_LIMIT:
        message = _parse_canonical(line)
        if message is not None:
            validate(message)
            return message, True
    return decode_strict(line), False


def _parse_canonical(line: bytes | bytearray | str) -> JSONObject | None:
    """The value in ``line``, parsed by orjson, if orjson writes it back as exactly ``line``; else ``None``.

    Then the strict parse is the same value, so the strict parser need not run: ``line`` is
    compact JSON with canonical escapes and no duplicate key (either would not be written back),
    its integers fit 64 bits (a larger one becomes a float, written back with a ``.`` or an
    ``e``), each float is written as its shortest round-trip form (which parses back to that
    float in any correctly rounded parser), and it nests at most 254 levels (orjson writes no
    deeper), far below the strict parser's recursion limit. orjson refuses lone surrogates and
    invalid UTF-8. Anything else, refused or not written back the same, goes to the strict parser
    (tests/channels/core/test_jsonrpc_canonical.py checks that the two agree).
    """
    try:
        message = orjson.loads(line)
        if type(message) is not dict:
            return None
        written = orjson.dumps(message)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        return None
    if isinstance(line, str):
        line = line.encode("utf-8")  # orjson has read it: it encodes
    return message if written == line else None


def decode_strict(line: bytes | bytearray | str) -> JSONObject:
    """:func:`decode` by the standard library alone: every refusal and its error come from here.

    For a line that orjson did not parse and write back as it is (:mod:`channels._core.lines`), or
    a large one, which may come as the ``bytearray`` it was read into (channels/_core/framing.py).
    """
    message = decode_json(line)
    validate(message)
    return message  # type: ignore[no-any-return]


def decode_json(data: bytes | bytearray | str) -> Any:
    """``data`` as JSON of any shape (a 2025-03-26 batch's array), as strictly as :func:`decode` reads.

    Raises:
        ParseError: not acceptable JSON: not UTF-8, not one value, a NaN or Infinity, a number
            that overflows, a lone surrogate, or nesting past the recursion limit.
    """
    if isinstance(data, str):
        text = data
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"not UTF-8 (byte {exc.start})") from None
    try:
        try:
            value, end = _SCAN(text, 0)
        except StopIteration:
            end = -1
        if end != len(text):
            value = _DECODER.decode(text)
    except RecursionError:
        raise ParseError("JSON nested too deeply") from None
    except ValueError as exc:
        raise ParseError(f"invalid JSON: {exc}") from None
    # A lone surrogate can only come from a \uD8xx-\uDFxx escape; one memchr for a backslash
    # spares the check to texts without any escape (most lines, and most large ones).
    if "\\" in text and _has_lone_surrogate(value):
        raise ParseError("string holds a lone UTF-16 surrogate")
    return value


def _has_lone_surrogate(message: Any) -> bool:
    try:
        encode(message)
    except UnicodeEncodeError:
        return True
    return False


def encode(message: JSONObject, *, newline: bool = True) -> bytes:
    r"""Encode one message as a single ``\n``-terminated UTF-8 line.

    With ``newline=False`` the ``\n`` is left out (an HTTP body, an SSE event's data).

    A non-finite float (NaN, infinity), which JSON cannot carry, is written as ``null``, as
    JavaScript's ``JSON.stringify`` does; :func:`decode` never produces one, so only messages built
    locally can hold them.

    Raises:
        ValueError: the message holds a string JSON cannot carry (a lone surrogate).
        TypeError: the message holds a value that is not JSON data.
    """
    try:
        written = orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE if newline else None)
    except TypeError:  # orjson.JSONEncodeError: let the standard library decide, and say why
        return _ENCODER.encode(message).encode("utf-8") + (b"\n" if newline else b"")
    # orjson's buffer is never shrunk (4 KiB at least, 8-13x a long message): an exact copy (design §5.4)
    return bytes(memoryview(written))


def encode_lines(messages: Sequence[JSONObject], lines: Sequence[bytes | None] | None = None) -> bytes:
    r"""The bytes of a batch: each message checked by :func:`validate` and encoded, or its line.

    ``lines[i]``, where given and not ``None``, is written (with a ``\n``) for ``messages[i]``
    unchecked: it must be the line :func:`decode_line` returned with that message, unchanged since.

    Raises:
        ValueError: a message is not a JSON-RPC message, or holds a lone surrogate; ``lines`` is
            not as long as ``messages``.
        TypeError: a message holds a value that is not JSON data.
    """
    if lines is None:
        for message in messages:
            _check_to_send(message)
        return b"".join([encode(message) for message in messages])
    if len(lines) != len(messages):
        raise ValueError(f"{len(lines)} lines for {len(messages)} messages")
    if None not in lines:  # every message forwarded as it arrived: no loop in Python
        return b"\n".join([*lines, b""])  # type: ignore[list-item]  # no None, as checked
    parts: list[bytes] = []
    for message, line in zip(messages, lines, strict=True):
        if line is None:
            _check_to_send(message)
            parts.append(encode(message))
        else:
            parts += (line, b"\n")
    return b"".join(parts)


def _check_to_send(message: JSONObject) -> None:
    try:
        validate(message)
    except InvalidMessage as exc:
        raise ValueError(f"not a JSON-RPC message: {exc}") from None


def is_request_id(value: Any) -> TypeGuard[RequestId]:
    """Whether ``value`` can be a request id (``int`` but not ``bool``, or ``str``); never raises."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


# Exact types as the JSON decoder makes them; `type(x) in` also keeps bool out of the int ids.
_ID_TYPES = frozenset({int, str})
_PARAMS_TYPES = frozenset({dict, list})
_NO_PARAMS: dict[str, Any] = {}
# The kinds, looked up once: reading a member off an Enum class runs Python code in 3.11
# (EnumType's member descriptor), about 900 instructions (cachegrind), once per message in validate.
_REQUEST, _NOTIFICATION, _RESPONSE = Kind.REQUEST, Kind.NOTIFICATION, Kind.RESPONSE


def validate(message: Any) -> Kind:
    """Check that ``message`` is one JSON-RPC 2.0 message and say which kind.

    Only the envelope is checked (``jsonrpc``, ``id``, ``method``, ``params``, ``result``,
    ``error``); the values inside ``params`` and ``result`` are not, so a valid message may still
    fail to :func:`encode`.

    Raises:
        InvalidMessage: it is not; ``request_id`` is set when the message had a usable id.
    """
    # Fast path for the common shapes, built from exact types (what decode() produces); anything
    # else, errors and subclasses included, gets the thorough checks below.
    if type(message) is dict and message.get("jsonrpc") == "2.0":
        if "method" in message:
            if type(message["method"]) is str and type(message.get("params", _NO_PARAMS)) in _PARAMS_TYPES:
                if "id" not in message:
                    return _NOTIFICATION
                if type(message["id"]) in _ID_TYPES:
                    return _REQUEST
        elif "result" in message and "error" not in message and type(message.get("id")) in _ID_TYPES:
            return _RESPONSE
    return _validate_thoroughly(message)


def all_valid(messages: Sequence[Any]) -> bool:
    """Whether every message passes :func:`validate`'s fast path (so each is valid): one call a batch.

    False says only that some message needs :func:`validate` itself, which then says what it is.
    """
    for message in messages:  # the fast path of validate, as a test
        if type(message) is not dict or message.get("jsonrpc") != "2.0":
            return False
        if "method" in message:
            if (
                type(message["method"]) is not str
                or type(message.get("params", _NO_PARAMS)) not in _PARAMS_TYPES
            ):
                return False
            if "id" in message and type(message["id"]) not in _ID_TYPES:
                return False
        elif "result" not in message or "error" in message or type(message.get("id")) not in _ID_TYPES:
            return False
    return True


def _validate_thoroughly(message: Any) -> Kind:
    if not isinstance(message, dict):
        if isinstance(message, list):
            raise InvalidMessage("batches are not supported (MCP removed them in 2025-06-18)")
        raise InvalidMessage(f"expected a JSON object, got {type(message).__name__}")
    raw_id = message.get("id")
    request_id = raw_id if is_request_id(raw_id) else None
    if message.get("jsonrpc") != "2.0":
        raise InvalidMessage('"jsonrpc" must be "2.0"', request_id=request_id)
    if "method" in message:
        if not isinstance(message["method"], str):
            raise InvalidMessage('"method" must be a string', request_id=request_id)
        if "params" in message and not isinstance(message["params"], (dict, list)):
            raise InvalidMessage('"params" must be an object or an array', request_id=request_id)
        if "id" not in message:
            return Kind.NOTIFICATION
        if request_id is None:
            raise InvalidMessage('"id" must be a string or an integer')
        return Kind.REQUEST
    if "id" not in message:
        raise InvalidMessage('a message needs "method" or "id"')
    has_result, has_error = "result" in message, "error" in message
    if has_result == has_error:
        raise InvalidMessage('a response needs exactly one of "result" and "error"', request_id=request_id)
    if has_error:
        error = message["error"]
        if not (
            isinstance(error, dict)
            and isinstance(error.get("code"), int)
            and not isinstance(error.get("code"), bool)
            and isinstance(error.get("message"), str)
        ):
            raise InvalidMessage(
                '"error" needs an integer "code" and a string "message"', request_id=request_id
            )
        if raw_id is None:
            return Kind.RESPONSE
    if request_id is None:
        raise InvalidMessage('"id" must be a string or an integer')
    return Kind.RESPONSE


def kind(message: JSONObject) -> Kind:
    """The kind of a message already validated (cheaper than :func:`validate`).

    Nothing is checked: for a message that did not pass :func:`validate` the answer means nothing.
    """
    if "method" in message:
        return _REQUEST if "id" in message else _NOTIFICATION
    return _RESPONSE


# A reply's id, read from the first bytes of a line too large to decode. Python (pydantic) and most
# hand-written servers emit `{"jsonrpc":"2.0","id":...` first; anything else is not guessed at.
_LEADING_ID = re.compile(
    rb'\A\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?[0-9]{1,18}|"(?:[^"\\]|\\.){0,512}")\s*[,}]'
)


def sniff_leading_id(prefix: bytes) -> RequestId | None:
    """Recover the id of a message from its first bytes, if it is written first; else ``None``."""
    match = _LEADING_ID.match(prefix)
    if match is None:
        return None
    try:
        value = json.loads(match.group(1))
        if isinstance(value, str):
            value.encode("utf-8")  # a lone surrogate could not be written back in a reply
    except ValueError:  # UnicodeEncodeError included
        return None
    return value if is_request_id(value) else None
