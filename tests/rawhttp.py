"""A small HTTP/1.1 client for the HTTP listener's tests: h11 on a trio TCP stream.

It gives the tests what an SDK client hides: every status and header, bodies byte for byte, and
event streams read event by event (parsed here, independently of ``channels._http.sse``), so that each
rule of the transport can be checked on the wire.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs
import h11
import trio

ACCEPT_BOTH = ("accept", "application/json, text/event-stream")
JSON_BODY = ("content-type", "application/json")
POST_HEADERS = (ACCEPT_BOTH, JSON_BODY)


@attrs.frozen
class Response:
    """A whole response."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        values = [value for key, value in self.headers if key == name.lower()]
        return values[0] if values else None

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[dict[str, str]]:
        return parse_events(self.body)[0]

    def messages(self) -> list[Any]:
        """The JSON messages of a JSON body or of an event stream's events with data."""
        if (self.header("content-type") or "").startswith("application/json"):
            value = self.json()
            return value if isinstance(value, list) else [value]
        return [json.loads(event["data"]) for event in self.events() if event.get("data")]


def parse_events(data: bytes) -> tuple[list[dict[str, str]], bytes]:
    """Complete events in ``data`` (fields by name; comments as ``":"``) and the rest."""
    events = []
    text = data.replace(b"\r\n", b"\n")
    while b"\n\n" in text:
        block, text = text.split(b"\n\n", 1)
        event: dict[str, str] = {}
        for line in block.decode().split("\n"):
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            key = name or ":"
            event[key] = event[key] + "\n" + value if key == "data" and key in event else value
        events.append(event)
    return events, text


class RawHttp:
    """One keep-alive connection; requests one after the other."""

    def __init__(self, stream: trio.SocketStream, host: str) -> None:
        self.stream = stream
        self.host = host
        self.h11 = h11.Connection(h11.CLIENT)
        self._buffer = b""

    @classmethod
    async def open(cls, port: int, host: str = "127.0.0.1") -> RawHttp:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        return cls(stream, f"{host}:{port}")

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def send_request(
        self,
        method: str,
        path: str,
        headers: Sequence[tuple[str, str]] = (),
        body: bytes = b"",
        *,
        host: str | None = "",
    ) -> None:
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
        all_headers = [] if host is None else [("host", host or self.host)]
        all_headers += list(headers)
        if body or method == "POST":
            all_headers.append(("content-length", str(len(body))))
        data = self.h11.send(h11.Request(method=method, target=path, headers=all_headers))
        if body:
            data += self.h11.send(h11.Data(data=body))
        data += self.h11.send(h11.EndOfMessage())
        await self.stream.send_all(data)

    async def _event(self) -> Any:
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                data = await self.stream.receive_some(65536)
                self.h11.receive_data(data)
                continue
            return event

    async def read_head(self) -> tuple[int, list[tuple[str, str]]]:
        while True:
            event = await self._event()
            if isinstance(event, h11.Response):
                return event.status_code, [(k.decode(), v.decode()) for k, v in event.headers]
            if isinstance(event, h11.ConnectionClosed):
                raise trio.BrokenResourceError("closed before a response")

    async def read_chunk(self) -> bytes | None:
        """The next piece of the body, or None at its end."""
        event = await self._event()
        if isinstance(event, h11.Data):
            return bytes(event.data)
        return None

    async def read_response(self) -> Response:
        status, headers = await self.read_head()
        body = bytearray()
        while (chunk := await self.read_chunk()) is not None:
            body += chunk
        return Response(status, headers, bytes(body))

    async def request(
        self,
        method: str,
        path: str,
        headers: Sequence[tuple[str, str]] = (),
        body: bytes | Any = b"",
        *,
        host: str | None = "",
    ) -> Response:
        if not isinstance(body, bytes):
            body = json.dumps(body).encode()
        await self.send_request(method, path, headers, body, host=host)
        return await self.read_response()

    async def next_events(self, pending: bytes = b"") -> tuple[list[dict[str, str]], bytes]:
        """Read until at least one complete event; return the events and the leftover bytes."""
        while True:
            events, rest = parse_events(pending)
            if events:
                return events, rest
            chunk = await self.read_chunk()
            if chunk is None:
                return [], pending
            pending = rest + chunk


async def post(
    port: int, message: Any, headers: Sequence[tuple[str, str]] = (), path: str = "/mcp"
) -> Response:
    """One POST on a fresh connection, with both Accept types and a JSON body."""
    client = await RawHttp.open(port)
    try:
        return await client.request("POST", path, [*POST_HEADERS, *headers], message)
    finally:
        await client.aclose()
