"""One WebSocket socket serving several servers by path (``WebSocketHost``): mounts, security, routing.

Each mounted server is a real daemon in this process (the bundled example server as its child),
listening on its ``host.mount_address(name)``; the clients are trio-websocket (an independent
implementation) and raw upgrade requests on real loopback sockets, so that each refusal's status
and body are checked as sent. Unmounting is checked against listeners served by a small echo
handler, so that nothing but the mount's own ``aclose`` closes its WebSockets.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
from hosting import LEGACY, echo_handler, initialize, serving_daemons
from oidc import authorization_server
from trio_websocket import ConnectionClosed, ConnectionRejected, WebSocketConnection, open_websocket_url

from channels import (
    ConnectOptions,
    ListenError,
    ListenOptions,
    OAuthSettings,
    TokenSet,
    WebSocketHost,
    connect,
)

from conftest import call

TIMEOUT = 30  # three daemons with their children, and a few dozen upgrades
TOKEN = "ws-host-test-token-Vb7nQ2xLk9PwR4tZ"


def bearer(token: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {token}".encode())]


@attrs.define
class Hosted:
    host: WebSocketHost
    port: int

    def url(self, name: str) -> str:
        return f"ws://127.0.0.1:{self.port}/servers/{name}/ws"


@asynccontextmanager
async def hosted(servers: dict[str, ListenOptions]) -> AsyncIterator[Hosted]:
    """A host on 127.0.0.1:0 with one daemon per entry of ``servers``, mounted under its name."""
    host = await WebSocketHost.open("ws://127.0.0.1:0", ListenOptions())
    async with serving_daemons(host, servers):
        yield Hosted(host, int(host.address.rsplit(":", 1)[1]))


async def echo_over(ws: WebSocketConnection, text: str) -> str:
    """initialize, then the example server's echo tool; the text it echoes."""
    await ws.send_message(json.dumps(initialize()))
    assert json.loads(await ws.get_message())["result"]["protocolVersion"] == LEGACY
    await ws.send_message(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    await ws.send_message(json.dumps(call(2, "echo", text=text)))
    reply = json.loads(await ws.get_message())
    return str(reply["result"]["content"][0]["text"])


async def upgrade(port: int, target: str, headers: tuple[str, ...] = ()) -> tuple[int, Any]:
    """A raw upgrade request for ``target``: the status and JSON body of the answer."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [
        f"GET {target} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
        *headers,
    ]
    await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode())
    data = b""
    while chunk := await stream.receive_some(65536):
        data += chunk
    await stream.aclose()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body) if body else None


# -- several servers on one socket -----------------------------------------------------------------


async def test_three_servers_mounted_on_one_websocket_host_are_served_at_once_each_by_its_own_daemon() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with hosted({name: ListenOptions() for name in ("alpha", "beta", "gamma")}) as setup:
            assert setup.host.mounts == {name: f"/servers/{name}/ws" for name in ("alpha", "beta", "gamma")}
            replies: dict[str, str] = {}

            async def use(name: str) -> None:
                async with open_websocket_url(setup.url(name), subprotocols=["mcp"]) as ws:
                    assert ws.subprotocol == "mcp"
                    replies[name] = await echo_over(ws, f"to {name}")

            async with trio.open_nursery() as clients:
                for name in ("alpha", "beta", "gamma"):
                    clients.start_soon(use, name)
            assert replies == {name: f"to {name}" for name in ("alpha", "beta", "gamma")}


async def test_each_websocket_mount_keeps_its_own_token_one_open_on_loopback_one_with_a_static_token() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        guarded = ListenOptions(tokens=TokenSet.of([(TOKEN, "beta's token")]))
        async with hosted({"alpha": ListenOptions(), "beta": guarded}) as setup:
            async with open_websocket_url(setup.url("alpha")) as ws:
                assert await echo_over(ws, "open") == "open"
            with pytest.raises(ConnectionRejected) as refused:
                async with open_websocket_url(setup.url("beta")):
                    pass
            assert refused.value.status_code == 401
            async with open_websocket_url(setup.url("beta"), extra_headers=bearer(TOKEN)) as ws:
                assert await echo_over(ws, "guarded") == "guarded"
            with pytest.raises(ConnectionRejected):  # beta's token is nothing to alpha's neighbour
                async with open_websocket_url(setup.url("beta"), extra_headers=bearer("wrong-" + TOKEN)):
                    pass


async def test_each_websocket_mount_checks_oauth_tokens_for_its_own_url_and_the_open_mount_stays_open() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as issuer:
            oauth = ListenOptions(oauth=OAuthSettings(issuers=[issuer.issuer]))
            async with hosted({"alpha": ListenOptions(), "beta": oauth, "gamma": oauth}) as setup:
                token = await issuer.token(setup.url("beta"))
                async with open_websocket_url(setup.url("beta"), extra_headers=bearer(token)) as ws:
                    assert await echo_over(ws, "authorized") == "authorized"
                status, body = await upgrade(
                    setup.port, "/servers/gamma/ws", (f"Authorization: Bearer {token}",)
                )
                assert status == 401  # its audience is beta's URL, not gamma's
                assert body["error"]["data"]["reason"] == "wrong-audience"
                async with open_websocket_url(setup.url("alpha")) as ws:
                    assert await echo_over(ws, "open") == "open"


async def test_a_websocket_mount_address_connects_as_a_client_and_equals_only_the_same_hosts_name_and_path() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with hosted({"alpha": ListenOptions()}) as setup:
            address = setup.host.mount_address("alpha")
            assert str(address) == setup.url("alpha")
            assert address == setup.host.mount_address("alpha", "/servers/alpha/ws")
            assert address != setup.host.mount_address("alpha", "/other/ws")
            assert address != setup.host.mount_address("beta")
            async with connect(address, ConnectOptions()) as channel:
                await channel.send(initialize())
                assert (await channel.receive())["result"]["protocolVersion"] == LEGACY
            other = await WebSocketHost.open("ws://127.0.0.1:0", ListenOptions())
            try:
                assert other.mount_address("alpha") != address
            finally:
                await other.aclose()


# -- mounting and unmounting -------------------------------------------------------------------------


async def test_unmounting_closes_the_mounts_websockets_with_1001_and_later_upgrades_404_while_others_go_on() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        host = await WebSocketHost.open("ws://127.0.0.1:0", ListenOptions())
        port = int(host.address.rsplit(":", 1)[1])
        async with trio.open_nursery() as nursery:
            await nursery.start(host.serve)
            listeners = {}
            for name in ("alpha", "beta"):
                [listener] = await host.mount_address(name).listen(ListenOptions())
                await nursery.start(listener.serve, echo_handler, nursery)
                listeners[name] = listener
            async with (
                open_websocket_url(f"ws://127.0.0.1:{port}/servers/alpha/ws") as alpha,
                open_websocket_url(f"ws://127.0.0.1:{port}/servers/beta/ws") as beta,
            ):
                for ws in (alpha, beta):
                    await ws.send_message(json.dumps(initialize()))
                    await ws.get_message()

                await listeners["alpha"].aclose()

                with pytest.raises(ConnectionClosed) as closed:
                    await alpha.get_message()
                assert closed.value.reason.code == 1001
                status, body = await upgrade(port, "/servers/alpha/ws")
                assert status == 404
                assert "alpha" not in json.dumps(body)
                await beta.send_message(json.dumps(initialize(7)))
                assert json.loads(await beta.get_message())["id"] == 7
            assert host.mounts == {"beta": "/servers/beta/ws"}
            nursery.cancel_scope.cancel()
        await host.aclose()


async def test_a_websocket_mount_listened_on_but_not_served_answers_503_naming_only_itself() -> None:
    with trio.fail_after(TIMEOUT):
        host = await WebSocketHost.open("ws://127.0.0.1:0", ListenOptions())
        port = int(host.address.rsplit(":", 1)[1])
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(host.serve)
                [listener] = await host.mount_address("alpha").listen(ListenOptions())
                status, body = await upgrade(port, "/servers/alpha/ws")
                assert status == 503
                assert body["error"]["message"] == "Service Unavailable: server alpha is not available"
                await listener.aclose()
                assert (await upgrade(port, "/servers/alpha/ws"))[0] == 404
                nursery.cancel_scope.cancel()
        finally:
            await host.aclose()


async def test_mounting_a_websocket_path_or_name_already_mounted_is_refused_naming_both_servers() -> None:
    with trio.fail_after(TIMEOUT):
        host = await WebSocketHost.open("ws://127.0.0.1:0", ListenOptions())
        try:
            [first] = await host.mount_address("alpha", "/tools/ws").listen(ListenOptions())
            with pytest.raises(ListenError, match=r"taken .* by server alpha; server beta"):
                await host.mount_address("beta", "/tools/ws").listen(ListenOptions())
            with pytest.raises(ListenError, match="server alpha is mounted already"):
                await host.mount_address("alpha", "/elsewhere/ws").listen(ListenOptions())
            await first.aclose()
            [again] = await host.mount_address("beta", "/tools/ws").listen(ListenOptions())
            await again.aclose()
        finally:
            await host.aclose()
        with pytest.raises(ListenError, match="is closed"):
            await host.mount_address("gamma").listen(ListenOptions())


@pytest.mark.parametrize("name", ["a" * 65, "-dash-first", "has/slash", "..", "", "é"])
async def test_a_websocket_server_name_that_is_not_one_safe_segment_is_refused(name: str) -> None:
    with trio.fail_after(TIMEOUT):
        host = await WebSocketHost.open("ws://127.0.0.1:0", ListenOptions())
        try:
            with pytest.raises(ListenError, match="cannot be mounted"):
                host.mount_address(name)
        finally:
            await host.aclose()


# -- routing safety ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "status"),
    [
        ("/servers/../servers/alpha/ws", 400),
        ("/servers/./alpha/ws", 400),
        ("/servers/alpha/ws/..", 400),
        ("/servers/alpha%2Fws", 400),
        ("/servers/alpha%2fws", 400),
        ("/servers/%2e%2e/alpha/ws", 400),
        ("/servers/alpha%5cws", 400),
        ("/servers/alpha/ws?" + "x" * 3 * 1024, 414),
        ("/servers/alpha/ws/", 404),
        ("/Servers/alpha/ws", 404),
        ("/servers/ALPHA/ws", 404),
        ("/servers/alpha/WS", 404),
        ("/servers/alpha", 404),
        ("/servers", 404),  # a WebSocket host has no index
        ("/elsewhere", 404),
    ],
)
async def test_a_websocket_target_that_could_confuse_routing_is_refused_and_no_answer_names_a_server(
    target: str, status: int
) -> None:
    with trio.fail_after(TIMEOUT):
        host = await WebSocketHost.open("ws://127.0.0.1:0", ListenOptions())
        port = int(host.address.rsplit(":", 1)[1])
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(host.serve)
                [listener] = await host.mount_address("alpha").listen(ListenOptions())
                await nursery.start(listener.serve, echo_handler, nursery)
                answered, body = await upgrade(port, target)
                assert answered == status
                assert body["error"]["code"] == -32000
                assert "alpha" not in json.dumps(body)
                async with open_websocket_url(f"ws://127.0.0.1:{port}/servers/alpha/ws") as ws:
                    await ws.send_message(json.dumps(initialize()))
                    assert json.loads(await ws.get_message())["id"] == 1
                await listener.aclose()
                nursery.cancel_scope.cancel()
        finally:
            await host.aclose()
