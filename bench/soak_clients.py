"""The soak's well-behaved stream clients (Unix, TCP, WebSocket), and what every client shares.

A client owns its connections (opens, uses and closes them) and writes only its configuration's
:class:`~soak_tally.Tally`. Stream clients open a session with ``initialize``, keep
:data:`CONCURRENCY` requests in flight, and reconnect after a while (so connections and
per-connection children churn); the HTTP clients (soak_http_clients.py) do the same with a legacy
session or with stateless 2026-07-28 POSTs. A connection the bridge ends is counted as a
disconnect, explained only if the configuration's child was killed within :data:`KILL_WINDOW_S`
before.
"""

from __future__ import annotations

import itertools
import json
import random
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio_websocket
from soak_http import LEGACY
from soak_tally import CANCEL_AFTER_S, CANCEL_SLEEP_S, Ledger, Tally, draw_call, tools_call
from wsproto.utilities import LocalProtocolError

CONCURRENCY = 2  # requests a client keeps in flight at once
CONNECTION_LIFE_S = (20.0, 60.0)  # a connection is closed and reopened after a time drawn here
# A disconnect within this long of a kill is put down to the kill: a per-connection child's
# connection ends at once, a legacy HTTP session on its next request (a slow call: up to 2 s).
KILL_WINDOW_S = 10.0
RETRY_S = 0.5  # between a failed connect and the next
# trio-websocket's own limit on a message it receives is 1 MiB (MAX_MESSAGE_SIZE): a 1 MiB blob's
# reply is 1 MiB plus its JSON-RPC envelope, and the client would fail its own connection with
# 1009 and count the requests in flight as lost. 2 MiB holds the largest reply of the mix.
WS_MAX_MESSAGE = 2 << 20
# trio-websocket reads 4 KiB at a time by default: 256 passes of its pure-Python reader for a
# 1 MiB reply, which starves the soak's 300 clients of CPU; 64 KiB is what the line clients read.
WS_RECEIVE_BYTES = 1 << 16
INITIALIZE_PARAMS = {
    "protocolVersion": LEGACY,
    "capabilities": {},
    "clientInfo": {"name": "soak", "version": "1"},
}
# What a write to a connection the bridge has closed raises.
CLOSED_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError, trio_websocket.ConnectionClosed)


