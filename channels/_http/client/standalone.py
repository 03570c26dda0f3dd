"""The legacy session's standalone event stream: a GET on the MCP endpoint, kept open.

What the server sends unrelated to any request (notifications, its own requests) comes on this
stream. :class:`StandaloneStream` keeps it open for as long as the session lasts: it reconnects
when the stream ends (after the server's ``retry:`` delay, with ``Last-Event-ID``), renews the
session on 404, and gives up on 405 (the server offers no such stream). Requests' own responses
are :mod:`channels._http.client.exchange`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

import attrs
import trio

from ..._core.errors import ProtocolError
from ..._core.jsonrpc import JSONObject, decode
from ..._mcp.client import media_type
from ..._sockets.endpoint import Endpoint
from .conn import ConnectionPool, HttpConnection, HttpFailure
from .session import LegacySession
from .stream import StreamPosition, read_stream, reconnect_delay

logger = logging.getLogger("channels.http.client")


class RequestHeaders(Protocol):
    """The headers every request carries (Host, User-Agent, ``accept``, the token), then ``more``."""

    def __call__(self, accept: str, *more: tuple[str, str]) -> list[tuple[str, str]]: ...


@attrs.define(eq=False)
class StandaloneStream:
    """The standalone GET stream of one channel's legacy session (see the module docstring).

    Args:
        endpoint: the MCP endpoint (named in log lines).
        pool: the connections; the stream holds one of its long exchanges while open.
        session: the legacy session whose stream this is.
        headers: builds a request's headers.
        renew: renews the session of a generation after a 404 (raises
            :class:`~channels._http.client.conn.HttpFailure` if it cannot).
        deliver: hands a message, or the error of a bad one, to the channel's receive queue.
        max_message_bytes: the longest event read.
    """

    endpoint: Endpoint
    pool: ConnectionPool
    session: LegacySession
    headers: RequestHeaders
    renew: Callable[[int], Awaitable[None]]
    deliver: Callable[[JSONObject | ProtocolError], Awaitable[None]]
    max_message_bytes: int

    async def listen(self) -> None:
        """Keep the stream open and deliver what it carries; runs until cancelled.

        Returns on 405 (the server offers no such stream) or when there is no session.
        """
        position, generation, failures = StreamPosition(), -1, 0
        while True:
            session_headers, current = await self.session.headers()
            if self.session.session_id is None:
                return
            if current != generation:
                position, generation = StreamPosition(), current
            resume = [("Last-Event-ID", position.last_event_id)] if position.last_event_id is not None else []
            gone = False
            try:
                async with self.pool.long_exchanges:
                    get_headers = self.headers("text/event-stream", *session_headers, *resume)
                    async with self.pool.request("GET", get_headers) as (conn, response):
                        status = response.status_code
                        if status == 405:
                            logger.debug("%s offers no standalone event stream", self.endpoint)
                            return
                        gone = status == 404
                        if status == 200 and media_type(response.headers) == "text/event-stream":
                            failures = 0
                            await self._read(conn, position)
                        elif not gone:
                            failures += 1
                            logger.info("standalone event stream refused: HTTP %d", status)
            except HttpFailure as exc:
                failures += 1
                logger.info("standalone event stream: %s", exc)
            if gone:
                try:
                    await self.renew(generation)
                    continue
                except HttpFailure as exc:
                    failures += 1
                    logger.warning("could not renew the session: %s", exc)
            await trio.sleep(reconnect_delay(position, failures))

    async def _read(self, conn: HttpConnection, position: StreamPosition) -> None:
        async def take(data: str) -> bool:
            try:
                await self.deliver(decode(data))
            except ProtocolError as exc:
                logger.warning("invalid message on the standalone stream of %s: %s", self.endpoint, exc)
                await self.deliver(exc)
            return False

        try:
            await read_stream(conn, self.max_message_bytes, position, take)
        except ValueError as exc:
            # Resuming would replay the same event: start afresh, losing what was in between.
            logger.error(
                "standalone event stream of %s: %s; reconnecting without resuming", self.endpoint, exc
            )
            position.last_event_id = None
