"""Fuzzing the WebSocket listener: the upgrade request, then any frames after a valid upgrade.

Each example serves ``ws://127.0.0.1:0/mcp`` with the echo server of :mod:`fuzzing` and sends,
from a hand-written client, either a mutated upgrade request or a valid upgrade followed by frames
built field by field (any opcode, FIN, RSV bits, masked or not, any length encoding up to a 2**63
length, fragmented messages with control frames between the fragments, close codes valid and not,
invalid UTF-8, messages over the limit), with a few byte edits; then it ends its side, or vanishes
with a reset. A well-behaved WebSocket client runs alongside.

The invariant (h11's): the server answers the upgrade with 101 or a status below 500; after 101 it
sends only well-formed unmasked frames: echoes of the requests sent, JSON-RPC errors, and a close
with a code that names the peer's fault (never 1011, the server's own); a clean sequence of
request frames gets every echo; the server ends the connection soon after the client did; nothing
is logged with a traceback or at ERROR; and the other client gets exactly its own replies, its
marker never reaching the fuzzed connection.
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from fuzzing import (
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

MAX_MESSAGE = 1024  # small, so that over-limit messages cost little
OPTIONS = ListenOptions(max_message_bytes=MAX_MESSAGE, handshake_timeout=2.0)
EXAMPLE_DEADLINE = 15  # seconds; the server ends each connection at its EOF at once
KEY = base64.b64encode(b"fuzz-key-0123456").decode()  # any 16 bytes, base64 (RFC 6455 §4.1)
TEXT, BINARY, CONTINUATION, CLOSE, PING, PONG = 1, 2, 0, 8, 9, 10
# Close codes a server may send for a peer's fault or an orderly end (RFC 6455 §7.4.1): normal,
# going away, protocol error, unsupported data, invalid payload, policy violation, too big.
PEER_FAULT_CODES = {1000, 1001, 1002, 1003, 1007, 1008, 1009}
ERROR_CODES = {-32700, -32600}


def upgrade_request(port: int, *, extra: bytes = b"") -> bytes:
    return (
        b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mcp\r\n%s\r\n"
        % (port, KEY.encode(), extra)
    )


@attrs.frozen
class FrameSpec:
    """One client frame, field by field, including what RFC 6455 forbids."""

    opcode: int
    payload: bytes
    fin: bool = True
    rsv: int = 0
    masked: bool = True
    length: str = "minimal"  # or "16", "64", "huge": a non-minimal or impossible length field

    def encode(self) -> bytes:
        first = bytes([(0x80 if self.fin else 0) | (self.rsv << 4) | self.opcode])
        mask_bit = 0x80 if self.masked else 0
        size = len(self.payload)
        if self.length == "huge":
            header = bytes([mask_bit | 127]) + (1 << 63).to_bytes(8, "big")
        elif self.length == "64" or size >= 1 << 16:
            header = bytes([mask_bit | 127]) + size.to_bytes(8, "big")
        elif self.length == "16" or size >= 126:
            header = bytes([mask_bit | 126]) + size.to_bytes(2, "big")
        else:
            header = bytes([mask_bit | size])
        if not self.masked:
            return first + header + self.payload
        mask = b"\x37\xfa\x21\x3d"
        return first + header + mask + bytes(byte ^ mask[i % 4] for i, byte in enumerate(self.payload))

    @property
    def clean_request(self) -> bool:
        """A frame the server must answer with an echo, as the only kind in a sequence."""
        return (self.opcode, self.fin, self.rsv, self.masked, self.length) == (TEXT, True, 0, True, "minimal")


def request_payload(request_id: int, method: str = "ping") -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method}).encode()


close_payloads = st.one_of(
    st.just(b""),
    st.builds(
        lambda code, reason: struct.pack("!H", code) + reason,
        st.sampled_from([1000, 1001, 1002, 1005, 1006, 1011, 1015, 999, 2999, 3000, 4999, 5000, 65535]),
        st.sampled_from([b"", b"bye", b"\xff\xfe", b"x" * 124]),
    ),
    st.binary(max_size=1),
)


@st.composite
def frame_specs(draw: st.DrawFn, index: int) -> FrameSpec:
    kind = draw(st.sampled_from(["request", "request", "request", "fragmented", "control", "other"]))
    if kind == "request":
        return FrameSpec(TEXT, request_payload(index))
    if kind == "fragmented":  # one piece of a fragmented message (the pieces come from several draws)
        payload = request_payload(index)
        cut = draw(st.integers(0, len(payload)))
        return draw(
            st.sampled_from(
                [FrameSpec(TEXT, payload[:cut], fin=False), FrameSpec(CONTINUATION, payload[cut:])]
            )
        )
    if kind == "control":
        opcode = draw(st.sampled_from([PING, PONG, CLOSE]))
        payload = draw(close_payloads) if opcode == CLOSE else draw(st.binary(max_size=130))
        return FrameSpec(opcode, payload, fin=draw(st.booleans()))
    payload = draw(
        st.one_of(
            st.binary(max_size=64),
            st.sampled_from([b"\xff\xfe", b'{"jsonrpc":"2.0","id":1,"method":"\xed\xa0\x80"}', b"[]", b"{}"]),
            st.builds(lambda n: b"x" * n, st.integers(MAX_MESSAGE - 8, MAX_MESSAGE + 8)),
            st.builds(lambda n: b"[" * n + b"]" * n, st.integers(1, 500)),
        )
    )
    return FrameSpec(
        draw(st.sampled_from([TEXT, BINARY, CONTINUATION, 3, 7, 11, 15])),
        payload,
        fin=draw(st.booleans()),
        rsv=draw(st.sampled_from([0, 0, 0, 1, 2, 4, 7])),
        masked=draw(st.booleans()),
        length=draw(st.sampled_from(["minimal", "minimal", "16", "64", "huge"])),
    )


@st.composite
def frame_sequences(draw: st.DrawFn) -> tuple[list[FrameSpec], bytes]:
    """Frames and their bytes after edits (frames built from valid ones, mostly)."""
    specs = [draw(frame_specs(index)) for index in range(draw(st.integers(1, 6)))]
    return specs, mutated(b"".join(spec.encode() for spec in specs), draw(edit_lists))


# -- what comes back -----------------------------------------------------------------------------


@attrs.frozen
class ServerFrame:
    opcode: int
    payload: bytes


def parse_response(received: bytes) -> tuple[int | None, list[ServerFrame]]:
    """The upgrade's status (``None`` if the server closed without a word) and the frames after a 101."""
    if not received:
        return None, []
    head, separator, rest = received.partition(b"\r\n\r\n")
    assert separator, f"an incomplete response head: {received[:300]!r}"
    status = int(head.split(b" ", 2)[1])
    if status != 101:
        return status, []
    frames = []
    while rest:
        assert len(rest) >= 2, f"a cut frame: {rest!r}"
        first, second = rest[0], rest[1]
        assert not second & 0x80, "a server frame was masked"
        size, at = second & 0x7F, 2
        if size == 126:
            size, at = int.from_bytes(rest[2:4], "big"), 4
        elif size == 127:
            size, at = int.from_bytes(rest[2:10], "big"), 10
        assert len(rest) >= at + size, f"a cut frame: {rest[:100]!r}"
        frames.append(ServerFrame(first & 0x0F, rest[at : at + size]))
        rest = rest[at + size :]
    return status, frames


