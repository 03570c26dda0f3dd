"""The Channel interface: whole JSON-RPC messages over one transport connection."""

from __future__ import annotations

import enum
from abc import abstractmethod
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import attrs
import trio

from .errors import ProtocolError
from .jsonrpc import JSONObject

if TYPE_CHECKING:
    from .oauth import Principal  # only WebSocket and HTTP peers have one (it loads with them)

_Raw = TypeVar("_Raw")


class CloseReason(enum.Enum):
    """Why this side closes a channel (:meth:`MessageChannel.aclose_with`).

    Channels with a way to say it pass it on (WebSocket close codes, RFC 6455 §7.4.1 and the IANA
    registry); byte streams have none and just close. The value is the WebSocket close code.
    """

    NORMAL = 1000
    """The conversation is over (the peer closed first, or ended its session)."""
    GOING_AWAY = 1001
    """The bridge is stopping."""
    UNSUPPORTED_DATA = 1003
    """The peer sent a kind of data this channel does not take (a binary WebSocket frame)."""
    POLICY = 1008
    """The peer broke a rule: too many invalid messages, did not read its replies in time."""
    TOO_BIG = 1009
    """The peer sent a message over the size limit."""
    INTERNAL_ERROR = 1011
    """Something failed on this side; not the peer's fault."""
    RESTART = 1012
    """The server behind the channel restarted (or exited) and this connection's session is
    gone; reconnecting gets a fresh one."""
    TRY_AGAIN_LATER = 1013
    """Refused for now (too many connections)."""


@attrs.frozen
class PeerInfo:
    """Who is on the other end of a channel, for authorisation and logs.

    Attributes:
        transport: the channel kind (``"unix"``, ``"tcp"``, ``"tls"``, ``"ws"``, ``"wss"``,
            ``"stdio"``, ``"pipe"``, ``"memory"``).
        address: the peer's address as text (``"127.0.0.1:50122"``), or the socket path.
        pid, uid, gid: the peer process's credentials where the transport knows them (Unix sockets,
            from ``SO_PEERCRED``, read once at accept time).
        certificate: the subject of the peer's verified TLS client certificate
            (``"CN=alice,O=Example"``), with mTLS.
        credential: which accepted credential the peer authenticated with (a token's label such
            as ``"token file /etc/mcp/tokens line 2"``; never the token itself).
        origin, user_agent: the ``Origin`` and ``User-Agent`` headers of a WebSocket upgrade.
        principal: who the OAuth access token names (subject, client, scopes), when the peer
            presented one; its :attr:`~channels.Principal.label` is then also :attr:`credential`.
    """

    transport: str
    address: str | None = None
    pid: int | None = None
    uid: int | None = None
    gid: int | None = None
    certificate: str | None = None
    credential: str | None = None
    origin: str | None = None
    user_agent: str | None = None
    principal: Principal | None = None

    @property
    def scopes(self) -> frozenset[str]:
        """The scopes of the peer's OAuth token; none without one (a static token, a Unix peer)."""
        return self.principal.scopes if self.principal is not None else frozenset()

    def __str__(self) -> str:
        parts = [self.transport]
        if self.address:
            parts.append(self.address)
        parts.extend(
            f"{name}={value}"
            for name, value in (("pid", self.pid), ("uid", self.uid), ("gid", self.gid))
            if value is not None
        )
        parts.extend(
            f"{name}={value!r}"
            for name, value in (
                ("cert", self.certificate),
                ("origin", self.origin),
                ("auth", self.credential),
            )
            if value is not None
        )
        return " ".join(parts)


