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

from channels import MessageChannel, PeerInfo, StreamChannel
from channels.testing import PairMaker, check_message_channel

from conftest import TlsFiles, pair_maker

# The whole suite for one kind: about 45 checks, each with its own deadline inside.
SUITE_TIMEOUT = 120

Pair = tuple[MessageChannel, MessageChannel]


async def memory_pair(max_message_bytes: int) -> Pair:
    left, right = trio.testing.memory_stream_pair()
    return (
        StreamChannel(left, max_message_bytes=max_message_bytes, peer=PeerInfo("memory")),
        StreamChannel(right, max_message_bytes=max_message_bytes, peer=PeerInfo("memory")),
    )


async def lockstep_pair(max_message_bytes: int) -> Pair:
    """Memory streams without any buffering: a send blocks until the peer receives it."""
    left, right = trio.testing.lockstep_stream_pair()
    return (
        StreamChannel(left, max_message_bytes=max_message_bytes, peer=PeerInfo("memory")),
        StreamChannel(right, max_message_bytes=max_message_bytes, peer=PeerInfo("memory")),
    )


@asynccontextmanager
async def cat_pairs() -> AsyncIterator[PairMaker]:
    """A maker of channels through two ``cat`` children; kills and reaps every cat on exit.

    Channel A writes to cat A and reads what cat B echoes; channel B the other way round.
    """
    cats: list[trio.Process] = []

    async def start_cat() -> trio.Process:
        cat = await trio.lowlevel.open_process(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        cats.append(cat)
        return cat

    async def make_pair(max_message_bytes: int) -> Pair:
        cat_a, cat_b = await start_cat(), await start_cat()
        assert cat_a.stdin and cat_a.stdout and cat_b.stdin and cat_b.stdout
        a = StreamChannel(
            trio.StapledStream(cat_a.stdin, cat_b.stdout),
            max_message_bytes=max_message_bytes,
            peer=PeerInfo("pipe"),
        )
        b = StreamChannel(
            trio.StapledStream(cat_b.stdin, cat_a.stdout),
            max_message_bytes=max_message_bytes,
            peer=PeerInfo("pipe"),
        )
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
        await check_message_channel(memory_pair, make_clogged_pair=lockstep_pair, half_closeable=True)


async def test_a_unix_socket_channel_keeps_the_channel_contract(sock_dir: Path) -> None:
    with trio.fail_after(SUITE_TIMEOUT):
        async with pair_maker(f"unix:{sock_dir / 'conformance.sock'}") as make_pair:
            # Kernel socket buffers are bounded: the plain pair clogs when nobody reads.
            await check_message_channel(make_pair, make_clogged_pair=make_pair, half_closeable=True)


async def test_a_tcp_channel_keeps_the_channel_contract() -> None:
    with trio.fail_after(SUITE_TIMEOUT):
        async with pair_maker("tcp:127.0.0.1:0") as make_pair:
            await check_message_channel(make_pair, make_clogged_pair=make_pair, half_closeable=True)


async def test_a_tls_channel_keeps_the_channel_contract(tls_files: TlsFiles) -> None:
    with trio.fail_after(SUITE_TIMEOUT):
        async with pair_maker(
            "tls:127.0.0.1:0", tls_files.listen_options(), tls_files.connect_options()
        ) as make_pair:
            # A TLS client (trio.SSLStream) cannot half-close; the listener's side can (its
            # close_notify, after which it still reads), checked in test_tlsstream.py.
            await check_message_channel(make_pair, make_clogged_pair=make_pair)


async def test_a_websocket_channel_keeps_the_channel_contract() -> None:
    with trio.fail_after(SUITE_TIMEOUT):
        async with pair_maker("ws://127.0.0.1:0/mcp") as make_pair:
            await check_message_channel(make_pair, make_clogged_pair=make_pair, oversized_closes=True)


async def test_a_secure_websocket_channel_keeps_the_channel_contract(tls_files: TlsFiles) -> None:
    with trio.fail_after(SUITE_TIMEOUT):
        async with pair_maker(
            "wss://127.0.0.1:0/", tls_files.listen_options(), tls_files.connect_options()
        ) as make_pair:
            await check_message_channel(make_pair, make_clogged_pair=make_pair, oversized_closes=True)


async def test_a_channel_over_child_pipes_keeps_the_channel_contract() -> None:
    with trio.fail_after(SUITE_TIMEOUT):
        async with cat_pairs() as make_pair:
            # Pipes and cat's own buffer are bounded: the plain pair clogs when nobody reads.
            await check_message_channel(make_pair, make_clogged_pair=make_pair, half_closeable=True)


@pytest.mark.parametrize("max_message_bytes", [1024, 4 * 1024 * 1024])
async def test_the_suite_holds_at_small_and_default_size_limits(max_message_bytes: int) -> None:
    with trio.fail_after(SUITE_TIMEOUT):
        await check_message_channel(
            memory_pair,
            make_clogged_pair=lockstep_pair,
            max_message_bytes=max_message_bytes,
            half_closeable=True,
        )
