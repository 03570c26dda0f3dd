"""The WebSocket frames a relay moves all day, read and written without the general machinery.

``websockets`` parses every frame with a generator-based reader and builds every frame through a
``Frame`` object and ``BytesIO``: correct for everything RFC 6455 allows, and about 5 µs of CPU a
frame here (about a quarter of the bridge's whole cost per relayed call on ``ws://``). Almost every
frame a bridge sees is the same simple thing: one whole JSON-RPC message in one final text frame,
masked from the client, unmasked to it. This module reads and writes exactly that, and nothing
else:

* :func:`take_text_frames` unmasks complete, final, unfragmented, masked text frames with no RSV
  bits, no larger than the size limit, from the start of a buffer, and stops at the first frame
  that is anything else (or incomplete).
* :func:`frame_extent` reads any frame's header: how long the header is and how long the payload
  it announces. With it the caller hands the library whole frames only, so that the library is
  always between two frames when the shortcut reads the next one, exactly as if it had parsed
  the frames before it itself; the library applies every rule to the frames it gets (control
  frames, fragments, 1002, 1007, 1009...).
* :func:`text_frame_header` is the header of an unmasked final text frame (RFC 6455 §5.2).

The caller decides when the shortcut applies: on the server side, while the connection is open
and no fragmented message is being reassembled, and only without extensions (none are
negotiated).
"""

from __future__ import annotations

import struct

from websockets.speedups import apply_mask  # the library's C unmasking

# RFC 6455 §5.2: byte 0 of a final (FIN) text frame (opcode 1) with no RSV bits; byte 1's top bit
# says the payload is masked; lengths up to 125 fit in byte 1, 126 means a 16-bit length follows,
# 127 a 64-bit one; a masked frame carries a 4-byte key before its payload.
FINAL_TEXT = 0x81
MASKED = 0x80
LENGTH_7_MAX = 125
LENGTH_16 = 126
LENGTH_64 = 127
MASK_KEY_BYTES = 4
SHORTEST_MASKED_FRAME = 2 + MASK_KEY_BYTES
# A payload up to this long is unmasked from a copy (a slice) instead of a memoryview of the buffer:
# copying 2 KiB took less time than making the two memoryview objects (timeit here: 0.8 against
# 0.9 µs at 2 KiB, 0.56 against 0.8 at 1 KiB, 0.36 against 0.43 at 128 bytes).
SLICED_PAYLOAD_BYTES = 2048
_U16 = struct.Struct("!H")
_U64 = struct.Struct("!Q")
_HEADER_16 = struct.Struct("!BBH")
_HEADER_64 = struct.Struct("!BBQ")


def take_text_frames(data: bytes | bytearray, max_size: int) -> tuple[list[bytes], int]:
    """The payloads of the simple text frames at the start of ``data``, and how many bytes they took.

    Args:
        data: bytes received, starting on a frame boundary.
        max_size: the largest payload taken; a larger frame is left to the library (close 1009).

    Returns:
        The unmasked payloads, in order, and the offset of the first byte not consumed: the start
        of a frame that is not a complete simple text frame, or ``len(data)``.

    Each header is read here rather than by :func:`frame_extent` (the same rules), and a small
    payload is unmasked from a slice rather than a memoryview: a relay's requests are a hundred
    bytes or so, and the call and the two memoryview objects cost more than the frame's unmasking.
    """
    payloads: list[bytes] = []
    end = len(data)
    start = 0
    view = None  # made for the first large payload, which is unmasked where it lies (no copy)
    try:
        while end - start >= SHORTEST_MASKED_FRAME and data[start] == FINAL_TEXT:
            length = data[start + 1] - MASKED  # negative: not masked
            if length < 0:
                break
            if length <= LENGTH_7_MAX:
                payload = start + SHORTEST_MASKED_FRAME
            elif length == LENGTH_16:
                payload = start + SHORTEST_MASKED_FRAME + 2
                if payload > end:
                    break
                (length,) = _U16.unpack_from(data, start + 2)
            else:
                payload = start + SHORTEST_MASKED_FRAME + 8
                if payload > end:
                    break
                (length,) = _U64.unpack_from(data, start + 2)
            stop = payload + length
            if length > max_size or stop > end:
                break
            key = data[payload - MASK_KEY_BYTES : payload]
            if length <= SLICED_PAYLOAD_BYTES:
                payloads.append(apply_mask(data[payload:stop], key))
            else:
                if view is None:
                    view = memoryview(data)
                payloads.append(apply_mask(view[payload:stop], key))
            start = stop
    finally:
        if view is not None:
            view.release()  # a bytearray can grow again
    return payloads, start


def frame_extent(data: bytes | bytearray, start: int) -> tuple[int, int] | None:
    """The header size (mask key included) and payload size of the frame at ``data[start:]``.

    Returns:
        ``None`` if the header is not complete yet.
    """
    available = len(data) - start
    if available < 2:
        return None
    second = data[start + 1]
    length = second & ~MASKED
    header = 2 + (MASK_KEY_BYTES if second & MASKED else 0)
    if length == LENGTH_16:
        header += 2
        if available < header:
            return None
        (length,) = _U16.unpack_from(data, start + 2)
    elif length == LENGTH_64:
        header += 8
        if available < header:
            return None
        (length,) = _U64.unpack_from(data, start + 2)
    return (header, length) if available >= header else None


def text_frame_header(length: int) -> bytes:
    """The header of an unmasked final text frame with a ``length``-byte payload (server to client)."""
    if length <= LENGTH_7_MAX:
        return bytes((FINAL_TEXT, length))
    if length < 1 << 16:
        return _HEADER_16.pack(FINAL_TEXT, LENGTH_16, length)
    return _HEADER_64.pack(FINAL_TEXT, LENGTH_64, length)