class MessageChannel(trio.abc.Channel[JSONObject]):
    """A ``trio.abc.Channel`` of JSON-RPC messages (``dict``), one transport connection.

    The contract, shared by every implementation and checked by :mod:`channels.testing`:

    * ``receive()`` returns the next valid message; raises ``trio.EndOfChannel`` after the peer's
      orderly close (and on every call after that); raises :class:`~channels.ProtocolError` for one
      bad message and stays usable afterwards; raises ``trio.BrokenResourceError`` if the transport
      failed, ``trio.ClosedResourceError`` if this side closed it, ``trio.BusyResourceError`` if two
      tasks receive at once.
    * ``send()`` writes one message; ``ValueError`` if it is not a JSON-RPC message (nothing is
      written). A cancelled send may have written the message or not, as with ``send_all``.
    * ``aclose()`` always closes, is idempotent, and wakes a task blocked in ``receive()``.
    * :attr:`peer` says who is on the other end.
    * With :attr:`send_timeout` set, a send during which the peer accepts nothing for that many
      seconds raises :class:`~channels.SendTimeout` and the channel stays broken (slow-reader
      protection without a cancel scope around every send: the deadline is only armed when a send
      has to wait). It bounds the time without progress, not the whole send: each 64 KiB piece
      gets the whole timeout (docs/design.md §6).

    Cancellation: a cancelled ``receive()`` loses no message (the next call returns it). A cancelled
    ``send()`` may have written all of the message, part of it or nothing, as with ``send_all``;
    after one, send nothing more on that channel, since a partial message may be on the wire.

    Ownership: a channel owns its transport and closes it in ``aclose()``. Whoever made the channel,
    or was handed it, closes it; :func:`~channels.connect` and :meth:`Incoming.establish
    <channels.Incoming.establish>` do so when their block ends, and ``async with channel:`` does too.
    """

    bytes_received: int = 0
    """Bytes read from the transport so far (framing included), where the channel counts them."""
    bytes_sent: int = 0
    """Bytes written to the transport so far, where the channel counts them."""

    one_request: bool = False
    """The channel carries a single request and its answer (a 2026-07-28 HTTP POST), so its
    opening and closing are routine: the bridge logs them at debug level, not info."""

    send_timeout: float | None = None
    """Seconds a send may wait for the peer to accept more data (each 64 KiB piece of it), or ``None``
    (the default) for no limit.
    Implementations that do not support it leave it ``None``."""

    idle_timeout: float | None = None
    """Seconds without traffic either way and without a request in flight after which the
    channel's user should close it, or ``None`` (the default): a listener's setting, carried to
    whoever serves the connection (only that user knows what is in flight)."""

    @property
    @abstractmethod
    def peer(self) -> PeerInfo:
        """Who is on the other end (fixed when the channel is made)."""

    async def send_many(self, messages: Sequence[JSONObject]) -> None:
        """Send several messages in order; implementations may coalesce them into one write.

        Not atomic: if it fails or is cancelled, a prefix of ``messages`` may have been sent (and,
        as with :meth:`send`, part of the next one). Unlike :meth:`send`, it may return without
        yielding to the scheduler when the transport took everything at once (it still raises
        ``Cancelled`` if cancelled); a task that loops on it must yield elsewhere, for example in
        ``receive``.

        Args:
            messages: the messages, each checked as :meth:`send` checks one.

        Raises:
            ValueError: a message is not a JSON-RPC message (implementations that check the whole
                batch first write none of it).
            trio.BrokenResourceError: the transport failed, or an earlier send timed out
                (:class:`~channels.SendTimeout` if this one did).
            trio.ClosedResourceError: this side closed the channel.
            trio.BusyResourceError: another task is sending.
        """
        for message in messages:
            await self.send(message)

    def receive_nowait(self) -> JSONObject:
        """Return a message that is already buffered, without blocking.

        The base implementation buffers nothing and always raises ``trio.WouldBlock``.

        Raises:
            trio.WouldBlock: nothing is buffered.
            Anything :meth:`receive` raises.
        """
        raise trio.WouldBlock

    def take_buffered(self, items: list[JSONObject | ProtocolError], max_count: int) -> None:
        """Append messages already buffered to ``items``, until it holds ``max_count``; never blocks.

        A bad message is appended as its :class:`~channels.ProtocolError`, in its place. The base
        implementation calls :meth:`receive_nowait` until it raises something else (an end or a
        failure stops it, and the next ``receive`` raises it again); implementations may do it in
        one step.
        """
        while len(items) < max_count:
            try:
                items.append(self.receive_nowait())
            except ProtocolError as exc:
                items.append(exc.detached())
            except (trio.WouldBlock, trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError):
                return  # what was taken is delivered; the next receive raises the end or the error

    async def receive_batch_lines(
        self, max_count: int
    ) -> tuple[list[JSONObject | ProtocolError], list[bytes | None]]:
        r"""As :func:`receive_batch`, and with each item the line it arrived as, if that may be forwarded.

        The second list is as long as the first: for each message, its line (without the ``\n``)
        when the line is byte for byte what :func:`~channels.encode` writes for it
        (:func:`~channels._core.jsonrpc.decode_line`), else ``None`` (always for an error, and
        always in this base implementation). Only :meth:`send_lines` of an unchanged message may
        use it.
        """
        items = await receive_batch(self, max_count)
        return items, [None] * len(items)

    async def send_lines(self, messages: Sequence[JSONObject], lines: Sequence[bytes | None]) -> None:
        r"""As :meth:`send_many`, writing ``lines[i]`` and a ``\n`` for ``messages[i]`` if not ``None``.

        Each line given must be the one :meth:`receive_batch_lines` returned with that very
        message, which was not changed since: its canonical encoding, so what is written is the
        same either way (docs/design.md §5.2). A message the caller built or changed goes with
        ``None`` and is encoded here. The base implementation ignores ``lines``.
        """
        await self.send_many(messages)

    async def aclose_with(self, reason: CloseReason, detail: str = "") -> None:
        """Close, telling the peer why where the transport can (a WebSocket close frame).

        Like :meth:`aclose`: always closes, idempotent, bounded (a peer that does not answer a
        closing handshake is cut off after a short wait), and closes even if cancelled. The base
        implementation ignores ``reason`` and calls :meth:`aclose`.

        Args:
            reason: why this side closes.
            detail: a short human-readable text for the peer (at most 123 bytes are sent on
                WebSocket).
        """
        await self.aclose()

    async def send_eof(self) -> None:
        """Close the sending direction only; the peer then sees ``EndOfChannel``.

        Replies can still be received afterwards; sending again is an error. The channel itself
        must still be closed with :meth:`aclose`.

        Raises:
            NotImplementedError: the channel cannot half-close (the base implementation, WebSocket,
                streams that are not ``trio.abc.HalfCloseableStream`` except a TLS listener's,
                which says ``close_notify`` and goes on reading).
        """
        raise NotImplementedError(f"{type(self).__name__} cannot half-close")


