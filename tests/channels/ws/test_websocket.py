"""WebSocket channels (``ws://``, ``wss://``) and the bridge behind them, over real sockets.

The generic channel contract is checked by test_channel_conformance.py; this file covers what is
WebSocket's own: the upgrade (subprotocol, path, Host, Origin and bearer-token checks), frames a
peer may get wrong, the close codes the daemon sends, the handshake deadline, keepalive, and
``mcp-bridge connect ws://``. The scenarios: an over-long message, invalid UTF-8, a frame that is
not one JSON-RPC message, an upgrade trickled byte by byte, a peer that vanishes without a close,
SIGTERM with requests in flight, a foreign Origin, a DNS rebinding Host, and a missing or wrong
token (docs/design.md §5.2, §5.6 and §5.7).

Two clients independent of ``channels`` do most of the talking: the ``websockets`` library (run in
a thread through its sync API) where the point is interoperability, and :class:`RawWebSocket`, a
few lines of hand-written HTTP and RFC 6455 framing over a trio stream, where the point is to send
what a well-behaved library would not (or to not answer what it would).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import signal
import socket
import ssl
import struct
import subprocess
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, TypeVar

import attrs
import pytest
import trio
import trio.testing
import trio_websocket
import websockets.sync.client
from websockets.exceptions import ConnectionClosed, ConnectionClosedOK, InvalidStatus

from bridge import Daemon, Limits
from channels import (
    AccessDenied,
    ConnectOptions,
    HandshakeError,
    ListenOptions,
    MessageChannel,
    PeerInfo,
    ProtocolError,
    TokenSet,
    WebSocketChannel,
    parse_address,
    receive_batch,
)
from channels._core.guard import RequestGuard
from channels._sockets.endpoint import Endpoint
from channels._ws.listener import WebSocketIncoming

from conftest import (
    REPO,
    TlsFiles,
    bridge_argv,
    bridge_process,
    call,
    example_server,
    poll,
    request,
    result_text,
    running_bridge,
)

TIMEOUT = 20  # seconds for one test with real sockets and child processes
RECV = 10  # seconds a websockets call in a thread may block (threads cannot be cancelled)

TOKEN = "ws-test-token-Zq8v3LkP0dXr7sYw"
WRONG_TOKEN = "ws-wrong-token-Hn2b9QmT5cGj4uVe"
TOKENS = TokenSet.of([(TOKEN, "test token")])

T = TypeVar("T")


# -- a hand-written client: HTTP/1.1 upgrade and RFC 6455 frames ----------------------------------

TEXT, BINARY, CLOSE, PING, PONG, CONTINUATION = 0x1, 0x2, 0x8, 0x9, 0xA, 0x0
ACCEPT_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


@attrs.frozen
class HttpResponse:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name.lower()]

    def json(self) -> Any:
        return json.loads(self.body)


@attrs.frozen
class Frame:
    opcode: int
    payload: bytes
    fin: bool = True

    @property
    def code(self) -> int | None:
        """The status code of a close frame."""
        return int.from_bytes(self.payload[:2], "big") if len(self.payload) >= 2 else None

    @property
    def reason(self) -> str:
        return self.payload[2:].decode()

    def json(self) -> Any:
        assert self.opcode == TEXT, self
        return json.loads(self.payload)


def client_frame(
    opcode: int, payload: bytes, *, fin: bool = True, mask: bytes = b"\x37\xfa\x21\x3d"
) -> bytes:
    """One client-to-server frame (masked, as RFC 6455 §5.3 requires of clients)."""
    first = bytes([(0x80 if fin else 0) | opcode])
    size = len(payload)
    if size < 126:
        length = bytes([0x80 | size])
    elif size < 1 << 16:
        length = bytes([0x80 | 126]) + size.to_bytes(2, "big")
    else:
        length = bytes([0x80 | 127]) + size.to_bytes(8, "big")
    masked = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
    return first + length + mask + masked


def upgrade_request(
    path: str = "/mcp", *, host: str | None, headers: Sequence[tuple[str, str]] = (), key: str | None = None
) -> bytes:
    lines = [f"GET {path} HTTP/1.1"]
    if host is not None:
        lines.append(f"Host: {host}")
    lines += [
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key or base64.b64encode(os.urandom(16)).decode()}",
        "Sec-WebSocket-Version: 13",
    ]
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@attrs.define(eq=False)
class RawWebSocket:
    """A WebSocket client written out by hand: it sends exactly the bytes a test asks for, and
    answers nothing on its own (no pongs, no close replies)."""

    stream: trio.abc.Stream
    _buffer: bytearray = attrs.field(factory=bytearray)

    @classmethod
    async def open(cls, port: int) -> RawWebSocket:
        return cls(await trio.open_tcp_stream("127.0.0.1", port))

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def _more(self) -> None:
        try:
            data = await self.stream.receive_some(1 << 16)
        except trio.BrokenResourceError as exc:  # a reset counts as the end here
            raise EOFError("connection reset") from exc
        if not data:
            raise EOFError("connection closed")
        self._buffer += data

    async def _take(self, size: int) -> bytes:
        while len(self._buffer) < size:
            await self._more()
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    async def read_response(self) -> HttpResponse:
        while b"\r\n\r\n" not in self._buffer:
            await self._more()
        head, _, rest = bytes(self._buffer).partition(b"\r\n\r\n")
        self._buffer = bytearray(rest)
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        headers = [
            (name.strip().lower(), value.strip())
            for name, _, value in (line.partition(":") for line in header_lines)
        ]
        length = sum(int(value) for name, value in headers if name == "content-length")
        return HttpResponse(int(status_line.split(" ")[1]), headers, await self._take(length))

    async def request(
        self, path: str = "/mcp", *, host: str | None, headers: Sequence[tuple[str, str]] = ()
    ) -> HttpResponse:
        """Send an upgrade request and read the answer (checking Sec-WebSocket-Accept on 101)."""
        key = base64.b64encode(os.urandom(16)).decode()
        await self.send(upgrade_request(path, host=host, headers=headers, key=key))
        response = await self.read_response()
        if response.status == 101:
            expected = base64.b64encode(hashlib.sha1(key.encode() + ACCEPT_GUID).digest()).decode()
            assert response.header("sec-websocket-accept") == [expected]
        return response

    async def upgrade(
        self, host: str, path: str = "/mcp", headers: Sequence[tuple[str, str]] = ()
    ) -> HttpResponse:
        response = await self.request(path, host=host, headers=headers)
        assert response.status == 101, response
        return response

    async def send_frame(self, opcode: int, payload: bytes, *, fin: bool = True) -> None:
        await self.send(client_frame(opcode, payload, fin=fin))

    async def send_json(self, message: Any) -> None:
        await self.send_frame(TEXT, json.dumps(message).encode())

    async def receive_frame(self) -> Frame:
        first, second = await self._take(2)
        assert not second & 0x80, "a server must not mask its frames"
        size = second & 0x7F
        if size == 126:
            size = int.from_bytes(await self._take(2), "big")
        elif size == 127:
            size = int.from_bytes(await self._take(8), "big")
        return Frame(first & 0x0F, await self._take(size), bool(first & 0x80))

    async def receive_until_close(self) -> tuple[list[Frame], Frame]:
        """Every frame up to the close frame, and the close frame."""
        frames = []
        while (frame := await self.receive_frame()).opcode != CLOSE:
            frames.append(frame)
        return frames, frame

    async def wait_closed(self) -> bytes:
        """Read until the server ends the connection; return what came before that."""
        while True:
            try:
                await self._more()
            except EOFError:
                rest = bytes(self._buffer)
                self._buffer.clear()
                return rest

    async def aclose(self) -> None:
        await self.stream.aclose()


def port_of(address: str) -> int:
    """The port of ``ws://127.0.0.1:PORT/PATH``."""
    return int(address.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])


