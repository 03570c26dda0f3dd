"""Listeners are safe by default: Unix socket files and loopback TCP (docs/design.md §5.7).

Unix rules (channels/_sockets/unix.py): owner-only from the first instant, never steal a live socket nor
remove what is not a socket, replace only a stale socket, remove on close only what we created.
"""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from channels import (
    AddressError,
    ListenError,
    ListenOptions,
    MessageListener,
    StdioAddress,
    TcpAddress,
    UnixAddress,
    parse_address,
)

from conftest import channel_pair, python_json_lines

TIMEOUT = 10
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


@asynccontextmanager
async def listening(address: str, options: ListenOptions | None = None) -> AsyncIterator[MessageListener]:
    """The single listener for ``address``, closed on exit."""
    listeners = await parse_address(address).listen(options or ListenOptions())
    try:
        (listener,) = listeners
        yield listener
    finally:
        for listener in listeners:
            await listener.aclose()


async def assert_serves(listener: MessageListener) -> None:
    """A client can connect and a message goes through."""
    async with channel_pair(listener) as (client, server):
        await client.send(PING)
        assert await server.receive() == PING


def socket_mode(path: Path) -> int:
    info = os.lstat(path)
    assert stat.S_ISSOCK(info.st_mode)
    return stat.S_IMODE(info.st_mode)