def check_frames(
    frames: list[ServerFrame],
    sent_ids: set[int],
    answered: set[int],
    echoed_codes: frozenset[int] = frozenset(),
) -> None:
    """Every frame an echo of a request sent or a JSON-RPC error, a close with a peer-fault code
    or one of ``echoed_codes`` (the client's own close code, which a closing reply repeats, RFC
    6455 §5.5.1); ``answered`` must all be echoed."""
    echoed = set()
    for frame in frames:
        if frame.opcode == TEXT:
            reply = json.loads(frame.payload)
            if "error" in reply:
                assert reply["error"]["code"] in ERROR_CODES, reply
            else:
                assert reply["id"] in sent_ids, reply
                echoed.add(reply["id"])
        elif frame.opcode == CLOSE:
            if frame.payload:
                code = struct.unpack("!H", frame.payload[:2])[0]
                assert code in PEER_FAULT_CODES | echoed_codes, frame
        else:
            assert frame.opcode in (PING, PONG), frame
    assert answered <= echoed, (answered, frames)


# -- the clients ---------------------------------------------------------------------------------


async def well_behaved(port: int) -> None:
    """An upgrade and two requests, each answered with exactly its own echo."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(upgrade_request(port))
        buffer = b""
        for number in range(2):
            message = {
                "jsonrpc": "2.0",
                "id": f"good-{number}",
                "method": "ping",
                "params": {"marker": MARKER},
            }
            await stream.send_all(FrameSpec(TEXT, json.dumps(message).encode()).encode())
            while True:
                data = await stream.receive_some(1 << 16)
                assert data, "the well-behaved client was disconnected"
                buffer += data
                status, frames = parse_response(buffer) if b"\r\n\r\n" in buffer else (None, [])
                if len(frames) > number and frames_complete(buffer):
                    break
            assert status == 101 and frames[number].opcode == TEXT, frames
            reply = json.loads(frames[number].payload)
            assert reply["id"] == f"good-{number}" and reply["result"]["params"] == {"marker": MARKER}


def frames_complete(buffer: bytes) -> bool:
    try:
        parse_response(buffer)
    except AssertionError:
        return False
    return True


def fuzz(sent: bytes, cuts: list[int], *, vanish: bool, check: Any) -> None:
    async def scenario(address: str) -> None:
        port = int(address.rsplit(":", 1)[1].split("/")[0])
        data = sent.replace(b"{PORT}", b"%d" % port)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(well_behaved, port)
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with stream:
                if vanish:
                    await send_and_vanish(stream, chunked(data, cuts))
                    return
                nursery.start_soon(send_in_chunks, stream, chunked(data, cuts), True)
                received = await read_until_closed(stream)
        assert MARKER.encode() not in received, "another connection's reply reached the fuzzed one"
        check(received)

    run_example("ws://127.0.0.1:0/mcp", OPTIONS, scenario, EXAMPLE_DEADLINE)


clients = st.sampled_from(["ends", "ends", "ends", "vanishes"])


@fuzz_settings()
@given(frame_sequences(), cut_lists, clients)
def test_no_frames_after_a_valid_upgrade_get_a_server_fault_a_traceback_a_hang_or_anothers_reply(
    frames: tuple[list[FrameSpec], bytes], cuts: list[int], client: str
) -> None:
    specs, data = frames
    sent_ids = set(range(len(specs)))  # frame i carries request i, if any
    clean = data == b"".join(spec.encode() for spec in specs) and all(spec.clean_request for spec in specs)

    def check(received: bytes) -> None:
        status, server_frames = parse_response(received)
        assert status == 101, received[:300]
        codes = frozenset(
            struct.unpack("!H", spec.payload[:2])[0]
            for spec in specs
            if spec.opcode == CLOSE and len(spec.payload) >= 2
        )
        check_frames(server_frames, sent_ids, sent_ids if clean else set(), codes)

    fuzz(
        upgrade_request(0).replace(b":0\r\n", b":{PORT}\r\n") + data,
        cuts,
        vanish=client == "vanishes",
        check=check,
    )


@fuzz_settings(share=0.5)
@given(edit_lists, st.lists(st.binary(max_size=40), max_size=2), cut_lists, clients)
def test_no_mutated_upgrade_request_gets_a_server_fault_a_traceback_a_hang_or_anothers_reply(
    edits: list[Any], extra: list[bytes], cuts: list[int], client: str
) -> None:
    headers = b"".join(b"X-Fuzz: " + value + b"\r\n" for value in extra)
    request = upgrade_request(0, extra=headers).replace(b":0\r\n", b":{PORT}\r\n")
    sent = mutated(request + FrameSpec(TEXT, request_payload(1)).encode(), edits)

    def check(received: bytes) -> None:
        status, frames = parse_response(received)
        assert status is None or status == 101 or 400 <= status < 500, received[:300]
        check_frames(frames, {1}, set())

    fuzz(sent, cuts, vanish=client == "vanishes", check=check)


# -- what the fuzzing found ----------------------------------------------------------------------


@pytest.mark.parametrize("sent", [b"GARBAGE\r\n\r\n", b"GET /mcp HTTP/1.1\r\nX-Fuzz: \x00\r\n\r\n"])
def test_a_request_that_is_not_http_is_answered_400_and_the_listener_keeps_serving(sent: bytes) -> None:
    # websockets ends its side on a request it cannot parse; answering it then failed an assertion
    # of the library's that escaped the handshake and ended the listener's nursery.
    def check(received: bytes) -> None:
        assert parse_response(received)[0] == 400, received

    fuzz(sent, [], vanish=False, check=check)
