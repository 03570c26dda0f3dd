"""The client's view of a legacy Streamable HTTP session (protocol versions up to 2025-11-25).

A session begins when the stdio client sends ``initialize``: the server's answer carries
``Mcp-Session-Id``, and every later message of that client carries it back, with the negotiated
``MCP-Protocol-Version``. When the server forgets the session (it restarted, or expired it), it
answers 404, and the client must initialise again (2025-11-25 transports, "Session Management").
The stdio client cannot do that itself (it knows nothing of HTTP), so :meth:`LegacySession.renew`
does it for it: the client's own ``initialize`` is sent again (its reply is not passed on), then
its ``notifications/initialized``, and the request that got 404 is retried on the new session.

Renewal policy: one renewal at a time; a task that finds the session already renewed by another
(its generation moved on) just retries. A replay that fails leaves the old session id in place,
so the next message gets 404 again and tries again: a server that is down for a while costs
failed requests, not a stuck channel.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import attrs
import trio

from ..._core.jsonrpc import JSONObject
from ..._mcp.client import SESSION_HEADER, VERSION_HEADER

logger = logging.getLogger("channels.http.client")

Replay = Callable[[JSONObject], Awaitable[tuple[str | None, str | None]]]
"""Send the client's ``initialize`` again; return the new session id and protocol version."""
Notify = Callable[[JSONObject, list[tuple[str, str]]], Awaitable[None]]
"""POST a notification with these session headers and wait for it to be accepted."""


def _set_event() -> trio.Event:
    event = trio.Event()
    event.set()
    return event


@attrs.define(eq=False)
class LegacySession:
    """The state of the legacy session, shared by every exchange of one channel.

    Attributes:
        initialize: the client's ``initialize`` request, kept to be replayed.
        initialized: the client's ``notifications/initialized``, once the server accepted it.
        session_id: the server's ``Mcp-Session-Id``, or ``None`` (no session yet, or a server that
            keeps none).
        protocol_version: the version the server chose in its ``initialize`` result.
        generation: counts sessions; an exchange remembers the generation it used, so that a 404
            renews only the session that failed.
    """

    initialize: JSONObject | None = None
    initialized: JSONObject | None = None
    session_id: str | None = None
    protocol_version: str | None = None
    generation: int = 0
    _settled: trio.Event = attrs.field(factory=_set_event)
    _lock: trio.Lock = attrs.field(factory=trio.Lock)

    @property
    def active(self) -> bool:
        """Whether the client opened the legacy era (sent ``initialize``)."""
        return self.initialize is not None

    def begin(self, initialize: JSONObject) -> None:
        """The client sent ``initialize``: a new session starts.

        Messages sent before its reply arrives wait for it (they need its session id).
        """
        self.initialize = initialize
        self.initialized = None
        self.session_id = None
        self.protocol_version = None
        self.generation += 1
        self._settled = trio.Event()

    def established(self, generation: int, session_id: str | None, reply: JSONObject | None) -> None:
        """The ``initialize`` exchange of ``generation`` ended (``reply`` is ``None`` if it failed).

        Ignored if the client has begun another session since.
        """
        if generation != self.generation:
            return
        self.session_id = session_id
        result = reply.get("result") if reply is not None else None
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        self.protocol_version = version if isinstance(version, str) else None
        self._settled.set()

    async def headers(self) -> tuple[list[tuple[str, str]], int]:
        """The session headers for the next message, and the generation they belong to.

        Waits while an ``initialize`` or a renewal is under way.
        """
        while not self._settled.is_set():
            await self._settled.wait()
        return self.headers_now(), self.generation

    def headers_now(self) -> list[tuple[str, str]]:
        """The session headers as they are (no waiting)."""
        headers = []
        if self.session_id is not None:
            headers.append((SESSION_HEADER, self.session_id))
        if self.protocol_version is not None:
            headers.append((VERSION_HEADER, self.protocol_version))
        return headers

    async def renew(self, generation: int, replay: Replay, notify: Notify) -> None:
        """Initialise again, unless the session of ``generation`` was already replaced.

        Raises:
            Whatever ``replay`` or ``notify`` raise (the session is then left as it was).
        """
        async with self._lock:
            if generation != self.generation or self.initialize is None:
                return
            self._settled = trio.Event()
            try:
                logger.info("the server no longer knows session %s; initialising again", self.session_id)
                session_id, version = await replay(self.initialize)
                self.session_id, self.protocol_version = session_id, version
                self.generation += 1
                if self.initialized is not None:
                    await notify(self.initialized, self.headers_now())
                logger.info("new session %s", session_id)
            finally:
                self._settled.set()