def bind_plain_socket(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    return sock


# -- Unix: permissions ---------------------------------------------------------------------------


async def test_a_unix_socket_is_created_owner_only_by_default(sock_dir: Path) -> None:
    path = sock_dir / "mcp.sock"
    umask = os.umask(0o022)
    try:
        with trio.fail_after(TIMEOUT):
            async with listening(f"unix:{path}"):
                assert socket_mode(path) == 0o600
                assert os.umask(0o022) == 0o022  # and the process umask is as it was
    finally:
        os.umask(umask)


async def test_a_unix_socket_can_be_opened_to_a_group(sock_dir: Path) -> None:
    path = sock_dir / "mcp.sock"
    options = ListenOptions(socket_mode=0o660, socket_group=os.getgid())
    with trio.fail_after(TIMEOUT):
        async with listening(f"unix:{path}", options) as listener:
            assert socket_mode(path) == 0o660
            assert os.lstat(path).st_gid == os.getgid()
            await assert_serves(listener)


# -- Unix: what is already at the path -------------------------------------------------------------


async def test_a_stale_socket_from_a_dead_listener_is_replaced(sock_dir: Path) -> None:
    path = sock_dir / "mcp.sock"
    bind_plain_socket(path).close()  # the file stays behind, nobody listens on it
    with trio.fail_after(TIMEOUT):
        async with listening(f"unix:{path}") as listener:
            assert socket_mode(path) == 0o600
            await assert_serves(listener)


async def test_a_live_socket_is_never_stolen(sock_dir: Path) -> None:
    path = sock_dir / "mcp.sock"
    with trio.fail_after(TIMEOUT):
        async with listening(f"unix:{path}") as first:
            inode = os.lstat(path).st_ino
            with pytest.raises(ListenError, match="another server is listening"):
                await UnixAddress(str(path)).listen(ListenOptions())
            assert os.lstat(path).st_ino == inode
            # The refusal probed the socket by connecting: the live server sees one empty
            # connection that is already closed, then serves as before.
            async with await first.accept() as incoming, incoming.establish() as probe:
                with pytest.raises(trio.EndOfChannel):
                    await probe.receive()
            await assert_serves(first)


def make_regular_file(path: Path) -> None:
    path.write_text("precious")


def make_directory(path: Path) -> None:
    path.mkdir()
    (path / "inside").write_text("precious")


def make_symlink_to_a_file(path: Path) -> None:
    target = path.with_name("target")
    target.write_text("precious")
    path.symlink_to(target)


def make_dangling_symlink(path: Path) -> None:
    path.symlink_to(path.with_name("nowhere"))


def snapshot(path: Path) -> tuple[object, ...]:
    info = os.lstat(path)
    if path.is_symlink():
        target = os.readlink(path)
        return info.st_ino, target, Path(target).exists() and Path(target).read_text()
    if path.is_dir():
        return info.st_ino, sorted(p.name for p in path.iterdir())
    return info.st_ino, path.read_text()


@pytest.mark.parametrize(
    "make", [make_regular_file, make_directory, make_symlink_to_a_file, make_dangling_symlink]
)
async def test_what_is_not_a_socket_is_refused_and_left_untouched(
    sock_dir: Path, make: Callable[[Path], None]
) -> None:
    path = sock_dir / "mcp.sock"
    make(path)
    before = snapshot(path)
    with trio.fail_after(TIMEOUT), pytest.raises(ListenError, match="not a socket"):
        await UnixAddress(str(path)).listen(ListenOptions())
    assert snapshot(path) == before


async def test_a_symlink_to_a_live_socket_is_refused(sock_dir: Path) -> None:
    real, link = sock_dir / "real.sock", sock_dir / "link.sock"
    link.symlink_to(real)
    with trio.fail_after(TIMEOUT):
        async with listening(f"unix:{real}") as listener:
            with pytest.raises(ListenError):
                await UnixAddress(str(link)).listen(ListenOptions())
            assert link.is_symlink()
            await assert_serves(listener)


# -- Unix: the path itself ------------------------------------------------------------------------


def path_of_length(directory: Path, length: int) -> Path:
    prefix = str(directory) + "/"
    return Path(prefix + "s" * (length - len(prefix)))


async def test_a_path_of_exactly_107_bytes_is_accepted(sock_dir: Path) -> None:
    path = path_of_length(sock_dir, 107)
    with trio.fail_after(TIMEOUT):
        async with listening(f"unix:{path}") as listener:
            await assert_serves(listener)


async def test_a_path_over_107_bytes_is_refused_naming_the_limit(sock_dir: Path) -> None:
    path = path_of_length(sock_dir, 108)
    with trio.fail_after(TIMEOUT), pytest.raises(ListenError, match=r"limit is 107"):
        await UnixAddress(str(path)).listen(ListenOptions())
    assert not path.exists()


async def test_a_missing_parent_directory_is_refused(sock_dir: Path) -> None:
    path = sock_dir / "missing" / "mcp.sock"
    with trio.fail_after(TIMEOUT), pytest.raises(ListenError, match="does not exist"):
        await UnixAddress(str(path)).listen(ListenOptions())
    assert not path.parent.exists()


# -- Unix: closing and peers ----------------------------------------------------------------------


async def test_closing_the_listener_removes_its_socket_file(sock_dir: Path) -> None:
    path = sock_dir / "mcp.sock"
    with trio.fail_after(TIMEOUT):
        async with listening(f"unix:{path}"):
            assert path.exists()
    assert not path.exists()


async def test_closing_the_listener_leaves_a_socket_that_replaced_ours(sock_dir: Path) -> None:
    path = sock_dir / "mcp.sock"
    with trio.fail_after(TIMEOUT):
        async with listening(f"unix:{path}"):
            path.unlink()
            successor = bind_plain_socket(path)
            successor_inode = os.lstat(path).st_ino
    try:
        assert os.lstat(path).st_ino == successor_inode
    finally:
        successor.close()


async def test_accepted_unix_channels_carry_the_peers_credentials(sock_dir: Path) -> None:
    path = sock_dir / "mcp.sock"
    with trio.fail_after(TIMEOUT):
        async with listening(f"unix:{path}") as listener:
            async with channel_pair(listener) as (_client, server):
                peer = server.peer
                assert peer.transport == "unix"
                assert (peer.pid, peer.uid, peer.gid) == (os.getpid(), os.getuid(), os.getgid())
                assert f"pid={os.getpid()}" in str(peer)


# -- TCP ------------------------------------------------------------------------------------------


async def test_tcp_port_0_binds_loopback_and_reports_the_real_port() -> None:
    with trio.fail_after(TIMEOUT):
        async with listening("tcp:127.0.0.1:0") as listener:
            bound = parse_address(listener.address)
            assert isinstance(bound, TcpAddress)
            assert bound.host == "127.0.0.1" and bound.port != 0
            async with channel_pair(listener) as (client, server):
                assert server.peer.transport == "tcp"
                assert server.peer.address and server.peer.address.startswith("127.0.0.1:")
                await client.send(PING)
                assert await server.receive() == PING


async def test_a_non_loopback_tcp_bind_is_refused_unless_explicitly_allowed() -> None:
    address = TcpAddress("0.0.0.0", 0)
    with trio.fail_after(TIMEOUT):
        with pytest.raises(ListenError, match="--insecure-no-auth"):
            await address.listen(ListenOptions())
        listeners = await address.listen(ListenOptions(allow_non_loopback=True))
        for listener in listeners:  # never connected to: closed at once
            await listener.aclose()
    assert [listener.address.rpartition(":")[0] for listener in listeners] == ["tcp:0.0.0.0"]


# -- parsing --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected_form"),
    [
        ("ftp://example.org/", "expected one of"),
        ("no-scheme-at-all", "expected one of"),
        ("", "expected one of"),
        ("tcp:127.0.0.1", "tcp:HOST:PORT"),
        ("tcp:127.0.0.1:", "tcp:HOST:PORT"),
        ("tcp::7300", "tcp:HOST:PORT"),
        ("tcp:127.0.0.1:65536", "tcp:HOST:PORT"),
        ("tcp:127.0.0.1:-1", "tcp:HOST:PORT"),
        ("tcp:127.0.0.1:http", "tcp:HOST:PORT"),
        ("unix:", "unix:PATH"),
        ("stdio:x", "stdio:"),
    ],
)
def test_malformed_addresses_are_refused_naming_the_expected_form(text: str, expected_form: str) -> None:
    with pytest.raises(AddressError, match=expected_form):
        parse_address(text)