async def receive_batch(channel: MessageChannel, max_count: int) -> list[JSONObject | ProtocolError]:
    """Wait for one message, then take whatever else is already buffered, up to ``max_count``.

    A bad message does not end the batch: its :class:`~channels.ProtocolError` takes its place in
    the list, so the caller answers it in order. Cancel-safe: only the wait for the first message
    can be cancelled, and a cancelled call loses no message.

    Args:
        channel: the channel to read; it stays the caller's.
        max_count: the most items returned (at least one is).

    Returns:
        One to ``max_count`` items, in the order received: messages, or the
        :class:`~channels.ProtocolError` of a bad one.

    Raises:
        trio.EndOfChannel: the peer closed and nothing was buffered (after a partial batch, the
            next call raises it).
        trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError: as
            ``channel.receive()``.
    """
    items: list[JSONObject | ProtocolError] = []
    try:
        items.append(await channel.receive())
    except ProtocolError as exc:
        items.append(exc.detached())
    channel.take_buffered(items, max_count)
    return items


def take_decoded(
    pending: deque[_Raw], max_count: int, decode_one: Callable[[_Raw], tuple[JSONObject, bytes | None]]
) -> tuple[list[JSONObject | ProtocolError], list[bytes | None]]:
    """Decode buffered lines taken from the left of ``pending``, up to ``max_count``, in one loop.

    The batch of :meth:`MessageChannel.receive_batch_lines` for a channel that buffers what it read
    (newline and WebSocket). ``decode_one`` decodes one line as
    :func:`~channels._core.jsonrpc.decode_line` does (the message, and the line if it may be
    forwarded); a line it refuses is its :class:`~channels.ProtocolError`, in its place, with
    ``None`` for its line.
    """
    items: list[JSONObject | ProtocolError] = []
    lines: list[bytes | None] = []
    while pending and len(items) < max_count:
        try:
            message, line = decode_one(pending.popleft())
        except ProtocolError as exc:
            items.append(exc.detached())
            lines.append(None)
            continue
        items.append(message)
        lines.append(line)
    return items, lines


ExchangeHandler = Callable[[MessageChannel, Callable[[], Awaitable[bool]]], Awaitable[object]]
"""Serves one request that is a channel of its own (a 2026-07-28 HTTP POST) in the caller's task.

Called with the channel (its ``receive()`` gives the request; what is sent to it is the response)
and ``respond``, which writes the response until it is complete (True) or the client leaves
(False: the channel's next ``receive()`` then raises ``trio.BrokenResourceError``). The handler
awaits ``respond`` once, whatever it made of the request, and closes the channel afterwards. A
listener given none (:func:`~channels.serve_listeners`) hands such a channel to its
``IncomingHandler`` as a connection of its own, in a task of its own.
"""
