"""The soak's HTTP client: HTTP/1.1 with h11 over trio streams, and an event-stream reader.

One :class:`HttpConn` is one keep-alive TCP connection; the caller owns it and closes it with
:meth:`HttpConn.aclose`. :func:`post` sends one JSON-RPC message on it and returns its
:class:`Answer`: the JSON messages of an ``application/json`` body or of a ``text/event-stream``
(with their event ids), and the status. Nothing here knows about the soak's accounting.
"""

from __future__ import annotations

import json
from typing import Any

import h11
import trio

READ_SIZE = 1 << 16  # bytes per receive: a 1 MiB reply takes 16 reads
MODERN = "2026-07-28"
LEGACY = "2025-11-25"  # the newest legacy version: its streams carry a priming event and event ids
ACCEPT = "application/json, text/event-stream"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
}


class HttpClosed(Exception):
    """The connection ended before the answer did (a reset, an EOF, a protocol error)."""


class Answer:
    """One HTTP answer: status, headers (lower-case names), JSON messages and the last event id."""

    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status = status
        self.headers = headers
        self.messages: list[Any] = []
        self.last_event_id: str | None = None
        self.events = 0

    @property
    def is_stream(self) -> bool:
        return self.headers.get("content-type", "").startswith("text/event-stream")


class EventParser:
    """Splits an event stream into (id, data) events; comments and ``retry:`` are skipped."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[tuple[str | None, bytes]]:
        self._buffer += data.replace(b"\r\n", b"\n")
        events = []
        while b"\n\n" in self._buffer:
            block, self._buffer = self._buffer.split(b"\n\n", 1)
            event_id, lines = None, []
            for line in block.split(b"\n"):
                field, _, value = line.partition(b":")
                value = value[1:] if value.startswith(b" ") else value
                if field == b"id":
                    event_id = value.decode()
                elif field == b"data":
                    lines.append(value)
            events.append((event_id, b"\n".join(lines)))
        return events


class HttpConn:
    """One keep-alive HTTP/1.1 connection to ``host:port``, owned and closed by its caller."""

    def __init__(self, stream: trio.SocketStream, host: str) -> None:
        self.stream = stream
        self.host = host
        self.h11 = h11.Connection(h11.CLIENT)

    @classmethod
    async def open(cls, host: str, port: int) -> HttpConn:
        return cls(await trio.open_tcp_stream(host, port), f"{host}:{port}")

    @property
    def reusable(self) -> bool:
        return self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE

    async def aclose(self) -> None:
        with trio.move_on_after(1) as scope:
            scope.shield = True
            await self.stream.aclose()

    async def _next(self) -> Any:
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise HttpClosed(f"protocol error: {exc}") from None
            if event is not h11.NEED_DATA:
                return event
            try:
                data = await self.stream.receive_some(READ_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                raise HttpClosed(f"read failed: {exc!r}") from None
            self.h11.receive_data(data)
            if not data and self.h11.their_state is not h11.DONE:
                raise HttpClosed("EOF before the end of the answer")

    async def send_request(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> None:
        if self.reusable:
            self.h11.start_next_cycle()
        head = [("host", self.host), ("content-length", str(len(body))), *headers]
        try:
            await self.stream.send_all(
                self.h11.send(h11.Request(method=method, target=target, headers=head))
                + (self.h11.send(h11.Data(data=body)) or b"")
                + (self.h11.send(h11.EndOfMessage()) or b"")
            )
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise HttpClosed(f"write failed: {exc!r}") from None

    async def read_head(self) -> Answer:
        while True:
            event = await self._next()
            if isinstance(event, h11.Response):
                headers = {name.decode().lower(): value.decode() for name, value in event.headers}
                return Answer(event.status_code, headers)
            if isinstance(event, h11.ConnectionClosed):
                raise HttpClosed("closed before the answer's head")

    async def read_body(self, answer: Answer, stop_after_events: int | None = None) -> None:
        """Read the body into ``answer.messages``; with ``stop_after_events``, return after that many
        events (the rest is left unread: the caller closes the connection)."""
        parser = EventParser() if answer.is_stream else None
        body = b""
        while True:
            event = await self._next()
            if isinstance(event, h11.Data):
                if parser is None:
                    body += bytes(event.data)
                    continue
                for event_id, data in parser.feed(bytes(event.data)):
                    answer.events += 1
                    answer.last_event_id = event_id or answer.last_event_id
                    if data.strip():
                        answer.messages.append(json.loads(data))
                    if stop_after_events is not None and answer.events >= stop_after_events:
                        return
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                break
        if parser is None and body.strip():
            try:
                answer.messages.append(json.loads(body))
            except ValueError:
                answer.messages.append({"unparsed": body[:200].decode(errors="replace")})

    async def exchange(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes = b"",
        stop_after_events: int | None = None,
    ) -> Answer:
        await self.send_request(method, target, headers, body)
        answer = await self.read_head()
        await self.read_body(answer, stop_after_events)
        return answer


def post_headers(message: dict[str, Any], session: str | None, modern: bool) -> list[tuple[str, str]]:
    """The headers of a POST carrying ``message``: Accept, Content-Type, session or era headers."""
    headers = [("accept", ACCEPT), ("content-type", "application/json")]
    if session is not None:
        headers += [("mcp-session-id", session), ("mcp-protocol-version", LEGACY)]
    if modern:
        headers += [("mcp-protocol-version", MODERN), ("mcp-method", message["method"])]
        name = (message.get("params") or {}).get("name")
        if name is not None:
            headers.append(("mcp-name", name))
    return headers


async def post(
    conn: HttpConn,
    path: str,
    message: dict[str, Any],
    session: str | None = None,
    modern: bool = False,
    stop_after_events: int | None = None,
) -> Answer:
    """POST one JSON-RPC message and read its answer (or its first ``stop_after_events`` events)."""
    body = json.dumps(message, separators=(",", ":")).encode()
    return await conn.exchange("POST", path, post_headers(message, session, modern), body, stop_after_events)