# -- the websockets library, in a thread ----------------------------------------------------------


async def in_thread(function: Callable[[], T]) -> T:
    """Run a conversation with the (blocking) websockets client. Every call in it has its own
    timeout, so an abandoned thread still ends."""
    return await trio.to_thread.run_sync(function, abandon_on_cancel=True)


def ws_connect(uri: str, **options: Any) -> websockets.sync.client.ClientConnection:
    options.setdefault("open_timeout", RECV)
    options.setdefault("close_timeout", 2)
    return websockets.sync.client.connect(uri, **options)


def ws_call(connection: websockets.sync.client.ClientConnection, message: dict[str, Any]) -> Any:
    connection.send(json.dumps(message))
    return json.loads(connection.recv(timeout=RECV))


def refusal(uri: str, **options: Any) -> Any:
    """The HTTP response of an upgrade the server refuses (websockets' view of it)."""
    with pytest.raises(InvalidStatus) as refused:
        ws_connect(uri, **options).close()
    return refused.value.response


def closed_by_server(connection: websockets.sync.client.ClientConnection) -> ConnectionClosed:
    """Wait for the server's close, which must come next (no message before it); return the
    exception that carries its code."""
    with pytest.raises(ConnectionClosed) as closed:
        connection.recv(timeout=RECV)
    return closed.value


INITIALIZE = request(
    1,
    "initialize",
    {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "ws-test", "version": "1"}},
)
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


# -- a bare WebSocket listener, for what concerns the listener alone ------------------------------


@attrs.frozen
class Served:
    peer: PeerInfo
    subprotocol: str | None


@attrs.frozen
class Refused:
    message: str


@attrs.define(eq=False)
class EchoServer:
    """A WebSocket listener whose connections answer each request with its method and params;
    every handshake's outcome (:class:`Served` or :class:`Refused`) is reported in order."""

    address: str
    _outcomes: trio.MemoryReceiveChannel[Served | Refused]

    @property
    def port(self) -> int:
        return port_of(self.address)

    async def outcome(self) -> Served | Refused:
        return await self._outcomes.receive()


async def _echo(channel: MessageChannel) -> None:
    while True:
        try:
            message = await channel.receive()
        except ProtocolError as exc:
            await channel.send(
                {"jsonrpc": "2.0", "id": exc.request_id, "error": {"code": exc.rpc_code, "message": str(exc)}}
            )
            continue
        except (trio.EndOfChannel, trio.BrokenResourceError):
            return
        if "method" in message and "id" in message:
            await channel.send(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "result": {"method": message["method"], "params": message.get("params")},
                }
            )


@asynccontextmanager
async def echo_server(
    options: ListenOptions | None = None, address: str = "ws://127.0.0.1:0/mcp"
) -> AsyncIterator[EchoServer]:
    listeners = await parse_address(address).listen(options or ListenOptions())
    send, receive = trio.open_memory_channel[Served | Refused](100)

    async def handle(incoming: Any) -> None:
        try:
            async with incoming.establish() as channel:
                send.send_nowait(Served(channel.peer, channel.subprotocol))
                await _echo(channel)
        except HandshakeError as exc:
            send.send_nowait(Refused(str(exc)))

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, handle, listeners)
            yield EchoServer(listeners[0].address, receive)
            nursery.cancel_scope.cancel()
    finally:
        for listener in listeners:
            await trio.aclose_forcefully(listener)


@asynccontextmanager
async def ws_bridge(*flags: str, **options: Any) -> AsyncIterator[tuple[Daemon, str]]:
    """The bridge in this process serving the example server on ``ws://127.0.0.1:PORT/mcp``."""
    async with running_bridge(example_server(*flags), ["ws://127.0.0.1:0/mcp"], **options) as daemon:
        yield daemon, daemon.addresses[0]


def child_started(caplog: pytest.LogCaptureFixture) -> bool:
    return any("child pid" in record.getMessage() for record in caplog.records)


# -- 1. subprotocol, and an MCP session with an independent client --------------------------------


async def test_a_client_offering_the_mcp_subprotocol_is_answered_with_mcp() -> None:
    def conversation() -> tuple[str | None, Any]:
        with ws_connect(server.address, subprotocols=["mcp"]) as connection:
            return connection.subprotocol, ws_call(connection, request(1, "ping"))

    with trio.fail_after(TIMEOUT):
        async with echo_server() as server:
            subprotocol, reply = await in_thread(conversation)
            outcome = await server.outcome()
    assert subprotocol == "mcp"
    assert isinstance(outcome, Served) and outcome.subprotocol == "mcp"
    assert reply["id"] == 1 and reply["result"]["method"] == "ping"


@pytest.mark.parametrize("offered", [None, ["graphql-ws"]], ids=["none", "another"])
async def test_a_client_offering_no_mcp_subprotocol_is_served_without_one(offered: list[str] | None) -> None:
    def conversation() -> tuple[str | None, Any]:
        with ws_connect(server.address, subprotocols=offered) as connection:
            return connection.subprotocol, ws_call(connection, request("x", "ping"))

    with trio.fail_after(TIMEOUT):
        async with echo_server() as server:
            subprotocol, reply = await in_thread(conversation)
            outcome = await server.outcome()
    assert subprotocol is None
    assert isinstance(outcome, Served) and outcome.subprotocol is None
    assert reply["id"] == "x"