def test_unknown_schemes_are_listed_with_the_known_ones() -> None:
    with pytest.raises(AddressError) as caught:
        parse_address("ws2:x")
    for scheme in ("unix:", "tcp:", "stdio:"):
        assert scheme in str(caught.value)


def test_a_port_that_is_not_ascii_digits_is_refused_as_an_address_error() -> None:
    with pytest.raises(AddressError):
        parse_address("tcp:127.0.0.1:\u00b2")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("tcp:[::1]:7300", TcpAddress("::1", 7300)),
        ("tcp:127.0.0.1:0", TcpAddress("127.0.0.1", 0)),
        ("tcp:localhost:65535", TcpAddress("localhost", 65535)),
        ("unix:/run/mcp.sock", UnixAddress("/run/mcp.sock")),
        ("stdio:", StdioAddress()),
    ],
)
def test_well_formed_addresses_parse_and_print_back(text: str, expected: object) -> None:
    parsed = parse_address(text)
    assert parsed == expected
    assert str(parsed) == text


def test_a_relative_unix_path_is_taken_from_the_working_directory() -> None:
    assert parse_address("unix:mcp.sock") == UnixAddress(os.path.abspath("mcp.sock"))


# A TCP listener on an IP address, then one on a name, in a fresh interpreter (this one has long
# loaded the idna codec): whether the codec's module was loaded after each, and both addresses.
IDNA_SCRIPT = """
import json, sys
import trio
import channels

async def main():
    for address in ("tcp:127.0.0.1:0", "tcp:localhost:0"):
        listeners = await channels.parse_address(address).listen(channels.ListenOptions())
        print(json.dumps(["encodings.idna" in sys.modules, [listener.address for listener in listeners]]))
        for listener in listeners:
            await listener.aclose()

trio.run(main)
"""


async def test_a_tcp_listener_on_an_ip_address_loads_no_idna_codec_and_one_on_a_name_still_resolves() -> None:
    with trio.fail_after(30):  # one interpreter start-up, on a loaded CI machine
        (ip_loaded, ip_addresses), (_, name_addresses) = await python_json_lines(IDNA_SCRIPT)
    assert not ip_loaded
    assert ip_addresses[0].startswith("tcp:127.0.0.1:")
    assert name_addresses