def initialize(request_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": INITIALIZE_PARAMS}


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def cancelled(request_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}


class LineStream:
    """Newline-delimited JSON-RPC on a trio stream (Unix or TCP), owned by its client."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self.lock = trio.Lock()  # the client's workers share the connection

    async def send(self, message: dict[str, Any]) -> None:
        async with self.lock:
            await self.stream.send_all(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    async def receive(self) -> dict[str, Any] | None:
        while (end := self.buffer.find(b"\n")) < 0:
            try:
                data = await self.stream.receive_some(1 << 16)
            except (trio.BrokenResourceError, OSError):
                return None
            if not data:
                return None
            self.buffer += data
        line = bytes(self.buffer[:end])
        del self.buffer[: end + 1]
        return dict(json.loads(line))

    async def aclose(self) -> None:
        await self.stream.aclose()

    def peer(self) -> str | None:
        """This connection as the bridge's log names it (``127.0.0.1:PORT``); None over Unix."""
        if isinstance(self.stream, trio.SocketStream) and self.stream.socket.family == socket.AF_INET:
            host, port = self.stream.socket.getsockname()
            return f"{host}:{port}"
        return None


class WsStream:
    """JSON-RPC in WebSocket text messages, owned by its client.

    ``closed_with`` is the close code and reason the connection ended with (``"1012 child
    exited"``), once :meth:`receive` has seen the end; the soak counts disconnects by it.
    """

    def __init__(self, ws: trio_websocket.WebSocketConnection) -> None:
        self.ws = ws
        self.closed_with: str | None = None

    async def send(self, message: dict[str, Any]) -> None:
        await self.ws.send_message(json.dumps(message, separators=(",", ":")))

    async def receive(self) -> dict[str, Any] | None:
        try:
            return dict(json.loads(await self.ws.get_message()))
        except trio_websocket.ConnectionClosed as exc:
            self.closed_with = close_text(exc.reason)
            return None

    async def aclose(self) -> None:
        await self.ws.aclose()

    def peer(self) -> str | None:
        """This connection as the bridge's log names it (``127.0.0.1:PORT``)."""
        local = self.ws.local
        return f"{local.address}:{local.port}" if isinstance(local, trio_websocket.Endpoint) else None


def close_text(reason: trio_websocket.CloseReason | None) -> str:
    """A close as the client saw it: ``"1011 keepalive ping timeout"``, ``"no close frame"``."""
    if reason is None:
        return "no close frame"
    return f"{reason.code} {reason.reason or reason.name}".rstrip()


async def connect_stream(address: str) -> LineStream:
    """Open a connection to ``unix:PATH`` or ``tcp:HOST:PORT``."""
    if address.startswith("unix:"):
        return LineStream(await trio.open_unix_socket(address[5:]))
    host, port = address[4:].rsplit(":", 1)
    return LineStream(await trio.open_tcp_stream(host, int(port)))


def on_disconnect(tally: Tally, what: str) -> None:
    if tally.killed_recently(KILL_WINDOW_S):
        tally.disconnects += 1
    elif len(tally.unexplained_disconnects) < 20:
        tally.unexplained_disconnects.append(f"{trio.current_time():.1f}s {what}")
    else:
        tally.unexplained_disconnects.append("...")


@asynccontextmanager
async def opened(address: str) -> AsyncIterator[LineStream | WsStream]:
    """A connection to ``unix:PATH``, ``tcp:HOST:PORT`` or ``ws://HOST:PORT/``, closed on exit.

    trio-websocket runs a reader task per connection, which can raise on its own (wsproto's
    LocalProtocolError for a pong sent while the connection closes): each WebSocket gets a nursery
    of its own, so that error ends this connection only, as a close would.
    """
    if not address.startswith("ws://"):
        conn = await connect_stream(address)
        try:
            yield conn
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(2):
                await conn.aclose()
        return
    host, port = address[5:].rstrip("/").rsplit(":", 1)
    try:
        async with trio.open_nursery() as nursery:
            ws = WsStream(
                await trio_websocket.connect_websocket(
                    nursery,
                    host,
                    int(port),
                    "/",
                    use_ssl=False,
                    max_message_size=WS_MAX_MESSAGE,
                    receive_buffer_size=WS_RECEIVE_BYTES,
                )
            )
            try:
                yield ws
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(2):
                    await ws.aclose()
    except BaseExceptionGroup as group:
        _, rest = group.split(LocalProtocolError)
        if rest is None:
            return  # the library's own error: this connection is over
        leaves = list(_leaves(rest))
        if len(leaves) == 1:
            raise leaves[0] from None  # as the caller's own code raised it
        raise


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from _leaves(exc)
        else:
            yield exc


async def stream_client(address: str, tally: Tally, seed: int, stop_at: float) -> None:
    """Run connections to ``address`` one after another until ``stop_at``."""
    rng = random.Random(seed)
    ids = itertools.count(1)
    while trio.current_time() < stop_at:
        try:
            async with opened(address) as conn:
                tally.connections += 1
                life_end = min(stop_at, trio.current_time() + rng.uniform(*CONNECTION_LIFE_S))
                await _run_stream_connection(conn, tally, rng, ids, life_end)
        except (OSError, trio_websocket.HandshakeError) as exc:
            tally.fail(f"connect failed: {exc!r}")
            await trio.sleep(RETRY_S)


async def _run_stream_connection(
    conn: LineStream | WsStream, tally: Tally, rng: random.Random, ids: itertools.count[int], life_end: float
) -> None:
    peer = conn.peer()
    ledger = Ledger(tally, peer, child_unknown=peer is None and isinstance(conn, LineStream))
    ended = trio.Event()  # the bridge ended the connection

    async def reader() -> None:
        while (message := await conn.receive()) is not None:
            if "method" not in message:
                ledger.reply(message)
            else:
                ledger.notification(message)
        ended.set()
        lost = ledger.close()  # what is still pending is lost
        what = "bridge ended a connection"
        if isinstance(conn, WsStream):  # the close frame says who ended it: the bridge, or the client
            what = f"WebSocket ended with {conn.closed_with} ({lost} lost)"
            tally.faults[f"WebSocket ended with {conn.closed_with}"] += 1
        on_disconnect(tally, what)
        nursery.cancel_scope.cancel()

    async def worker() -> None:
        while trio.current_time() < life_end and not ended.is_set():
            kind, tool, arguments, work_s = draw_call(rng)
            request_id = next(ids)
            token = f"p{request_id}" if kind in ("sleep", "progress", "cancel") else None
            record = ledger.send(request_id, kind, work_s)
            try:
                try:
                    await conn.send(tools_call(request_id, tool, arguments, token))
                except CLOSED_ERRORS:
                    ledger.unsent(request_id)  # the write failed: the client knows it went nowhere
                    raise
                # Sent means written: under load the write can finish well after the call began
                # (the connection's lock, a full socket buffer), and the closing window is judged
                # by when the request could first reach the bridge.
                record.sent_at = trio.current_time()
                if kind == "cancel":
                    await trio.sleep(CANCEL_AFTER_S)
                    ledger.cancel(request_id)
                    await conn.send(cancelled(request_id))
            except CLOSED_ERRORS:
                await ended.wait()
                return
            # A cancelled request may never be answered (MCP lets the server drop it): waiting for
            # its bound would idle the worker 31.5 s, and after a few cancellations every worker
            # of every client idles at once. Its record stays in the ledger: an answer that comes
            # later is still matched (and counted late past the bound).
            wait_until = record.bound_at if not record.cancelled else trio.current_time() + CANCEL_SLEEP_S
            with trio.move_on_at(wait_until):
                await record.done.wait()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        init = ledger.send(f"init-{next(ids)}", "initialize", 0.0)
        errors_before = sum(tally.errors.values())
        try:
            await conn.send(initialize(f"init-{next(ids) - 1}"))
            await conn.send(INITIALIZED)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, trio_websocket.ConnectionClosed):
            await ended.wait()
        with trio.move_on_at(init.bound_at):
            await init.done.wait()
        if sum(tally.errors.values()) == errors_before and not ended.is_set():
            async with trio.open_nursery() as workers:
                for _ in range(CONCURRENCY):
                    workers.start_soon(worker)
        nursery.cancel_scope.cancel()
    if not ended.is_set():
        # cancelled ones are dropped; anything else still pending past its bound is lost
        ledger.close()
