"""The WebSocket shortcuts (channels/_ws/frames.py) against RFC 6455 and the ``websockets`` library.

The sans-IO reader must take exactly the simple text frames a bridge sees all day and leave every
other frame, byte for byte, to the library; the header writer must produce what the library
parses back as the same text frame. Then the whole channel, shortcut and library together, must
deliver any mix of frames, in any chunking, as the library alone would.
"""

from __future__ import annotations

import json
import random
from typing import Any

import attrs
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from test_websocket import (
    BINARY,
    CLOSE,
    CONTINUATION,
    PING,
    PONG,
    TEXT,
    RawWebSocket,
    client_frame,
    echo_server,
    upgrade_request,
)
from websockets.client import ClientProtocol
from websockets.frames import Opcode
from websockets.protocol import State
from websockets.uri import parse_uri

from channels._ws.frames import take_text_frames, text_frame_header

TIMEOUT = 20  # seconds for one example over a real socket

# Payload lengths at RFC 6455 §5.2's encoding boundaries (7-bit, 16-bit, 64-bit), and small ones.
BOUNDARY_LENGTHS = [0, 1, 125, 126, 127, 65535, 65536, 65537]
lengths = st.one_of(st.integers(min_value=0, max_value=300), st.sampled_from(BOUNDARY_LENGTHS))


@attrs.frozen
class RawFrame:
    """A frame as a client could put it on the wire, rules broken or not."""

    opcode: int
    payload: bytes
    fin: bool
    masked: bool
    rsv1: bool

    def encode(self) -> bytes:
        """RFC 6455 §5.2, written out independently of the code under test."""
        first = (0x80 if self.fin else 0) | (0x40 if self.rsv1 else 0) | self.opcode
        mask_bit = 0x80 if self.masked else 0
        size = len(self.payload)
        if size < 126:
            head = bytes([first, mask_bit | size])
        elif size < 1 << 16:
            head = bytes([first, mask_bit | 126]) + size.to_bytes(2, "big")
        else:
            head = bytes([first, mask_bit | 127]) + size.to_bytes(8, "big")
        if not self.masked:
            return head + self.payload
        key = b"\x9c\x01\x5e\xe2"
        return head + key + bytes(byte ^ key[index % 4] for index, byte in enumerate(self.payload))

    def simple_text(self, max_size: int) -> bool:
        return (
            self.opcode == TEXT
            and self.fin
            and self.masked
            and not self.rsv1
            and len(self.payload) <= max_size
        )


@st.composite
def frames(draw: Any) -> RawFrame:
    """A frame a client might send: mostly simple text frames, sometimes anything else."""
    opcode = draw(st.sampled_from([TEXT, TEXT, TEXT, BINARY, CONTINUATION, PING, PONG]))
    data_frame = opcode in (TEXT, BINARY, CONTINUATION)
    size = draw(lengths) if data_frame else draw(st.integers(0, 125))
    return RawFrame(
        opcode,
        draw(st.binary(min_size=size, max_size=size)),
        fin=draw(st.integers(0, 4)) > 0 if data_frame else True,
        masked=draw(st.integers(0, 9)) > 0,
        rsv1=draw(st.integers(0, 9)) == 0,
    )


@settings(max_examples=300, deadline=None)
@given(
    sequence=st.lists(frames(), max_size=8),
    max_size=st.sampled_from([0, 125, 126, 65536, 1 << 20]),
    cut=st.integers(min_value=0, max_value=12),
)
def test_the_reader_takes_exactly_the_leading_complete_simple_text_frames(
    sequence: list[RawFrame], max_size: int, cut: int
) -> None:
    encoded = [frame.encode() for frame in sequence]
    data = b"".join(encoded)
    data = data[: max(0, len(data) - cut)]  # maybe a frame left incomplete at the end
    expected: list[bytes] = []
    expected_taken = 0
    for frame, raw in zip(sequence, encoded, strict=True):
        if not frame.simple_text(max_size) or expected_taken + len(raw) > len(data):
            break
        expected.append(frame.payload)
        expected_taken += len(raw)

    payloads, taken = take_text_frames(data, max_size)

    assert payloads == expected
    assert taken == expected_taken


@settings(deadline=None)
@given(length=st.one_of(st.sampled_from(BOUNDARY_LENGTHS), st.integers(min_value=0, max_value=70000)))
def test_the_header_writer_makes_a_frame_the_library_reads_back_as_the_same_text(length: int) -> None:
    payload = random.Random(length).randbytes(length)
    client = ClientProtocol(parse_uri("ws://127.0.0.1/"), max_size=None)
    client.state = State.OPEN  # past the handshake: only frames from here on
    client.parser = client.parse()
    next(client.parser)

    client.receive_data(text_frame_header(length) + payload)

    [frame] = client.events_received()
    assert (frame.opcode, frame.fin, frame.data) == (Opcode.TEXT, True, payload)


