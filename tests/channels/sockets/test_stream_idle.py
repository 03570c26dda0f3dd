"""Stream listeners' idle timeout and TCP keepalive, with real sockets and real child processes."""

from __future__ import annotations

import socket
from pathlib import Path

import trio

from bridge import Limits
from channels import ListenOptions, TcpKeepalive, parse_address

from conftest import LineClient, example_server, poll, result_text, running_bridge, wait_until_gone

TIMEOUT = 20
# Short enough for a test, long enough that connecting and sending never count as idle.
IDLE = 0.5


async def test_an_idle_unix_connection_is_closed_after_the_idle_timeout_and_its_child_reaped(
    sock_dir: Path,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(),
            [f"unix:{sock_dir}/i.sock"],
            listen_options=ListenOptions(idle_timeout=IDLE),
            limits=Limits(),
        ) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            counters = daemon._counters
            await poll(lambda: len(counters.children) == 1)
            (child,) = counters.children
            assert await client.receive_until_eof() == []  # closed by the bridge, nothing sent
            await wait_until_gone(child.pid)
            await poll(lambda: not counters.children)  # stopped by its owner: reaped, no orphan
            assert child.returncode is not None


async def test_a_connection_with_a_request_in_flight_is_not_closed_while_it_waits(sock_dir: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(),
            [f"unix:{sock_dir}/b.sock"],
            listen_options=ListenOptions(idle_timeout=IDLE),
        ) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            # Four idle timeouts with the request in flight and no byte either way.
            reply = await client.call(1, "sleep", seconds=4 * IDLE)
            assert result_text(reply) == "slept"
            assert await client.receive_until_eof() == []  # then idle: closed


async def test_accepted_tcp_sockets_have_keepalive_with_the_configured_timings() -> None:
    keepalive = TcpKeepalive(idle=42, interval=7, count=4)
    address = parse_address("tcp:127.0.0.1:0")
    with trio.fail_after(TIMEOUT):
        (listener,) = await address.listen(ListenOptions(tcp_keepalive=keepalive))
        async with listener:
            port = int(listener.address.rpartition(":")[2])
            async with await trio.open_tcp_stream("127.0.0.1", port):
                incoming = await listener.accept()
                async with incoming:
                    sock = incoming.stream.socket  # type: ignore[attr-defined]
                    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
                    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 42
                    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == 7
                    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == 4


async def test_tcp_connections_get_the_default_keepalive_and_idle_timeout_and_unix_ones_no_idle_timeout(
    sock_dir: Path,
) -> None:
    with trio.fail_after(TIMEOUT):
        (tcp,) = await parse_address("tcp:127.0.0.1:0").listen(ListenOptions())
        (unix,) = await parse_address(f"unix:{sock_dir}/d.sock").listen(ListenOptions())
        async with tcp, unix:
            port = int(tcp.address.rpartition(":")[2])
            async with await trio.open_tcp_stream("127.0.0.1", port):
                incoming = await tcp.accept()
                async with incoming:
                    sock = incoming.stream.socket  # type: ignore[attr-defined]
                    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == TcpKeepalive().idle
                    async with incoming.establish() as channel:
                        assert channel.idle_timeout == 3600
            async with await trio.open_unix_socket(f"{sock_dir}/d.sock"):
                incoming = await unix.accept()
                async with incoming, incoming.establish() as channel:
                    assert channel.idle_timeout is None


async def test_websocket_and_http_listeners_give_their_tcp_connections_keepalive_too() -> None:
    options = ListenOptions(tcp_keepalive=TcpKeepalive(idle=43, interval=8, count=5))
    with trio.fail_after(TIMEOUT):
        (ws,) = await parse_address("ws://127.0.0.1:0/mcp").listen(options)
        (http,) = await parse_address("http://127.0.0.1:0/mcp").listen(options)
        async with ws, http:
            settings = []
            for listener in (ws, http):
                port = int(listener.address.rpartition(":")[2].split("/")[0])
                async with await trio.open_tcp_stream("127.0.0.1", port):
                    if listener is ws:
                        incoming = await ws.accept()
                        stream = incoming.stream  # type: ignore[attr-defined]
                    else:  # an HTTP listener is served, not accepted: take its next connection
                        stream, _peer = await http._socket.accept()  # type: ignore[attr-defined]
                    sock = stream.socket
                    settings.append(
                        (
                            sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
                            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
                            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
                            sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
                        )
                    )
                    await stream.aclose()
    assert settings == [(1, 43, 8, 5), (1, 43, 8, 5)]
