"""A tiny scripted HTTP/1.1 server (h11 over trio sockets) for fault injection in the HTTP client tests.

Each test hands :func:`scripted_server` a handler, called once per request with a
:class:`ServerExchange`; the handler answers however the test needs: a JSON body, an event stream
written event by event, any status, a body trickled one byte per chunk, or a cut connection. Every
request is recorded (``server.requests``) and can be waited for (``server.wait_for``).

It is independent of the client under test: its own h11 server role, no code from ``channels``.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import h11
import trio


@attrs.define(eq=False)
class ServerExchange:
    """One request as the server saw it, and the means to answer it."""

    method: str
    target: str
    headers: dict[str, str]
    """Lower-case names; the last value of a repeated header."""
    raw_headers: list[tuple[str, str]]
    body: bytes
    connection: int
    """Which connection (1, 2, ...) carried it."""
    _stream: trio.abc.Stream
    _h11: h11.Connection
    responded: bool = False
    cut: bool = False

    @property
    def message(self) -> Any:
        return json.loads(self.body)

    @property
    def rpc_method(self) -> str | None:
        if self.method != "POST" or not self.body:
            return None
        message = self.message
        return message.get("method") if isinstance(message, dict) else None

    async def _send(self, *events: h11.Event) -> None:
        data = b"".join(self._h11.send(event) or b"" for event in events)
        await self._stream.send_all(data)

    async def respond(
        self,
        status: int,
        body: bytes = b"",
        *,
        content_type: str | None = None,
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        """A complete response with a ``Content-Length`` body."""
        all_headers = [*headers, ("Content-Length", str(len(body)))]
        if content_type is not None:
            all_headers.append(("Content-Type", content_type))
        self.responded = True
        events: list[h11.Event] = [h11.Response(status_code=status, headers=all_headers)]
        if body:
            events.append(h11.Data(data=body))
        events.append(h11.EndOfMessage())
        await self._send(*events)

    async def reply(
        self, message: Any, *, status: int = 200, headers: Sequence[tuple[str, str]] = ()
    ) -> None:
        """A JSON body."""
        await self.respond(
            status, json.dumps(message).encode(), content_type="application/json", headers=headers
        )

    async def result(self, result: Any, *, headers: Sequence[tuple[str, str]] = ()) -> None:
        """A JSON reply to this request (its id, this result)."""
        await self.reply({"jsonrpc": "2.0", "id": self.message["id"], "result": result}, headers=headers)

    async def accepted(self) -> None:
        await self.respond(202)

    async def start_events(self, *, status: int = 200, headers: Sequence[tuple[str, str]] = ()) -> None:
        """Begin a chunked ``text/event-stream`` response."""
        self.responded = True
        all_headers = [*headers, ("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]
        await self._send(h11.Response(status_code=status, headers=all_headers))

    async def event(
        self, message: Any = None, *, event_id: str | None = None, retry: int | None = None
    ) -> None:
        """One SSE event with ``message`` as JSON data (no data line if ``None``: a priming event)."""
        lines = []
        if event_id is not None:
            lines.append(f"id: {event_id}")
        if retry is not None:
            lines.append(f"retry: {retry}")
        lines.append(
            f"data: {json.dumps(message, separators=(',', ':'))}" if message is not None else "data:"
        )
        await self.chunk(("\n".join(lines) + "\n\n").encode())

    async def chunk(self, data: bytes) -> None:
        """Raw body bytes, as one chunk."""
        await self._send(h11.Data(data=data))

    async def end(self) -> None:
        """End a streamed body cleanly."""
        await self._send(h11.EndOfMessage())

    async def cut_connection(self) -> None:
        """Close the connection at once, whatever was sent so far."""
        self.cut = True
        await trio.aclose_forcefully(self._stream)

    async def wait_disconnect(self) -> None:
        """Wait until the client closes the connection (for cancellation by disconnect)."""
        try:
            while await self._stream.receive_some(4096):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        self.cut = True


Handler = Callable[[ServerExchange], Awaitable[None]]


@attrs.define(eq=False)
class ScriptedServer:
    handler: Handler
    port: int = 0
    close_after_each: bool = False
    """Close every connection after its response, without saying so (a server whose keep-alive
    timeout is shorter than the client's)."""
    requests: list[ServerExchange] = attrs.field(factory=list)
    connections: int = 0
    open_connections: int = 0
    max_open_connections: int = 0
    _changed: trio.Event = attrs.field(factory=trio.Event)
    _serving: trio.CancelScope = attrs.field(factory=trio.CancelScope)

    def stop(self) -> None:
        """Stop serving: close the listening socket and every connection (the server is gone)."""
        self._serving.cancel()

    def url(self, scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.port}/mcp"

    def posts(self, method: str | None = None) -> list[ServerExchange]:
        return [r for r in self.requests if r.method == "POST" and (method is None or r.rpc_method == method)]

    def gets(self) -> list[ServerExchange]:
        return [r for r in self.requests if r.method == "GET"]

    async def wait_for(self, predicate: Callable[[ServerExchange], bool]) -> ServerExchange:
        """The first recorded request matching ``predicate``, waiting for it if need be."""
        while True:
            for request in self.requests:
                if predicate(request):
                    return request
            await self._changed.wait()

    def _record(self, request: ServerExchange) -> None:
        self.requests.append(request)
        self._changed.set()
        self._changed = trio.Event()

    async def serve_connection(self, stream: trio.abc.Stream) -> None:
        self.connections += 1
        number = self.connections
        self.open_connections += 1
        self.max_open_connections = max(self.max_open_connections, self.open_connections)
        connection = h11.Connection(h11.SERVER)
        try:
            while True:
                request = await _read_request(connection, stream)
                if request is None:
                    return
                head, body = request
                headers = [(name.decode(), value.decode()) for name, value in head.headers]
                exchange = ServerExchange(
                    head.method.decode(),
                    head.target.decode(),
                    {name: value for name, value in headers},
                    headers,
                    body,
                    number,
                    stream,
                    connection,
                )
                self._record(exchange)
                await self.handler(exchange)
                if exchange.cut:
                    return
                if not exchange.responded:
                    await exchange.respond(500, b"the test's handler gave no response")
                if self.close_after_each or connection.our_state is not h11.DONE:
                    return
                connection.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            pass
        finally:
            self.open_connections -= 1
            await trio.aclose_forcefully(stream)


async def _read_request(
    connection: h11.Connection, stream: trio.abc.Stream
) -> tuple[h11.Request, bytes] | None:
    head: h11.Request | None = None
    body = bytearray()
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            connection.receive_data(await stream.receive_some(65536))
        elif isinstance(event, h11.Request):
            head = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert head is not None
            return head, bytes(body)
        else:
            return None  # ConnectionClosed


@asynccontextmanager
async def scripted_server(
    handler: Handler, *, ssl_context: ssl.SSLContext | None = None, close_after_each: bool = False
) -> AsyncIterator[ScriptedServer]:
    """Serve ``handler`` on 127.0.0.1 (a free port) while the block runs."""
    listeners: list[Any] = await trio.open_tcp_listeners(0, host="127.0.0.1")
    server = ScriptedServer(handler, listeners[0].socket.getsockname()[1], close_after_each)
    if ssl_context is not None:
        listeners = [trio.SSLListener(listener, ssl_context, https_compatible=True) for listener in listeners]

    async def serve() -> None:
        try:
            with server._serving:
                await trio.serve_listeners(server.serve_connection, listeners)
        finally:
            for listener in listeners:
                await trio.aclose_forcefully(listener)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()