# -- the channel: shortcut and library together ----------------------------------------------


@st.composite
def conversations(draw: Any) -> tuple[list[tuple[int, bytes, bool]], list[int]]:
    """Client frames carrying numbered requests (whole, or fragmented), with pings between; and
    the sizes of the writes they are cut into."""
    out: list[tuple[int, bytes, bool]] = []
    for number in range(draw(st.integers(min_value=1, max_value=6))):
        text = "x" * draw(lengths)
        body = json.dumps({"jsonrpc": "2.0", "id": number, "method": "echo", "params": {"t": text}}).encode()
        if draw(st.booleans()):
            out.append((PING, b"p%d" % number, True))
        pieces = draw(st.integers(min_value=1, max_value=3))
        step = len(body) // pieces + 1
        parts = [body[i : i + step] for i in range(0, len(body), step)]
        for index, part in enumerate(parts):
            out.append((TEXT if index == 0 else CONTINUATION, part, index == len(parts) - 1))
    total = sum(len(client_frame(opcode, payload, fin=fin)) for opcode, payload, fin in out)
    cuts = sorted(draw(st.lists(st.integers(min_value=1, max_value=max(1, total - 1)), max_size=6)))
    return out, cuts


@settings(max_examples=50, deadline=None)
@given(conversation=conversations())
def test_any_mix_of_whole_fragmented_and_control_frames_in_any_chunking_is_delivered_in_order(
    conversation: tuple[list[tuple[int, bytes, bool]], list[int]],
) -> None:
    sent, cuts = conversation
    data = b"".join(client_frame(opcode, payload, fin=fin) for opcode, payload, fin in sent)
    requests = sum(1 for opcode, _, _ in sent if opcode == TEXT)
    pings = [payload for opcode, payload, _ in sent if opcode == PING]

    async def main() -> tuple[list[Any], list[bytes]]:
        with trio.fail_after(TIMEOUT):
            async with echo_server() as server:
                client = await RawWebSocket.open(server.port)
                await client.upgrade(f"127.0.0.1:{server.port}")
                for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
                    if end > start:
                        await client.send(data[start:end])
                        await trio.sleep(0)  # let the server read each piece on its own
                replies: list[Any] = []
                pongs: list[bytes] = []
                while len(replies) < requests or len(pongs) < len(pings):
                    frame = await client.receive_frame()
                    if frame.opcode == PONG:
                        pongs.append(frame.payload)
                    else:
                        replies.append(frame.json())
                await client.aclose()
        return replies, pongs

    replies, pongs = trio.run(main)

    assert [reply["id"] for reply in replies] == list(range(requests))
    assert all("error" not in reply for reply in replies), replies
    assert pongs == pings


async def test_bytes_inside_a_frame_split_across_reads_are_never_read_as_a_frame_of_their_own() -> None:
    # The payload of an outer frame, as it travels, is itself a well-formed simple text frame
    # holding a request. Its header comes in one read and its payload in the next: read from a
    # frame boundary, the payload would pass for a frame and the smuggled request be answered.
    smuggled = client_frame(TEXT, json.dumps({"jsonrpc": "2.0", "id": "smuggled", "method": "x"}).encode())
    first = json.dumps({"jsonrpc": "2.0", "id": "first", "method": "x"}).encode()
    key = b"\x00\x00\x00\x00"  # the outer payload travels as is
    outer = client_frame(TEXT, smuggled, mask=key)
    header = outer[: len(outer) - len(smuggled)]
    with trio.fail_after(TIMEOUT):
        async with echo_server() as server:
            client = await RawWebSocket.open(server.port)
            await client.upgrade(f"127.0.0.1:{server.port}")
            await client.send(client_frame(TEXT, first) + header)
            assert (await client.receive_frame()).json()["id"] == "first"  # that read is done
            await client.send(smuggled)
            frames, close = await client.receive_until_close()
    assert all(b"smuggled" not in frame.payload for frame in frames), frames
    assert close.code == 1007  # the outer frame's payload is not UTF-8 text


async def test_frames_sent_right_behind_the_upgrade_request_are_read_once_it_is_accepted() -> None:
    requests = [json.dumps({"jsonrpc": "2.0", "id": n, "method": "x"}).encode() for n in range(3)]
    frames = client_frame(TEXT, requests[0]) + client_frame(PING, b"early") + client_frame(TEXT, requests[1])
    frames += client_frame(TEXT, requests[2])[:5]  # and the start of one more
    with trio.fail_after(TIMEOUT):
        async with echo_server() as server:
            client = await RawWebSocket.open(server.port)
            await client.send(upgrade_request(host=f"127.0.0.1:{server.port}") + frames)
            assert (await client.read_response()).status == 101
            await client.send(client_frame(TEXT, requests[2])[5:])
            received = [await client.receive_frame() for _ in range(4)]
            await client.aclose()
    assert [frame.payload for frame in received if frame.opcode == PONG] == [b"early"]
    assert [frame.json()["id"] for frame in received if frame.opcode == TEXT] == [0, 1, 2]


