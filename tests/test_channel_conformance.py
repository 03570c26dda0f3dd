"""Every channel kind passes the generic conformance suite, over real components.

The kinds: memory streams, a real Unix socket, real TCP on loopback, and child pipes (two ``cat``
processes, so that each direction really crosses a process boundary).
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from channels import (
    ConnectOptions,
    ListenOptions,
    MessageChannel,
    PeerInfo,
    StreamChannel,
    TcpAddress,
    UnixAddress,
)
from channels.testing import PairMaker, check_message_channel

# The whole suite for one kind: about 45 checks, each with its own deadline inside.
SUITE_TIMEOUT = 120

Pair = tuple[MessageChannel, MessageChannel]


async def memory_pair(max_message_bytes: int) -> Pair:
    left, right = trio.testing.memory_stream_pair()
    return (StreamChannel(left, max_message_bytes=max_message_bytes, peer=PeerInfo("memory")),
            StreamChannel(right, max_message_bytes=max_message_bytes, peer=PeerInfo("memory")))


async def lockstep_pair(max_message_bytes: int) -> Pair:
    """Memory streams without any buffering: a send blocks until the peer receives it."""
    left, right = trio.testing.lockstep_stream_pair()
    return (StreamChannel(left, max_message_bytes=max_message_bytes, peer=PeerInfo("memory")),
            StreamChannel(right, max_message_bytes=max_message_bytes, peer=PeerInfo("memory")))


async def listener_pair(address: UnixAddress | TcpAddress, max_message_bytes: int) -> Pair:
    """Listen, connect, accept one connection, close the listener: (connected, accepted)."""
    listeners = await address.listen(ListenOptions(max_message_bytes=max_message_bytes))
    try:
        listener = listeners[0]
        connect_to = TcpAddress.parse(listener.address) if isinstance(address, TcpAddress) else address
        async with trio.open_nursery() as nursery:
            accepted: list[MessageChannel] = []

            async def accept() -> None:
                accepted.append(await listener.accept())

            nursery.start_soon(accept)
            connected = await connect_to.connect(ConnectOptions(max_message_bytes=max_message_bytes))
        return connected, accepted[0]
    finally:
        for each in listeners:
            await each.aclose()


@asynccontextmanager
async def cat_pairs() -> AsyncIterator[PairMaker]:
    """A maker of channels through two ``cat`` children; kills and reaps every cat on exit.

    Channel A writes to cat A and reads what cat B echoes; channel B the other way round.
    """
    cats: list[trio.Process] = []

    async def start_cat() -> trio.Process:
        cat = await trio.lowlevel.open_process(["cat"], stdin=subprocess.PIPE,
                                               stdout=subprocess.PIPE)
        cats.append(cat)
        return cat

    async def make_pair(max_message_bytes: int) -> Pair:
        cat_a, cat_b = await start_cat(), await start_cat()
        assert cat_a.stdin and cat_a.stdout and cat_b.stdin and cat_b.stdout
        a = StreamChannel(trio.StapledStream(cat_a.stdin, cat_b.stdout),
                          max_message_bytes=max_message_bytes, peer=PeerInfo("pipe"))
        b = StreamChannel(trio.StapledStream(cat_b.stdin, cat_a.stdout),
                          max_message_bytes=max_message_bytes, peer=PeerInfo("pipe"))
        return a, b

    try:
        yield make_pair
    finally:
        with trio.CancelScope(shield=True):
            for cat in cats:
                cat.kill()
                await cat.wait()
                for pipe in (cat.stdin, cat.stdout):
                    if pipe is not None:
                        await trio.aclose_forcefully(pipe)


async def test_a_memory_stream_channel_keeps_the_channel_contract() -> None:
    with trio.fail_after(SUITE_TIMEOUT):
        await check_message_channel(memory_pair, make_clogged_pair=lockstep_pair,
                                    half_closeable=True)


async def test_a_unix_socket_channel_keeps_the_channel_contract(sock_dir: Path) -> None:
    address = UnixAddress(str(sock_dir / "conformance.sock"))

    async def make_pair(max_message_bytes: int) -> Pair:
        return await listener_pair(address, max_message_bytes)

    with trio.fail_after(SUITE_TIMEOUT):
        # Kernel socket buffers are bounded: the plain pair clogs when nobody reads.
        await check_message_channel(make_pair, make_clogged_pair=make_pair, half_closeable=True)


async def test_a_tcp_channel_keeps_the_channel_contract() -> None:
    address = TcpAddress("127.0.0.1", 0)

    async def make_pair(max_message_bytes: int) -> Pair:
        return await listener_pair(address, max_message_bytes)

    with trio.fail_after(SUITE_TIMEOUT):
        await check_message_channel(make_pair, make_clogged_pair=make_pair, half_closeable=True)


async def test_a_channel_over_child_pipes_keeps_the_channel_contract() -> None:
    with trio.fail_after(SUITE_TIMEOUT):
        async with cat_pairs() as make_pair:
            # Pipes and cat's own buffer are bounded: the plain pair clogs when nobody reads.
            await check_message_channel(make_pair, make_clogged_pair=make_pair,
                                        half_closeable=True)


@pytest.mark.parametrize("max_message_bytes", [1024, 4 * 1024 * 1024])
async def test_the_suite_holds_at_small_and_default_size_limits(max_message_bytes: int) -> None:
    with trio.fail_after(SUITE_TIMEOUT):
        await check_message_channel(memory_pair, make_clogged_pair=lockstep_pair,
                                    max_message_bytes=max_message_bytes, half_closeable=True)
