"""One HTTP socket serving several servers by path (``HttpHost``): mounts, sessions, security, routing.

Each mounted server is a real daemon in this process (the bundled example server as its child),
listening on its ``host.mount_address(name)``; the client is :mod:`rawhttp` on real loopback
sockets, so each status and body is checked as sent. Unmounting is checked against a listener
served by a small echo handler, so that nothing but the mount's own ``aclose`` ends its sessions.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import pytest
import trio
from hosting import LEGACY, echo_handler, initialize, serving_daemons
from oidc import authorization_server

from bridge import Daemon
from channels import (
    HttpHost,
    HttpOptions,
    ListenError,
    ListenOptions,
    OAuthSettings,
    TokenSet,
    connect,
)

from conftest import call
from rawhttp import POST_HEADERS, RawHttp, Response, post

TIMEOUT = 30  # three daemons with their children, and a few dozen requests
TOKEN = "host-test-token-Qm4vX8sLp2RtK7wZ"
INDEX_TOKEN = "host-index-token-Hj3nB6cVr9TyE2uM"


def bearer(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


@attrs.define
class Hosted:
    host: HttpHost
    port: int
    daemons: dict[str, Daemon]


@asynccontextmanager
async def hosted(
    servers: dict[str, ListenOptions], host_options: ListenOptions | None = None, *, index: bool = True
) -> AsyncIterator[Hosted]:
    """A host on 127.0.0.1:0 with one daemon per entry of ``servers``, mounted under its name."""
    host = await HttpHost.open("http://127.0.0.1:0", host_options or ListenOptions(), index=index)
    async with serving_daemons(host, servers) as daemons:
        yield Hosted(host, int(host.address.rsplit(":", 1)[1]), daemons)


async def open_session(port: int, path: str, headers: list[tuple[str, str]] | None = None) -> str:
    response = await post(port, initialize(), headers or [], path=path)
    assert response.status == 200, response
    session_id = response.header("mcp-session-id")
    assert session_id is not None
    return session_id


async def echo(
    port: int, path: str, session_id: str, text: str, headers: list[tuple[str, str]] | None = None
) -> Response:
    session = [("mcp-session-id", session_id), ("mcp-protocol-version", LEGACY), *(headers or [])]
    return await post(port, call(2, "echo", text=text), session, path=path)


async def get(port: int, target: str, headers: list[tuple[str, str]] | None = None) -> Response:
    client = await RawHttp.open(port)
    try:
        return await client.request("GET", target, headers or [], None)
    finally:
        await client.aclose()


# -- several servers on one socket -----------------------------------------------------------------


async def test_three_servers_mounted_on_one_host_are_served_at_once_each_by_its_own_daemon() -> None:
    with trio.fail_after(TIMEOUT):
        servers = {name: ListenOptions() for name in ("alpha", "beta", "gamma")}
        async with hosted(servers) as setup:
            replies: dict[str, str] = {}

            async def use(name: str) -> None:
                path = f"/servers/{name}/mcp"
                session_id = await open_session(setup.port, path)
                response = await echo(setup.port, path, session_id, f"hello {name}")
                replies[name] = response.messages()[0]["result"]["content"][0]["text"]

            async with trio.open_nursery() as nursery:
                for name in servers:
                    nursery.start_soon(use, name)
            assert replies == {name: f"hello {name}" for name in servers}
            for name, daemon in setup.daemons.items():
                assert daemon.addresses == [f"{setup.host.address}/servers/{name}/mcp"]
                assert daemon.statistics().connections_total >= 1


async def test_a_session_id_of_one_mounted_server_is_unknown_to_another_with_404() -> None:
    with trio.fail_after(TIMEOUT):
        async with hosted({"alpha": ListenOptions(), "beta": ListenOptions()}) as setup:
            session_id = await open_session(setup.port, "/servers/alpha/mcp")
            wrong = await echo(setup.port, "/servers/beta/mcp", session_id, "hi")
            assert wrong.status == 404
            assert wrong.json()["error"]["code"] == -32001
            right = await echo(setup.port, "/servers/alpha/mcp", session_id, "hi")
            assert right.status == 200


async def test_each_mount_keeps_its_own_tokens_one_open_on_loopback_one_with_a_static_token() -> None:
    with trio.fail_after(TIMEOUT):
        guarded = ListenOptions(tokens=TokenSet.of([(TOKEN, "beta's token")]))
        async with hosted({"alpha": ListenOptions(), "beta": guarded}) as setup:
            assert (await post(setup.port, initialize(), path="/servers/alpha/mcp")).status == 200
            refused = await post(setup.port, initialize(), path="/servers/beta/mcp")
            assert refused.status == 401
            session_id = await open_session(setup.port, "/servers/beta/mcp", bearer(TOKEN))
            response = await echo(setup.port, "/servers/beta/mcp", session_id, "hi", bearer(TOKEN))
            assert response.messages()[0]["result"]["content"][0]["text"] == "hi"


async def test_each_mount_checks_oauth_tokens_for_its_own_url_and_the_open_mount_stays_open() -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as issuer:
            oauth = ListenOptions(oauth=OAuthSettings(issuers=[issuer.issuer]))
            async with hosted({"alpha": ListenOptions(), "beta": oauth, "gamma": oauth}) as setup:
                beta = f"http://127.0.0.1:{setup.port}/servers/beta/mcp"
                token = await issuer.token(beta)
                session_id = await open_session(setup.port, "/servers/beta/mcp", bearer(token))
                assert (
                    await echo(setup.port, "/servers/beta/mcp", session_id, "hi", bearer(token))
                ).status == 200
                elsewhere = await post(setup.port, initialize(), bearer(token), path="/servers/gamma/mcp")
                assert elsewhere.status == 401  # its audience is beta's URL, not gamma's
                assert "/.well-known/oauth-protected-resource/servers/gamma/mcp" in (
                    elsewhere.header("www-authenticate") or ""
                )
                assert (await post(setup.port, initialize(), path="/servers/alpha/mcp")).status == 200


async def test_each_mount_serves_its_metadata_at_its_own_path_suffixed_well_known_uri() -> None:
    with trio.fail_after(TIMEOUT):
        document = {"authorization_servers": ["https://issuer.example"]}
        with_document = ListenOptions(http=HttpOptions(resource_metadata=document))
        async with hosted({"alpha": ListenOptions(), "beta": with_document}) as setup:
            found = await get(setup.port, "/.well-known/oauth-protected-resource/servers/beta/mcp")
            assert found.status == 200
            assert found.json() == {
                **document,
                "resource": f"http://127.0.0.1:{setup.port}/servers/beta/mcp",
            }
            for target in (
                "/.well-known/oauth-protected-resource/servers/alpha/mcp",  # alpha has none
                "/.well-known/oauth-protected-resource",  # the bare path: which server's?
            ):
                assert (await get(setup.port, target)).status == 404, target


async def test_a_mount_address_connects_as_a_client_and_equals_only_the_same_hosts_name_and_path() -> None:
    with trio.fail_after(TIMEOUT):
        async with hosted({"alpha": ListenOptions()}) as setup:
            address = setup.host.mount_address("alpha")
            assert str(address) == f"http://127.0.0.1:{setup.port}/servers/alpha/mcp"
            assert address == setup.host.mount_address("alpha", "/servers/alpha/mcp")
            assert address != setup.host.mount_address("alpha", "/other/mcp")
            assert address != setup.host.mount_address("beta")
            async with connect(address) as channel:
                await channel.send(initialize())
                assert (await channel.receive())["result"]["protocolVersion"] == LEGACY
            other = await HttpHost.open("http://127.0.0.1:0", ListenOptions())
            try:
                assert other.mount_address("alpha") != address
            finally:
                await other.aclose()


# -- the index ---------------------------------------------------------------------------------------


async def test_the_index_lists_the_servers_only_to_callers_passing_the_hosts_own_token() -> None:
    with trio.fail_after(TIMEOUT):
        host_options = ListenOptions(tokens=TokenSet.of([(INDEX_TOKEN, "the index's token")]))
        async with hosted({"alpha": ListenOptions(), "beta": ListenOptions()}, host_options) as setup:
            setup.host.index = lambda: [{"name": "alpha", "state": "running"}]
            for target in ("/servers", "/servers/"):
                assert (await get(setup.port, target)).status == 401
                listed = await get(setup.port, target, bearer(INDEX_TOKEN))
                assert listed.status == 200
                assert listed.json() == {"servers": [{"name": "alpha", "state": "running"}]}
            # The host's token guards the index alone: an open mount stays open.
            assert (await post(setup.port, initialize(), path="/servers/alpha/mcp")).status == 200


async def test_the_index_lists_each_mounts_name_and_path_unless_told_otherwise() -> None:
    with trio.fail_after(TIMEOUT):
        async with hosted({"alpha": ListenOptions(), "beta": ListenOptions()}) as setup:
            listed = await get(setup.port, "/servers")
            assert listed.json() == {
                "servers": [
                    {"name": "alpha", "path": "/servers/alpha/mcp"},
                    {"name": "beta", "path": "/servers/beta/mcp"},
                ]
            }


async def test_the_index_turned_off_answers_404() -> None:
    with trio.fail_after(TIMEOUT):
        async with hosted({"alpha": ListenOptions()}, index=False) as setup:
            for target in ("/servers", "/servers/"):
                response = await get(setup.port, target)
                assert response.status == 404
                assert "alpha" not in response.body.decode()


# -- mounting and unmounting -------------------------------------------------------------------------


@asynccontextmanager
async def echo_host(*names: str) -> AsyncIterator[int]:
    """A host on 127.0.0.1:0 with ``names`` mounted, each served by :func:`echo_handler`; its port."""
    host = await HttpHost.open("http://127.0.0.1:0", ListenOptions())
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(host.serve)
            for name in names:
                [listener] = await host.mount_address(name).listen(ListenOptions())
                await nursery.start(listener.serve, echo_handler, nursery)
            yield int(host.address.rsplit(":", 1)[1])
            nursery.cancel_scope.cancel()
    finally:
        await host.aclose()


async def test_unmounting_ends_the_mounts_sessions_and_streams_and_its_paths_404_while_others_go_on() -> None:
    with trio.fail_after(TIMEOUT):
        host = await HttpHost.open("http://127.0.0.1:0", ListenOptions())
        port = int(host.address.rsplit(":", 1)[1])
        async with trio.open_nursery() as nursery:
            await nursery.start(host.serve)
            listeners = {}
            for name in ("alpha", "beta"):
                [listener] = await host.mount_address(name).listen(ListenOptions())
                await nursery.start(listener.serve, echo_handler, nursery)
                listeners[name] = listener
            alpha = await open_session(port, "/servers/alpha/mcp")
            beta = await open_session(port, "/servers/beta/mcp")
            stream = await RawHttp.open(port)
            headers = [
                ("accept", "text/event-stream"),
                ("mcp-session-id", alpha),
                ("mcp-protocol-version", LEGACY),
            ]
            await stream.send_request("GET", "/servers/alpha/mcp", headers)
            status, _ = await stream.read_head()
            assert status == 200

            await listeners["alpha"].aclose()

            while await stream.read_chunk() is not None:  # the event stream ends
                pass
            gone = await echo(port, "/servers/alpha/mcp", alpha, "hi")
            assert gone.status == 404
            assert (await post(port, initialize(), path="/servers/alpha/mcp")).status == 404
            assert (await echo(port, "/servers/beta/mcp", beta, "hi")).status == 200
            assert host.mounts == {"beta": "/servers/beta/mcp"}
            nursery.cancel_scope.cancel()
        await host.aclose()


async def test_mounting_a_path_already_mounted_is_refused_naming_both_servers() -> None:
    with trio.fail_after(TIMEOUT):
        host = await HttpHost.open("http://127.0.0.1:0", ListenOptions())
        try:
            [first] = await host.mount_address("alpha", "/tools/mcp").listen(ListenOptions())
            with pytest.raises(ListenError, match=r"taken .* by server alpha; server beta"):
                await host.mount_address("beta", "/tools/mcp").listen(ListenOptions())
            # A sibling of the 2024-11-05 transport counts too: /tools/sse is alpha's.
            with pytest.raises(ListenError, match="server alpha"):
                await host.mount_address("gamma", "/tools/other").listen(ListenOptions())
            with pytest.raises(ListenError, match="the index"):
                await host.mount_address("delta", "/servers").listen(ListenOptions())
            await first.aclose()
            [again] = await host.mount_address("beta", "/tools/mcp").listen(ListenOptions())
            await again.aclose()
        finally:
            await host.aclose()


@pytest.mark.parametrize("name", ["a" * 65, "a" * 4096, "-dash-first", "has/slash", "..", "", "sp ace", "é"])
async def test_a_server_name_that_is_not_one_safe_segment_of_at_most_64_characters_is_refused(
    name: str,
) -> None:
    with trio.fail_after(TIMEOUT):
        host = await HttpHost.open("http://127.0.0.1:0", ListenOptions())
        try:
            with pytest.raises(ListenError, match="cannot be mounted"):
                host.mount_address(name)
        finally:
            await host.aclose()


# -- routing safety ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "status"),
    [
        ("/servers/../servers/alpha/mcp", 400),
        ("/servers/./alpha/mcp", 400),
        ("/servers/alpha/mcp/..", 400),
        ("/servers/alpha%2Fmcp", 400),
        ("/servers/alpha%2fmcp", 400),
        ("/servers/%2e%2e/alpha/mcp", 400),
        ("/servers/%2E/alpha/mcp", 400),
        ("/servers/alpha%5cmcp", 400),
        ("/servers/alpha/mcp?" + "x" * 3 * 1024, 414),
        ("/servers/alpha/mcp/", 404),
        ("/Servers/alpha/mcp", 404),
        ("/servers/ALPHA/mcp", 404),
        ("/servers/alpha/MCP", 404),
        ("/servers/alpha", 404),
        ("/elsewhere", 404),
    ],
)
async def test_a_target_that_could_confuse_routing_is_refused_and_no_answer_names_a_server(
    target: str, status: int
) -> None:
    with trio.fail_after(TIMEOUT):
        async with echo_host("alpha") as port:
            client = await RawHttp.open(port)
            response = await client.request("POST", target, POST_HEADERS, initialize())
            await client.aclose()
            assert response.status == status
            body = response.json()
            assert body["error"]["code"] == -32000
            assert "alpha" not in json.dumps(body)
            assert (await post(port, initialize(), path="/servers/alpha/mcp")).status == 200
