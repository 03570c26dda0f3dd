"""The daemon raises its soft file descriptor limit to what its connections need, or says what to raise.

The decision is checked as a table (sans-IO); the daemon's own limit, its log and its capacity on
real processes started with a low limit (``ulimit``), whose connections each hold a child.
"""

from __future__ import annotations

import re
import resource
import shutil
import signal
from pathlib import Path

import pytest
import trio

from bridge._ops.descriptors import HTTP_SLOTS, connections_within, descriptors_needed, raised_limit
from channels._http.server import front

from conftest import LineClient, bridge_process, call, example_server, poll, result_text, servers_file

TIMEOUT = 30  # seconds: forty children started on a loaded CI machine
INFINITY = resource.RLIM_INFINITY
HARD = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
needs_room = pytest.mark.skipif(
    HARD != INFINITY and HARD < 1000,
    reason=f"the hard file descriptor limit here ({HARD}) leaves no room to raise",
)


@pytest.mark.parametrize(
    ("soft", "hard", "needed", "raised"),
    [
        (1024, 524288, 1344, 1344),  # systemd's defaults, --max-connections' default
        (2048, 524288, 1344, None),  # enough already: never lowered
        (1024, 1024, 1344, None),  # the hard limit is the soft one: nothing to raise
        (512, 1000, 1344, 1000),  # as far as the hard limit allows
        (1024, INFINITY, 1344, 1344),
        (INFINITY, INFINITY, 1344, None),
    ],
)
def test_the_soft_limit_is_raised_to_what_is_needed_within_the_hard_limit_and_never_lowered(
    soft: int, hard: int, needed: int, raised: int | None
) -> None:
    assert raised_limit(soft, hard, needed) == raised


def test_a_connection_with_a_child_of_its_own_is_counted_as_five_descriptors_beside_a_reserve() -> None:
    assert descriptors_needed(256) == 1344
    assert connections_within(1344) == 256
    assert connections_within(1024) == 192
    assert connections_within(10) == 0


def test_an_http_address_adds_a_descriptor_for_each_of_its_connection_slots() -> None:
    assert HTTP_SLOTS == front.MAX_CONNECTIONS  # the HTTP server's own bound, named twice
    assert descriptors_needed(256, http_addresses=1) == 1344 + 512
    assert connections_within(1856, http_addresses=1) == 256


def soft_limit_of(pid: int) -> int:
    limits = Path(f"/proc/{pid}/limits").read_text()
    return int(re.search(r"^Max open files\s+(\d+)", limits, re.MULTILINE)[1])


@needs_room
@pytest.mark.parametrize(("scheme", "needed"), [("unix", 564), ("http", 564 + 512)])
async def test_a_bridge_started_with_a_low_soft_limit_raises_it_for_its_max_connections(
    sock_dir: Path, scheme: str, needed: int
) -> None:
    address = f"unix:{sock_dir}/s.sock" if scheme == "unix" else "http://127.0.0.1:0/mcp"
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--max-connections",
            "100",
            "--listen",
            address,
            "--",
            *example_server(),
            soft_open_files=200,
        ) as bridge:
            soft = soft_limit_of(bridge.process.pid)
    assert soft == needed == descriptors_needed(100, http_addresses=int(scheme == "http"))
    assert f"file descriptor limit raised from 200 to {needed} for 100 connections" in bridge.log()


@needs_room
async def test_every_connection_max_connections_allows_gets_a_child_even_from_a_low_soft_limit(
    sock_dir: Path,
) -> None:
    """40 connections, each with a child (``cat``, which sends each line back): 215 descriptors,
    where the bridge started with 128; without the raise, about 22 connections get one."""
    cat = shutil.which("cat")
    assert cat is not None
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--max-connections", "40", "--child", "per-connection", "--listen", f"unix:{sock_dir}/s.sock",
            "--", cat, soft_open_files=128,
        ) as bridge:  # fmt: skip
            clients = [await LineClient.open(bridge.addresses[0]) for _ in range(40)]
            for number, client in enumerate(clients):
                await client.send(call(number, "echo", text="through my own child"))
            echoed = [await client.receive() for client in clients]
            for client in clients:
                await client.aclose()
    # Each request back as it was sent, from its own cat: not an error saying no child could start.
    assert echoed == [call(number, "echo", text="through my own child") for number in range(40)]


async def test_a_hard_limit_too_low_is_a_warning_that_says_what_to_raise_and_the_bridge_serves(
    sock_dir: Path,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--max-connections", "100", "--listen", f"unix:{sock_dir}/s.sock", "--", *example_server(),
            max_open_files=128,
        ) as bridge:  # fmt: skip
            client = await LineClient.open(bridge.addresses[0])
            reply = await client.call(1, "echo", text="still serving")
            await client.aclose()
            soft = soft_limit_of(bridge.process.pid)
    assert result_text(reply) == "still serving"
    assert soft == 128
    warning = next(line for line in bridge.stderr_lines if "file descriptor limit" in line)
    assert "WARNING" in warning and "about 12 of the 100 connections" in warning
    assert "LimitNOFILE=" in warning and "ulimit -n" in warning and "564" in warning


@needs_room
async def test_a_reload_that_adds_servers_raises_the_limit_again_for_their_connections(
    sock_dir: Path,
) -> None:
    config = sock_dir / "bridge.toml"
    servers_file(config, sock_dir, ["alpha"], max_connections=50)
    with trio.fail_after(TIMEOUT):
        async with bridge_process("--config", str(config), soft_open_files=200) as bridge:
            started = soft_limit_of(bridge.process.pid)
            servers_file(config, sock_dir, ["alpha", "beta"], max_connections=50)
            bridge.process.send_signal(signal.SIGHUP)
            await poll(lambda: (sock_dir / "beta.sock").exists())
            reloaded = soft_limit_of(bridge.process.pid)
    assert (started, reloaded) == (descriptors_needed(50), descriptors_needed(100)) == (314, 564)
    assert "file descriptor limit raised from 314 to 564 for 100 connections" in bridge.log()
