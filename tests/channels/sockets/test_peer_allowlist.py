"""Unix sockets: the --allow-uid / --allow-gid allowlist, with a real second user.

The peer's identity comes from SO_PEERCRED and is checked at accept, before any byte of the peer
is read. Connecting as another user needs root (CI runs as root, as the sessions do).
"""

from __future__ import annotations

import os
import pwd

import pytest
import trio

from channels import ListenOptions

from conftest import LineClient, example_server, result_text, running_bridge

TIMEOUT = 20

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="connecting as another user needs root")

NOBODY = pwd.getpwnam("nobody")

PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'


async def ping_as_nobody(path: str, *, refused: bool = False) -> bytes:
    """Send one ping as user nobody through socat (installed by .ci/run; the venv's Python may be
    unreadable to nobody); return what came back (b"" if the bridge closed without a word).

    A refused peer may find the connection closed before it even writes (socat then exits 1 with
    EPIPE): that is the refusal too, so only a served peer must see socat succeed.
    """
    result = await trio.run_process(
        ["socat", "-t", "5", "-", f"UNIX-CONNECT:{path}"],
        user=NOBODY.pw_uid,
        group=NOBODY.pw_gid,
        stdin=PING,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    if refused:
        assert result.returncode == 0 or b"Broken pipe" in result.stderr, result.stderr.decode()
    else:
        assert result.returncode == 0, result.stderr.decode()
    return result.stdout


def options(**allow: frozenset[int]) -> ListenOptions:
    # Group-accessible to nobody's group, so that only the allowlist stands in the way.
    return ListenOptions(socket_mode=0o660, socket_group=NOBODY.pw_gid, **allow)


async def test_a_peer_whose_uid_is_not_allowed_is_disconnected_before_any_byte_is_read(sock_dir):
    os.chmod(sock_dir, 0o755)
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(), [f"unix:{sock_dir}/s.sock"], listen_options=options(allow_uids=frozenset({0}))
        ) as daemon:
            assert await ping_as_nobody(f"{sock_dir}/s.sock", refused=True) == b""
            assert daemon.statistics().connections_total == 0  # never reached the daemon
            root = await LineClient.open(daemon.addresses[0])  # uid 0 is on the list
            assert result_text(await root.call(1, "echo", text="allowed")) == "allowed"


async def test_a_peer_whose_group_is_allowed_is_served(sock_dir):
    os.chmod(sock_dir, 0o755)
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(),
            [f"unix:{sock_dir}/s.sock"],
            listen_options=options(allow_gids=frozenset({NOBODY.pw_gid})),
        ):
            reply = await ping_as_nobody(f"{sock_dir}/s.sock")
    assert reply == b'{"jsonrpc":"2.0","id":1,"result":{}}\n'


async def test_without_an_allowlist_every_peer_that_may_open_the_socket_is_served(sock_dir):
    os.chmod(sock_dir, 0o755)
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), [f"unix:{sock_dir}/s.sock"], listen_options=options()):
            reply = await ping_as_nobody(f"{sock_dir}/s.sock")
    assert reply == b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