async def test_the_server_side_peer_carries_the_upgrades_address_origin_and_user_agent() -> None:
    def conversation() -> None:
        with ws_connect(
            server.address, origin="http://localhost:5173", user_agent_header="ws-test-agent/1.0"
        ) as connection:
            ws_call(connection, request(1, "ping"))

    with trio.fail_after(TIMEOUT):
        async with echo_server() as server:
            await in_thread(conversation)
            outcome = await server.outcome()
    assert isinstance(outcome, Served)
    assert outcome.peer.transport == "ws"
    assert outcome.peer.address is not None and outcome.peer.address.startswith("127.0.0.1:")
    assert outcome.peer.origin == "http://localhost:5173"
    assert outcome.peer.user_agent == "ws-test-agent/1.0"


async def test_an_mcp_session_over_ws_round_trips_initialize_and_a_tool_call() -> None:
    def session() -> list[Any]:
        with ws_connect(uri, subprotocols=["mcp"]) as connection:
            initialized = ws_call(connection, INITIALIZE)
            connection.send(json.dumps(INITIALIZED))
            echoed = ws_call(connection, call(2, "echo", text="über ws ✓"))
            added = ws_call(connection, call(3, "add", a=2, b=40))
            return [initialized, echoed, added, trio.from_thread.run_sync(daemon.statistics)]

    with trio.fail_after(TIMEOUT):
        async with ws_bridge() as (daemon, uri):
            initialized, echoed, added, stats = await in_thread(session)
    assert initialized["id"] == 1
    assert initialized["result"]["serverInfo"]["name"] == "mcp-bridge-example"
    assert echoed["id"] == 2 and result_text(echoed) == "über ws ✓"
    assert added["id"] == 3 and result_text(added) == "42"
    assert stats.connections == 1 and stats.children == 1


async def test_string_ids_come_back_over_ws_exactly_as_sent() -> None:
    ids: list[Any] = ["abc:1", "1", ":", "", "x" * 200, 1, 0, -7, 2**53]

    def session() -> list[Any]:
        with ws_connect(uri) as connection:
            for request_id in ids:
                connection.send(json.dumps(call(request_id, "echo", text=repr(request_id))))
            return [json.loads(connection.recv(timeout=RECV)) for _ in ids]

    with trio.fail_after(TIMEOUT):
        async with ws_bridge() as (_, uri):
            replies = await in_thread(session)
    assert [reply["id"] for reply in replies] == ids
    assert [type(reply["id"]) for reply in replies] == [type(i) for i in ids]
    assert [result_text(reply) for reply in replies] == [repr(i) for i in ids]


async def test_an_mcp_session_over_wss_round_trips_with_the_websockets_client(tls_files: TlsFiles) -> None:
    context = ssl.create_default_context(cafile=tls_files.ca)

    def session() -> tuple[str | None, Any]:
        with ws_connect(uri, ssl=context, subprotocols=["mcp"]) as connection:
            return connection.subprotocol, ws_call(connection, call("tls:1", "echo", text="s"))

    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(), ["wss://127.0.0.1:0/mcp"], listen_options=tls_files.listen_options()
        ) as daemon:
            uri = daemon.addresses[0]
            assert uri.startswith("wss://127.0.0.1:")
            subprotocol, reply = await in_thread(session)
    assert subprotocol == "mcp"
    assert reply["id"] == "tls:1" and result_text(reply) == "s"


async def test_a_message_split_over_continuation_frames_is_reassembled() -> None:
    message = json.dumps(call("frag", "echo", text="in three parts")).encode()
    with trio.fail_after(TIMEOUT):
        async with ws_bridge() as (_, uri):
            client = await RawWebSocket.open(port_of(uri))
            await client.upgrade(f"127.0.0.1:{port_of(uri)}")
            await client.send_frame(TEXT, message[:10], fin=False)
            await client.send_frame(CONTINUATION, message[10:20], fin=False)
            await client.send_frame(CONTINUATION, message[20:])
            reply = (await client.receive_frame()).json()
            await client.aclose()
    assert reply["id"] == "frag" and result_text(reply) == "in three parts"


# -- 2. Origin ------------------------------------------------------------------------------------


