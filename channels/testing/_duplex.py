"""The randomized duplex exchange: 1 MiB each way at once, in random batches, as trio's check does."""

from __future__ import annotations

import random

import trio

from .._core.channel import MessageChannel
from .._core.jsonrpc import JSONObject, encode
from ._support import assert_end_of_channel, notification, receive_expecting, request

# The randomized duplex exchange moves this many encoded bytes in each direction (as trio's does).
DUPLEX_TEST_BYTES = 2**20

# Text the duplex messages are drawn from: JSON escapes (quote, backslash, control characters), line
# separators that must not split a line (\u2028, \x85), multi-byte UTF-8 and an astral character.
_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789 "\\\n\r\t\x00\x85\u2028é€😀{}[]:,'

# At most this many encoded bytes per character of _ALPHABET ("\x00" becomes "\\u0000").
_MAX_ENCODED_BYTES_PER_CHAR = 6


def _random_messages(seed: int, total_bytes: int, max_message_bytes: int) -> list[JSONObject]:
    """Messages of random kinds and sizes whose encodings add up to at least ``total_bytes``."""
    r = random.Random(seed)
    max_chars = max_message_bytes // (2 * _MAX_ENCODED_BYTES_PER_CHAR)
    messages: list[JSONObject] = []
    sent = 0
    while sent < total_bytes:
        text = "".join(r.choices(_ALPHABET, k=r.randint(0, max_chars)))
        number = len(messages)
        shape = r.randrange(4)
        if shape == 0:
            message = request(number, "tools/call", text=text)
        elif shape == 1:
            message = request(str(number), "tools/call", text=text)
        elif shape == 2:
            message = notification("notifications/message", text=text)
        else:
            message = {"jsonrpc": "2.0", "id": number, "result": {"text": text}}
        messages.append(message)
        sent += len(encode(message))
    return messages


async def _send_in_random_batches(channel: MessageChannel, messages: list[JSONObject], seed: int) -> None:
    r = random.Random(seed)
    position = 0
    while position < len(messages):
        count = r.randint(1, 4)
        batch = messages[position : position + count]
        if count == 1:
            await channel.send(batch[0])
        else:
            await channel.send_many(batch)
        position += len(batch)


async def check_duplex_exchange(a: MessageChannel, b: MessageChannel, max_message_bytes: int) -> None:
    """A randomized 1 MiB each way, both directions at once, arrives intact and in order."""
    a_to_b = _random_messages(0, DUPLEX_TEST_BYTES, max_message_bytes)
    b_to_a = _random_messages(1, DUPLEX_TEST_BYTES, max_message_bytes)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_send_in_random_batches, a, a_to_b, 2)
        nursery.start_soon(_send_in_random_batches, b, b_to_a, 3)
        nursery.start_soon(receive_expecting, b, a_to_b)
        nursery.start_soon(receive_expecting, a, b_to_a)
    # and the end of one direction is seen as such
    async with trio.open_nursery() as nursery:
        nursery.start_soon(a.aclose)
        await assert_end_of_channel(b)