async def test_a_ping_sent_right_behind_the_upgrade_request_is_answered_without_more_traffic() -> None:
    with trio.fail_after(TIMEOUT):
        async with echo_server() as server:
            client = await RawWebSocket.open(server.port)
            request = upgrade_request(host=f"127.0.0.1:{server.port}")
            await client.send(request + client_frame(PING, b"early"))
            assert (await client.read_response()).status == 101
            pong = await client.receive_frame()
            await client.aclose()
    assert (pong.opcode, pong.payload) == (PONG, b"early")


async def test_a_close_sent_right_behind_the_upgrade_request_is_answered_with_a_close() -> None:
    with trio.fail_after(TIMEOUT):
        async with echo_server() as server:
            client = await RawWebSocket.open(server.port)
            request = upgrade_request(host=f"127.0.0.1:{server.port}")
            await client.send(request + client_frame(CLOSE, (1000).to_bytes(2, "big")))
            assert (await client.read_response()).status == 101
            frames, close = await client.receive_until_close()
            await client.aclose()
    assert frames == []
    assert close.code == 1000


# -- large frames: read into a buffer of their own size (channels/_ws/receiver.py) ---------------

# Around one read (64 KiB) and well past it; a text of several reads' worth, and one of many.
LARGE_TEXT_SIZES = [65_536 - 100, 65_536 + 100, 300_000, 1_500_000]


def masked_frame(payload: bytes, mask: bytes = b"\x9a\x01\xfe\x42") -> bytes:
    """client_frame(TEXT, payload) for large payloads (> 64 KiB), masked with one big-integer XOR."""
    size = len(payload)
    keystream = (mask * (size // 4 + 1))[:size]
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes(keystream, "big")).to_bytes(size, "big")
    return bytes([0x80 | TEXT, 0x80 | 127]) + size.to_bytes(8, "big") + mask + masked


@pytest.mark.parametrize("write_size", [None, 1000, 65_536, 100_003])
async def test_large_frames_arrive_whole_and_in_order_with_the_frames_written_right_behind_them(
    write_size: int | None,
) -> None:
    data = b""
    for number, size in enumerate(LARGE_TEXT_SIZES):
        text = "".join(chr(0x41 + (number + offset) % 26) for offset in range(64)) * (size // 64 + 1)
        large = json.dumps(
            {"jsonrpc": "2.0", "id": 2 * number, "method": "echo", "params": {"t": text[:size]}}
        )
        small = json.dumps({"jsonrpc": "2.0", "id": 2 * number + 1, "method": "echo"})
        data += (
            masked_frame(large.encode())
            + client_frame(TEXT, small.encode())
            + client_frame(PING, b"%d" % number)
        )
    pieces = (
        [data] if write_size is None else [data[i : i + write_size] for i in range(0, len(data), write_size)]
    )
    replies: list[Any] = []
    pongs: list[bytes] = []

    async def write(client: RawWebSocket) -> None:
        for piece in pieces:
            await client.send(piece)
            await trio.sleep(0)  # let the server read each piece on its own

    with trio.fail_after(TIMEOUT):
        async with echo_server() as server:
            client = await RawWebSocket.open(server.port)
            await client.upgrade(f"127.0.0.1:{server.port}")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(write, client)  # while the replies are read: no deadlock on full buffers
                while len(replies) < 2 * len(LARGE_TEXT_SIZES) or len(pongs) < len(LARGE_TEXT_SIZES):
                    frame = await client.receive_frame()
                    (pongs if frame.opcode == PONG else replies).append(frame.payload)
            await client.aclose()

    decoded = [json.loads(reply) for reply in replies]
    assert [reply["id"] for reply in decoded] == list(range(2 * len(LARGE_TEXT_SIZES)))
    sizes = [len(reply["result"]["params"]["t"]) for reply in decoded[::2]]
    assert sizes == LARGE_TEXT_SIZES
    assert pongs == [b"%d" % number for number in range(len(LARGE_TEXT_SIZES))]


async def test_a_large_frame_cut_short_by_the_end_of_the_connection_is_never_delivered() -> None:
    text = "x" * 200_000
    frame = masked_frame(
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {"t": text}}).encode()
    )
    with trio.fail_after(TIMEOUT):
        async with echo_server() as server:
            client = await RawWebSocket.open(server.port)
            await client.upgrade(f"127.0.0.1:{server.port}")
            await client.send_json({"jsonrpc": "2.0", "id": 0, "method": "echo"})
            assert json.loads((await client.receive_frame()).payload)["id"] == 0
            await client.send(frame[:150_000])  # past the first read, short of the end
            await client.stream.send_eof()
            rest = await client.wait_closed()  # the server ends the connection, answering nothing
    assert rest == b""