async def test_an_upgrade_with_a_foreign_origin_is_refused_with_403_before_anything_reaches_a_child(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    with trio.fail_after(TIMEOUT):
        async with ws_bridge() as (daemon, uri):
            response = await in_thread(partial(refusal, uri, origin="https://evil.example"))
            await poll(lambda: daemon.statistics().handshakes_failed == 1)
            stats = daemon.statistics()
    assert response.status_code == 403
    assert response.headers["Content-Type"] == "application/json"
    body = json.loads(response.body)
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["code"] == -32000
    assert body["error"]["data"]["reason"] == "origin-not-allowed"
    assert "--allow-origin" in body["error"]["message"]
    assert stats.children == 0 and stats.connections == 0 and stats.connections_refused == 0
    assert not child_started(caplog)


@pytest.mark.parametrize(
    "origin",
    [None, "http://localhost:1234", "http://127.0.0.1", "https://[::1]:8443", "http://LocalHost:3000"],
)
async def test_no_origin_or_a_loopback_origin_is_allowed_on_a_loopback_bind(origin: str | None) -> None:
    headers = [] if origin is None else [("Origin", origin)]
    with trio.fail_after(TIMEOUT):
        async with echo_server() as server:
            client = await RawWebSocket.open(server.port)
            await client.upgrade(f"127.0.0.1:{server.port}", headers=headers)
            await client.send_json(request(1, "ping"))
            reply = (await client.receive_frame()).json()
            outcome = await server.outcome()
            await client.aclose()
    assert reply["id"] == 1
    assert isinstance(outcome, Served) and outcome.peer.origin == origin


@pytest.mark.parametrize(
    "origin",
    [
        "https://evil.example",
        "http://localhost.evil.example",
        "http://localhost@evil.example",
        "null",
        "file://",
        "http://127.0.0.1.nip.io:8080",
    ],
)
async def test_a_non_loopback_origin_is_refused_with_403_on_a_loopback_bind(origin: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with echo_server() as server:
            client = await RawWebSocket.open(server.port)
            response = await client.request(host=f"127.0.0.1:{server.port}", headers=[("Origin", origin)])
            outcome = await server.outcome()
            await client.wait_closed()
    assert response.status == 403
    assert response.json()["error"]["data"]["reason"] == "origin-not-allowed"
    assert isinstance(outcome, Refused) and "403" in outcome.message


async def test_an_origin_listed_in_allow_origins_is_admitted_and_others_are_still_refused() -> None:
    options = ListenOptions(allow_origins=frozenset({"https://app.example", "null"}))
    with trio.fail_after(TIMEOUT):
        async with echo_server(options) as server:
            statuses = []
            for origin in [
                "https://app.example",
                "HTTPS://APP.EXAMPLE",
                "null",
                "https://app.example.evil",
                "http://app.example",
                "http://localhost:8080",
            ]:
                client = await RawWebSocket.open(server.port)
                response = await client.request(host=f"127.0.0.1:{server.port}", headers=[("Origin", origin)])
                statuses.append(response.status)
                await client.aclose()
    assert statuses == [101, 101, 101, 403, 403, 101]


async def test_two_origin_headers_are_refused_with_403_even_if_each_is_allowed() -> None:
    with trio.fail_after(TIMEOUT):
        async with echo_server() as server:
            client = await RawWebSocket.open(server.port)
            response = await client.request(
                host=f"127.0.0.1:{server.port}",
                headers=[("Origin", "http://localhost"), ("Origin", "http://localhost")],
            )
            outcome = await server.outcome()
            await client.aclose()
    assert response.status == 403
    assert "more than one Origin" in response.json()["error"]["message"]
    assert isinstance(outcome, Refused)


# -- 3. Host (DNS rebinding) ----------------------------------------------------------------------


async def test_a_foreign_host_is_refused_with_403_so_dns_rebinding_fails() -> None:
    with trio.fail_after(TIMEOUT):
        async with echo_server() as server:
            client = await RawWebSocket.open(server.port)
            # What a page on attacker.example sends once its name resolves to 127.0.0.1: its own
            # name as Host (and its own origin, which fails too; the Host is checked first).
            response = await client.request(
                host=f"attacker.example:{server.port}", headers=[("Origin", "http://attacker.example")]
            )
            outcome = await server.outcome()
            await client.aclose()
    assert response.status == 403
    assert response.json()["error"]["data"]["reason"] == "host-not-allowed"
    assert isinstance(outcome, Refused)


@pytest.mark.parametrize(
    "host", ["localhost:{port}", "[::1]:{port}", "127.0.0.1", "127.0.0.1:{port}", "LOCALHOST.:{port}"]
)
async def test_loopback_host_names_pass_on_a_loopback_bind(host: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with echo_server() as server:
            client = await RawWebSocket.open(server.port)
            await client.upgrade(host.format(port=server.port))
            outcome = await server.outcome()
            await client.aclose()
    assert isinstance(outcome, Served)


async def test_a_host_listed_in_allow_hosts_is_admitted_besides_the_loopback_names() -> None:
    options = ListenOptions(allow_hosts=frozenset({"mcp.internal"}))
    with trio.fail_after(TIMEOUT):
        async with echo_server(options) as server:
            statuses = []
            for host in ["mcp.internal:{port}", "MCP.Internal", "localhost:{port}", "other.internal:{port}"]:
                client = await RawWebSocket.open(server.port)
                response = await client.request(host=host.format(port=server.port))
                statuses.append(response.status)
                await client.aclose()
    assert statuses == [101, 101, 101, 403]


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (upgrade_request(host=None), 400),
        (upgrade_request(host="localhost", headers=[("Host", "attacker.example")]), 400),
        (b"GET /mcp HTTP/1.1\r\nHost: localhost\r\n\r\n", 426),  # Upgrade Required
    ],
    ids=["no-host", "two-hosts", "not-an-upgrade"],
)
async def test_a_malformed_upgrade_request_is_answered_4xx_and_never_served(raw: bytes, status: int) -> None:
    with trio.fail_after(TIMEOUT):
        async with echo_server(ListenOptions(handshake_timeout=0.5)) as server:
            client = await RawWebSocket.open(server.port)
            await client.send(raw)
            response = await client.read_response()
            await client.wait_closed()
            outcome = await server.outcome()
    assert response.status == status
    assert isinstance(outcome, Refused)


# -- 4. bearer tokens -----------------------------------------------------------------------------


async def test_an_upgrade_without_a_token_is_refused_with_401_and_www_authenticate_bearer() -> None:
    with trio.fail_after(TIMEOUT):
        async with echo_server(ListenOptions(tokens=TOKENS)) as server:
            response = await in_thread(partial(refusal, server.address))
            outcome = await server.outcome()
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert json.loads(response.body)["error"]["data"]["reason"] == "unauthorized"
    assert isinstance(outcome, Refused) and "401" in outcome.message


@pytest.mark.parametrize(
    "authorization", [f"Bearer {WRONG_TOKEN}", f"Basic {TOKEN}", TOKEN, "Bearer", f"Bearer {TOKEN[:-1]}"]
)
async def test_an_upgrade_with_a_wrong_token_is_refused_with_401(authorization: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with echo_server(ListenOptions(tokens=TOKENS)) as server:
            response = await in_thread(
                partial(refusal, server.address, additional_headers={"Authorization": authorization})
            )
    assert response.status_code == 401


async def test_an_upgrade_with_the_right_token_is_served_and_labelled_with_it() -> None:
    def conversation() -> Any:
        with ws_connect(
            server.address, additional_headers={"Authorization": f"bearer {TOKEN}"}
        ) as connection:
            return ws_call(connection, request(1, "ping"))

    with trio.fail_after(TIMEOUT):
        async with echo_server(ListenOptions(tokens=TOKENS)) as server:
            reply = await in_thread(conversation)
            outcome = await server.outcome()
    assert reply["id"] == 1
    assert isinstance(outcome, Served) and outcome.peer.credential == "test token"


async def test_a_foreign_origin_is_refused_with_403_even_with_the_right_token() -> None:
    with trio.fail_after(TIMEOUT):
        async with echo_server(ListenOptions(tokens=TOKENS)) as server:
            response = await in_thread(
                partial(
                    refusal,
                    server.address,
                    origin="https://evil.example",
                    additional_headers={"Authorization": f"Bearer {TOKEN}"},
                )
            )
    assert response.status_code == 403


async def test_a_refused_token_never_starts_a_child_and_no_token_reaches_the_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="channels.websocket.wire")  # headers at DEBUG too

    def conversations() -> tuple[list[int], Any]:
        statuses = [
            refusal(uri).status_code,
            refusal(uri, additional_headers={"Authorization": f"Bearer {WRONG_TOKEN}"}).status_code,
        ]
        with ws_connect(uri, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as connection:
            return statuses, ws_call(connection, call(1, "echo", text="authenticated"))

    with trio.fail_after(TIMEOUT):
        async with ws_bridge(listen_options=ListenOptions(tokens=TOKENS)) as (daemon, uri):
            statuses, reply = await in_thread(conversations)
            await poll(lambda: daemon.statistics().handshakes_failed == 2)
            stats = daemon.statistics()
            children_started = sum("child pid" in record.getMessage() for record in caplog.records)
    assert statuses == [401, 401]
    assert result_text(reply) == "authenticated"
    assert stats.connections_refused == 0 and stats.connections_total == 3
    assert children_started == 1  # the authenticated connection's, and only that one
    assert sum("refused: upgrade refused with 401" in record.getMessage() for record in caplog.records) == 2
    # Everything the bridge's side logged, at DEBUG (the websockets client logs its own headers).
    server_side = [record for record in caplog.records if not record.name.startswith("websockets")]
    assert {record.name for record in server_side} >= {"bridge.daemon", "channels.websocket.wire"}
    for record in server_side:
        text = record.getMessage() + repr(record.args)
        assert TOKEN not in text and WRONG_TOKEN not in text, record


async def test_our_client_presents_its_token_and_reports_a_refusal_as_access_denied() -> None:
    with trio.fail_after(TIMEOUT):
        async with echo_server(ListenOptions(tokens=TOKENS)) as server:
            address = parse_address(server.address)
            async with address.connect(ConnectOptions(token=TOKEN)) as channel:
                await channel.send(request(1, "ping"))
                reply = await channel.receive()
                assert isinstance(channel, WebSocketChannel) and channel.subprotocol == "mcp"
            with pytest.raises(AccessDenied, match="401") as denied:
                async with address.connect(ConnectOptions(token=WRONG_TOKEN)):
                    pass  # pragma: no cover
    assert reply["id"] == 1
    assert WRONG_TOKEN not in str(denied.value)


# -- 5. path --------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/mcp/", "/MCP", "/other"])
async def test_an_upgrade_to_another_path_is_refused_with_404_naming_the_endpoint(path: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with echo_server() as server:
            uri = server.address.removesuffix("/mcp") + path
            response = await in_thread(partial(refusal, uri))
            outcome = await server.outcome()
    assert response.status_code == 404
    assert "/mcp" in json.loads(response.body)["error"]["message"]
    assert isinstance(outcome, Refused)


async def test_a_query_string_on_the_endpoint_path_is_served() -> None:
    def conversation() -> Any:
        with ws_connect(server.address + "?session=1") as connection:
            return ws_call(connection, request(1, "ping"))

    with trio.fail_after(TIMEOUT):
        async with echo_server() as server:
            reply = await in_thread(conversation)
    assert reply["id"] == 1


# -- 6. frames a client gets wrong ----------------------------------------------------------------


async def _bad_frame(*frames: bytes) -> tuple[list[Frame], Frame, Daemon]:
    async with ws_bridge() as (daemon, uri):
        client = await RawWebSocket.open(port_of(uri))
        await client.upgrade(f"127.0.0.1:{port_of(uri)}")
        await client.send_json(request("before", "ping"))
        assert (await client.receive_frame()).json()["id"] == "before"
        for frame in frames:
            await client.send(frame)
        before, close = await client.receive_until_close()
        await client.send_frame(CLOSE, close.payload[:2])
        await client.wait_closed()
        await poll(lambda: daemon.statistics().connections == 0)
    return before, close, daemon


async def test_a_binary_frame_is_closed_with_1003() -> None:
    message = json.dumps(request(1, "ping")).encode()
    with trio.fail_after(TIMEOUT):
        frames, close, _ = await _bad_frame(client_frame(BINARY, message))
    assert frames == []
    assert close.code == 1003
    assert "text" in close.reason


async def test_a_message_read_together_with_a_binary_frame_is_still_delivered() -> None:
    # Both frames arrive in one read: receive_batch hands out the text message it took before the
    # channel broke, and only the next call raises.
    client_stream, server_stream = trio.testing.memory_stream_pair()
    incoming = memory_incoming(server_stream, ListenOptions())
    peer = RawWebSocket(client_stream)
    text = client_frame(TEXT, json.dumps(request("first", "ping")).encode())
    with trio.fail_after(TIMEOUT):
        await peer.send(upgrade_request(host="127.0.0.1:7301"))
        async with incoming.establish() as channel:
            assert (await peer.read_response()).status == 101
            await peer.send(text + client_frame(BINARY, b"\x00\x01"))
            batch = await receive_batch(channel, 64)
            assert batch == [request("first", "ping")]
            with pytest.raises(trio.BrokenResourceError, match="binary"):
                await receive_batch(channel, 64)
            assert (await peer.receive_frame()).code == 1003


INVALID_UTF8 = pytest.mark.parametrize(
    "payload",
    [b'{"jsonrpc":"2.0","id":1,"method":"\xff"}', b"\xed\xa0\x80", b"\xc3"],
    ids=["0xff", "surrogate", "cut"],
)


@INVALID_UTF8
async def test_invalid_utf8_in_a_text_frame_ends_the_connection_at_once_and_reaches_no_child(
    payload: bytes,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with ws_bridge() as (daemon, uri):
            client = await RawWebSocket.open(port_of(uri))
            await client.upgrade(f"127.0.0.1:{port_of(uri)}")
            await client.send_json(call(1, "echo", text="before"))
            assert result_text((await client.receive_frame()).json()) == "before"
            await client.send_frame(TEXT, payload)
            await client.wait_closed()
            await poll(lambda: daemon.statistics().connections == 0)
            stats = daemon.statistics()
    assert stats.children == 0 and stats.child_garbage_lines == 0


@INVALID_UTF8
def test_invalid_utf8_in_a_text_frame_is_closed_with_1007(payload: bytes) -> None:
    async def close_code() -> int | None:
        with trio.fail_after(TIMEOUT):
            async with ws_bridge() as (_, uri):
                client = await RawWebSocket.open(port_of(uri))
                await client.upgrade(f"127.0.0.1:{port_of(uri)}")
                await client.send_frame(TEXT, payload)
                try:
                    _, close = await client.receive_until_close()
                except EOFError:
                    return None  # the connection ended without a close frame
                return close.code

    assert trio.run(close_code) == 1007


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "{",
        '{"jsonrpc":"2.0","id":1,"method":"x"} {}',
        ('{"jsonrpc":"2.0","id":1,"method":"x"}\n{"jsonrpc":"2.0","id":2,"method":"x"}'),
        "NaN",
        "",
    ],
    ids=["words", "cut", "two-values", "two-lines", "nan", "empty"],
)
async def test_a_text_frame_that_is_not_one_json_value_gets_32700_and_the_connection_goes_on(
    text: str,
) -> None:
    def session() -> tuple[Any, Any, Any]:
        with ws_connect(uri) as connection:
            connection.send(text)
            error = json.loads(connection.recv(timeout=RECV))
            reply = ws_call(connection, call(3, "echo", text="still here"))
            return error, reply, trio.from_thread.run_sync(daemon.statistics)

    with trio.fail_after(TIMEOUT):
        async with ws_bridge() as (daemon, uri):
            error, reply, stats = await in_thread(session)
    assert error["id"] is None and error["error"]["code"] == -32700
    assert result_text(reply) == "still here"
    assert stats.connections == 1


async def test_a_json_value_that_is_not_json_rpc_gets_32600_by_id_and_the_connection_goes_on() -> None:
    def session() -> tuple[Any, Any]:
        with ws_connect(uri) as connection:
            connection.send('{"jsonrpc":"1.0","id":"v1","method":"ping"}')
            error = json.loads(connection.recv(timeout=RECV))
            return error, ws_call(connection, request(4, "ping"))

    with trio.fail_after(TIMEOUT):
        async with ws_bridge() as (_, uri):
            error, reply = await in_thread(session)
    assert error["id"] == "v1" and error["error"]["code"] == -32600
    assert reply == {"jsonrpc": "2.0", "id": 4, "result": {}}


@pytest.mark.parametrize("text", ["x" * 2000, "é" * 600], ids=["characters", "utf8-bytes"])
async def test_a_message_over_the_limit_is_closed_with_1009(text: str) -> None:
    # 600 "é" are 600 characters (under trio-websocket's limit, which counts characters) but
    # 1200 bytes: the channel's own byte count catches them.
    def session() -> ConnectionClosed:
        with ws_connect(uri) as connection:
            assert ws_call(connection, request(1, "ping"))["id"] == 1
            connection.send(json.dumps(call(2, "echo", text=text), ensure_ascii=False))
            return closed_by_server(connection)

    with trio.fail_after(TIMEOUT):
        async with ws_bridge(limits=Limits(max_client_message=1024)) as (daemon, uri):
            closed = await in_thread(session)
            await poll(lambda: daemon.statistics().connections == 0)
    assert closed.rcvd is not None and closed.rcvd.code == 1009


# -- 7. close codes from the daemon ---------------------------------------------------------------


@pytest.mark.parametrize("child_mode", ["per-connection", "shared"])
async def test_an_idle_client_is_closed_with_1001_when_the_daemon_stops(child_mode: str) -> None:
    def session() -> ConnectionClosed:
        with ws_connect(uri) as connection:
            assert ws_call(connection, request(1, "ping"))["id"] == 1
            trio.from_thread.run_sync(daemon.stop)
            return closed_by_server(connection)

    with trio.fail_after(TIMEOUT):
        async with ws_bridge(child_mode=child_mode) as (daemon, uri):
            closed = await in_thread(session)
    assert isinstance(closed, ConnectionClosedOK)
    assert closed.rcvd is not None and closed.rcvd.code == 1001


async def test_when_the_connections_child_exits_its_request_gets_32000_then_the_close_is_1012() -> None:
    def session() -> tuple[Any, Any, ConnectionClosed]:
        with ws_connect(uri) as connection:
            first = ws_call(connection, call(1, "echo", text="first"))
            second = ws_call(connection, call(2, "echo", text="second"))
            return first, second, closed_by_server(connection)

    with trio.fail_after(TIMEOUT):
        async with ws_bridge("--crash-after", "1") as (_, uri):
            first, second, closed = await in_thread(session)
    assert result_text(first) == "first"
    assert second["id"] == 2 and second["error"]["code"] == -32000
    assert second["error"]["data"]["reason"] == "child-exited"
    assert closed.rcvd is not None and closed.rcvd.code == 1012


async def test_a_client_over_the_connection_cap_is_answered_by_id_then_closed_with_1013() -> None:
    def session() -> tuple[Any, ConnectionClosed, Any, Any]:
        with ws_connect(uri) as first:
            assert ws_call(first, request(1, "ping"))["id"] == 1  # counted, and served
            with ws_connect(uri) as second:
                refused = ws_call(second, request("second:1", "ping"))
                closed = closed_by_server(second)
            reply = ws_call(first, call(2, "echo", text="first still served"))
            return refused, closed, reply, trio.from_thread.run_sync(daemon.statistics)

    with trio.fail_after(TIMEOUT):
        async with ws_bridge(limits=Limits(max_connections=1)) as (daemon, uri):
            refused, closed, reply, stats = await in_thread(session)
    assert refused["id"] == "second:1"
    assert refused["error"]["code"] == -31003
    assert refused["error"]["data"] == {"reason": "too-many-connections", "limit": 1}
    assert closed.rcvd is not None and closed.rcvd.code == 1013
    assert closed.rcvd.reason == "too many connections"
    assert result_text(reply) == "first still served"
    assert stats.connections_refused == 1 and stats.children == 1


@pytest.mark.parametrize("child_mode", ["auto", "per-connection"])
async def test_on_sigterm_a_request_in_flight_is_answered_before_the_close_1001(child_mode: str) -> None:
    # --child auto (the default) finds the example server dual-era and shares one child.
    sleep = request(
        "slow",
        "tools/call",
        {"name": "sleep", "arguments": {"seconds": 0.5}, "_meta": {"progressToken": "started"}},
    )
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--listen", "ws://127.0.0.1:0/mcp", "--child", child_mode, "--", *example_server()
        ) as bridge:
            [uri] = bridge.addresses
            client = await RawWebSocket.open(port_of(uri))
            await client.upgrade(f"localhost:{port_of(uri)}")
            await client.send_json(sleep)
            progress = (await client.receive_frame()).json()
            bridge.process.send_signal(signal.SIGTERM)
            frames, close = await client.receive_until_close()
            await client.send_frame(CLOSE, close.payload[:2])
            await client.wait_closed()
            assert await bridge.process.wait() == 0
    assert progress["method"] == "notifications/progress"
    assert [frame.json()["id"] for frame in frames] == ["slow"], bridge.log()
    assert result_text(frames[0].json()) == "slept"
    assert close.code == 1001, bridge.log()


async def test_on_a_graceful_stop_every_shared_mode_client_gets_its_reply_in_flight_then_1001() -> None:
    # Each client's last reply races its own drain (trio runs ready tasks in a random order):
    # with eight clients, a drain that cut off a reply being written would show here.
    clients = 8
    with trio.fail_after(TIMEOUT):
        async with ws_bridge(child_mode="shared") as (daemon, uri):
            sockets = []
            for number in range(clients):
                client = await RawWebSocket.open(port_of(uri))
                await client.upgrade(f"127.0.0.1:{port_of(uri)}")
                await client.send_json(call(f"c{number}", "sleep", seconds=0.05))
                sockets.append(client)
            await poll(lambda: daemon.statistics().requests_in_flight == clients)
            daemon.stop()
            endings = []
            for client in sockets:
                frames, close = await client.receive_until_close()
                await client.send_frame(CLOSE, close.payload[:2])
                endings.append(([frame.json() for frame in frames], close.code))
    for number, (replies, code) in enumerate(endings):
        assert [reply["id"] for reply in replies] == [f"c{number}"]
        assert result_text(replies[0]) == "slept"
        assert code == 1001


# -- 8. slow handshakes ---------------------------------------------------------------------------


async def test_a_half_sent_upgrade_is_cut_at_the_handshake_deadline_while_others_are_served() -> None:
    deadline = 0.5
    with trio.fail_after(TIMEOUT):
        async with ws_bridge(listen_options=ListenOptions(handshake_timeout=deadline)) as (daemon, uri):
            started = trio.current_time()  # before the slow client's deadline can start
            slow = await RawWebSocket.open(port_of(uri))
            await slow.send(upgrade_request(host=f"127.0.0.1:{port_of(uri)}")[:40])
            async with parse_address(uri).connect(ConnectOptions()) as other:
                upgraded = trio.current_time() - started
                await other.send(call(1, "echo", text="not held up"))
                reply = await other.receive()
            assert await slow.wait_closed() == b""  # no answer at all, just the end
            cut = trio.current_time() - started
            await poll(lambda: daemon.statistics().handshakes_failed == 1)
            stats = daemon.statistics()
    assert upgraded < deadline  # served while the slow one still held its connection
    assert result_text(reply) == "not held up"
    assert deadline <= cut < deadline + 2
    assert stats.connections_total == 2 and stats.connections_refused == 0


def memory_incoming(stream: trio.abc.Stream, options: ListenOptions) -> WebSocketIncoming:
    """A WebSocket connection as the listener on 127.0.0.1:7301/mcp would hand it over, but over
    a memory stream (for virtual time)."""
    guard = RequestGuard.create(
        loopback=True, bind_host="127.0.0.1", allow_hosts=frozenset(), allow_origins=frozenset(), tokens=None
    )
    return WebSocketIncoming(
        stream, PeerInfo("memory"), Endpoint("ws", "127.0.0.1", 7301, "/mcp"), guard, options
    )


async def test_an_upgrade_trickled_byte_by_byte_is_cut_at_the_default_ten_second_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client_stream, server_stream = trio.testing.memory_stream_pair()
    incoming = memory_incoming(server_stream, ListenOptions())
    request_bytes = upgrade_request(host="127.0.0.1:7301")
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:

            async def trickle() -> None:
                for byte in request_bytes[:-1]:  # never the final newline
                    try:
                        await client_stream.send_all(bytes([byte]))
                    except trio.BrokenResourceError:
                        return  # the server cut the connection
                    await trio.sleep(1)

            nursery.start_soon(trickle)
            with pytest.raises(HandshakeError, match="within 10s"):
                async with incoming.establish():
                    pass  # pragma: no cover
            cut = trio.current_time()
            answer = await client_stream.receive_some()
            nursery.cancel_scope.cancel()
    assert cut == pytest.approx(10)
    assert answer == b""  # closed, without a word


# -- 9. keepalive ---------------------------------------------------------------------------------


async def test_a_peer_that_never_answers_pings_is_closed_with_1011_after_interval_plus_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client_stream, server_stream = trio.testing.memory_stream_pair()
    incoming = memory_incoming(server_stream, ListenOptions())  # ping every 20 s, 20 s for a pong
    peer = RawWebSocket(client_stream)
    with trio.fail_after(300):
        async with trio.open_nursery() as nursery:

            async def serve(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
                async with incoming.establish() as channel:
                    task_status.started()
                    with pytest.raises(trio.BrokenResourceError, match="keepalive"):
                        await channel.receive()

            await peer.send(upgrade_request(host="127.0.0.1:7301"))
            await nursery.start(serve)
            start = trio.current_time()
            assert (await peer.read_response()).status == 101
            ping = await peer.receive_frame()
            pinged = trio.current_time() - start
            close = await peer.receive_frame()
            closed = trio.current_time() - start
            await peer.wait_closed()
    assert ping.opcode == PING and pinged == pytest.approx(20)
    assert close.opcode == CLOSE and close.code == 1011 and closed == pytest.approx(40)


async def test_a_peer_that_answers_pings_stays_connected(autojump_clock: trio.testing.MockClock) -> None:
    client_stream, server_stream = trio.testing.memory_stream_pair()
    incoming = memory_incoming(server_stream, ListenOptions(ping_interval=5, ping_timeout=1))
    with trio.fail_after(300):
        async with trio.open_nursery() as nursery:

            async def serve(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
                async with incoming.establish() as channel:
                    task_status.started()
                    message = await channel.receive()
                    await channel.send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
                    with pytest.raises(trio.EndOfChannel):  # the client's close, 1000
                        await channel.receive()

            nursery.start_soon(serve)
            client = await trio_websocket.wrap_client_stream(  # any Stream works
                nursery, client_stream, "127.0.0.1:7301", "/mcp"
            )  # type: ignore[arg-type]
            await trio.sleep(100)  # virtual: twenty pings, each answered by trio-websocket
            await client.send_message(json.dumps(request(1, "ping")))
            reply = json.loads(await client.get_message())
            await client.aclose()
    assert reply == {"jsonrpc": "2.0", "id": 1, "result": {}}


async def test_a_silent_peer_is_closed_by_keepalive_and_its_request_in_flight_does_not_hold_the_bridge() -> (
    None
):
    # The client answers pings until the child's progress shows its request in flight: the child
    # may take longer than interval + timeout to start on a loaded machine, and the keepalive
    # must not close a peer that answers. From then on the client is silent.
    # The timeout is the time a pong has to come back from a task of this same process: the 1 s
    # that tests/channels/http/test_fuzz_http.py (HANDSHAKE) found a loaded machine needs for a
    # well-behaved peer's bytes to be read.
    interval, timeout = 0.2, 1.0
    sleep = request(
        "long",
        "tools/call",
        {"name": "sleep", "arguments": {"seconds": 60}, "_meta": {"progressToken": "started"}},
    )
    with trio.fail_after(TIMEOUT):
        async with ws_bridge(
            listen_options=ListenOptions(ping_interval=interval, ping_timeout=timeout),
            limits=Limits(stop_stdin_timeout=0.2, stop_term_timeout=1),
        ) as (daemon, uri):
            started = trio.current_time()  # before the server's keepalive can start
            client = await RawWebSocket.open(port_of(uri))
            await client.upgrade(f"127.0.0.1:{port_of(uri)}")
            await client.send_json(sleep)
            while (first := await client.receive_frame()).opcode == PING:
                await client.send_frame(PONG, first.payload)
            frames, close = await client.receive_until_close()  # never answering a ping
            closed = trio.current_time() - started
            await client.wait_closed()
            await poll(lambda: daemon.statistics().connections == 0)
            stats = daemon.statistics()
    assert first.opcode == TEXT and first.json()["method"] == "notifications/progress", first
    assert [frame.opcode for frame in frames if frame.opcode != PING] == []
    assert PING in {frame.opcode for frame in frames}
    assert close.code == 1011
    assert closed >= interval + timeout
    assert stats.children == 0 and stats.requests_in_flight == 0


# -- the listener survives what the network does --------------------------------------------------


async def test_a_connection_reset_before_it_is_accepted_does_not_stop_the_daemon() -> None:
    def session() -> Any:
        with ws_connect(uri) as connection:
            return ws_call(connection, call(1, "echo", text="still listening"))

    with trio.fail_after(TIMEOUT):
        async with ws_bridge() as (daemon, uri):
            # Connect and reset with blocking calls, without yielding to trio: the daemon accepts
            # a connection that is already gone (its peer address can no longer be read).
            with socket.socket() as doomed:
                doomed.connect(("127.0.0.1", port_of(uri)))
                doomed.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            reply = await in_thread(session)
            stats = daemon.statistics()
    assert result_text(reply) == "still listening"
    assert stats.connections_total == 1  # the reset connection was skipped at accept


# -- 10. mcp-bridge connect ws:// -----------------------------------------------------------------


async def run_connect(
    address: str, stdin: bytes, *options: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        bridge_argv("connect", address, *options),
        stdin=stdin,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )


def lines(*messages: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(message).encode() + b"\n" for message in messages)


async def test_connect_relays_a_session_over_ws_and_exits_0_after_the_replies_to_stdin_eof() -> None:
    stdin = lines(INITIALIZE, INITIALIZED, call("abc:1", "sleep", seconds=0.3))
    with trio.fail_after(TIMEOUT):
        async with ws_bridge() as (_, uri):
            result = await run_connect(uri, stdin)
    stderr = result.stderr.decode()
    assert result.returncode == 0, stderr
    replies = [json.loads(line) for line in result.stdout.splitlines()]
    assert [reply["id"] for reply in replies] == [1, "abc:1"]
    assert replies[0]["result"]["serverInfo"]["name"] == "mcp-bridge-example"
    assert result_text(replies[1]) == "slept"


async def test_connect_presents_the_token_from_token_env() -> None:
    stdin = lines(INITIALIZE, call(2, "echo", text="with a token"))
    with trio.fail_after(TIMEOUT):
        async with ws_bridge(listen_options=ListenOptions(tokens=TOKENS)) as (_, uri):
            result = await run_connect(
                uri, stdin, "--token-env", "WS_TEST_TOKEN", env={"WS_TEST_TOKEN": TOKEN}
            )
    assert result.returncode == 0, result.stderr.decode()
    replies = [json.loads(line) for line in result.stdout.splitlines()]
    assert [reply["id"] for reply in replies] == [1, 2]
    assert result_text(replies[1]) == "with a token"


async def test_connect_with_a_wrong_token_exits_77_without_showing_it() -> None:
    with trio.fail_after(TIMEOUT):
        async with ws_bridge(listen_options=ListenOptions(tokens=TOKENS)) as (daemon, uri):
            result = await run_connect(
                uri, lines(INITIALIZE), "--token-env", "WS_TEST_TOKEN", env={"WS_TEST_TOKEN": WRONG_TOKEN}
            )
            stats = daemon.statistics()
    stderr = result.stderr.decode()
    assert result.returncode == 77, stderr
    assert result.stdout == b""
    assert "access denied" in stderr and "401" in stderr
    assert WRONG_TOKEN not in stderr and "Traceback" not in stderr
    assert stats.children == 0


async def test_a_bridge_process_serves_ws_with_token_env_and_allow_origin_from_the_command_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WS_TEST_TOKEN", TOKEN)
    authorization = {"Authorization": f"Bearer {TOKEN}"}

    def sessions() -> tuple[Any, int, int]:
        with ws_connect(uri, origin="https://app.example", additional_headers=authorization) as connection:
            reply = ws_call(connection, call(1, "echo", text="from the app"))
        foreign = refusal(uri, origin="https://evil.example", additional_headers=authorization)
        return reply, foreign.status_code, refusal(uri, origin="https://app.example").status_code

    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--listen",
            "ws://127.0.0.1:0/mcp",
            "--token-env",
            "WS_TEST_TOKEN",
            "--allow-origin",
            "https://app.example",
            "--",
            *example_server(),
        ) as bridge:
            [uri] = bridge.addresses
            assert uri.startswith("ws://127.0.0.1:") and uri.endswith("/mcp")
            reply, foreign, tokenless = await in_thread(sessions)
            result = await run_connect(
                uri, lines(call("c", "echo", text="connect")), "--token-env", "WS_TEST_TOKEN"
            )
    assert result_text(reply) == "from the app"
    assert (foreign, tokenless) == (403, 401)
    assert result.returncode == 0, result.stderr.decode()
    assert result_text(json.loads(result.stdout)) == "connect"
    assert TOKEN not in bridge.log()
