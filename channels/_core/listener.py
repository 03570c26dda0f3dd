"""Listening in two steps: accept quickly, then finish each connection's handshake in its own task.

A listener's ``accept()`` only takes the connection off the socket and returns an
:class:`Incoming`. Everything that needs the peer's cooperation (a TLS handshake, a WebSocket
upgrade, authentication) happens in :meth:`Incoming.establish`, which the caller runs in the
connection's own task, bounded by the listener's handshake timeout. So a client that stalls its
handshake (slowloris) holds up only itself, and a failed handshake never reaches the listener.

The usual way to serve, as with ``trio.serve_listeners``::

    async def handler(incoming: Incoming) -> None:
        try:
            async with incoming.establish() as channel:
                ...  # serve channel
        except HandshakeError as exc:
            log.warning("%s: refused: %s", incoming.peer, exc)

    await channels.serve_listeners(handler, listeners)

A listener usually yields one :class:`Incoming` per accepted connection. An HTTP listener yields
one per session or request instead, over any number of TCP connections, so listeners are served
through :meth:`MessageListener.serve`, which such a listener overrides.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, NoReturn, final

import attrs
import trio

from .channel import ExchangeHandler, MessageChannel, PeerInfo
from .errors import ProtocolError
from .fdio import TLS_STREAMS, TlsStream
from .options import ListenOptions
from .stream import StreamChannel

if TYPE_CHECKING:
    from .auth import TokenSet  # loads where tokens are given (channels._core.__init__)
    from .tlscontext import ServerTls  # TLS listeners load it; Unix and TCP ones have no use for it

# How long the refusal of a failed authentication may take to reach the peer before the
# connection is cut anyway (a peer that does not read must not hold the task).
REFUSAL_SEND_TIMEOUT = 2.0


class HandshakeError(Exception):
    """A connection failed before it became a channel.

    The cause is the TLS handshake, the WebSocket upgrade, authentication, or the handshake
    deadline. Raised by :meth:`Incoming.establish`, which has closed the connection by then. The
    peer has been told where the transport allows (an HTTP status, a JSON-RPC error); the message
    says what happened, for the log.
    """


class CredentialsRefused(HandshakeError):
    """A connection refused for its credentials (its token: missing, wrong, expired, or short of a scope).

    That is a WebSocket upgrade answered 401 or 403 for its token, or a newline channel whose first
    message is not ``bridge/authenticate`` with a right token.

    A refused client is normal operation, not a fault of the bridge's: the daemon logs it as one
    INFO line, as the HTTP listener logs a refused request; other handshake failures (TLS, a
    malformed upgrade, the deadline) are plain :class:`HandshakeError`, logged as warnings.
    """


class Incoming(trio.abc.AsyncResource):
    """A connection a listener has accepted, before its handshake.

    Whoever accepted it owns it: it either enters :meth:`establish` once or closes it with
    ``aclose()`` (``trio.serve_listeners`` closes it after the handler returns; closing twice is
    harmless, and so is closing after :meth:`establish`).
    """

    __slots__ = ()

    @property
    @abstractmethod
    def peer(self) -> PeerInfo:
        """What is known of the peer before the handshake (its address, Unix credentials)."""

    @abstractmethod
    def establish(self) -> AbstractAsyncContextManager[MessageChannel]:
        """Finish the handshake and yield the channel; close the channel when the block ends.

        Use as ``async with incoming.establish() as channel:``, at most once. The handshake is
        bounded by the listener's ``handshake_timeout``. The channel owns the connection: leaving
        the block closes both, however the block ends (also if the handshake fails or the task is
        cancelled).

        Raises:
            HandshakeError: the handshake failed or timed out (the connection is closed).
        """


class MessageListener(trio.abc.Listener[Incoming]):
    """A listener whose ``accept()`` returns an :class:`Incoming` connection.

    ``accept()`` only takes a connection off the socket: it never waits for the peer, so one
    stalled client cannot hold up the others. It may raise ``OSError`` with a capacity errno
    (``EMFILE``...): callers retry, as ``trio.serve_listeners`` does. The caller owns the returned
    :class:`Incoming`. The listener owns its socket and closes it in ``aclose()`` (a Unix listener
    also removes its socket file).
    """

    __slots__ = ()

    _tls: ServerTls | None = None
    """A TLS listener's certificates and context (set by the subclasses that offer TLS)."""

    @property
    def oauth_outcomes(self) -> Mapping[str, int] | None:
        """With OAuth (HTTP and WebSocket listeners): how many tokens ended in each outcome.

        ``None`` without. Listeners of one HTTP address share one verifier, hence one mapping:
        count each mapping once (by identity).
        """
        return None

    @property
    @abstractmethod
    def address(self) -> str:
        """The bound address as text, with the real port for ``tcp:HOST:0``."""

    def reload_certificates(self) -> bool:
        """Read this listener's TLS certificate, key and client CA files again, if it has TLS.

        The next handshakes use them; connections already open keep theirs.

        Returns:
            Whether the listener has TLS.

        Raises:
            ListenError: a file cannot be loaded (named with its flag); the files in use stay.
        """
        if self._tls is None:
            return False
        self._tls.reload()
        return True

    def dispatch_exchanges(self, handler: ExchangeHandler) -> None:
        """Serve the 2026-07-28 POSTs of an HTTP listener through ``handler`` (before ``serve``)."""

    async def serve(
        self,
        handler: IncomingHandler,
        handler_nursery: trio.Nursery,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> NoReturn:
        """Accept until cancelled, running ``handler(incoming)`` in ``handler_nursery`` for each.

        The default is ``trio.serve_listeners`` over this listener. A listener whose connections
        do not map one to one onto :class:`Incoming` objects (HTTP) overrides it, and may run its
        own per-connection tasks in ``handler_nursery`` too, so that they outlive a cancelled
        ``serve`` (a graceful stop cancels accepting, then lets connections finish). Reports
        ``task_status.started()`` once it accepts. Does not close the listener.
        """
        async with trio.open_nursery() as nursery:
            await nursery.start(
                partial(trio.serve_listeners, handler, [self], handler_nursery=handler_nursery)
            )
            task_status.started()
        raise AssertionError("unreachable")  # pragma: no cover


IncomingHandler = Callable[[Incoming], Awaitable[object]]


async def serve_listeners(
    handler: IncomingHandler,
    listeners: list[MessageListener],
    *,
    handler_nursery: trio.Nursery | None = None,
    exchange_handler: ExchangeHandler | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> NoReturn:
    """``trio.serve_listeners`` for :class:`MessageListener` objects (through their ``serve``).

    Runs until cancelled; reports ``task_status.started()`` once every listener accepts. The
    handlers run in ``handler_nursery`` (default: a nursery inside this call), and 2026-07-28 POSTs
    in ``exchange_handler`` if given. The listeners stay the caller's to close.
    """
    async with trio.open_nursery() as nursery:
        for listener in listeners:
            if exchange_handler is not None:
                listener.dispatch_exchanges(exchange_handler)
            await nursery.start(listener.serve, handler, handler_nursery or nursery)
        task_status.started()
    raise AssertionError("unreachable")  # pragma: no cover


def certificate_subject(certificate: dict[str, Any] | None) -> str | None:
    """``"CN=alice,O=Example"`` from ``SSLSocket.getpeercert()``'s dict, or ``None``."""
    if not certificate:
        return None
    names = {
        "commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
        "localityName": "L", "stateOrProvinceName": "ST", "emailAddress": "emailAddress",
    }  # fmt: skip
    return ",".join(
        f"{names.get(key, key)}={value}" for rdn in certificate.get("subject", ()) for key, value in rdn
    )


async def tls_handshake(stream: TlsStream, peer: PeerInfo) -> PeerInfo:
    """Run the TLS handshake; return ``peer`` with the client certificate's subject (mTLS).

    Raises:
        HandshakeError: the handshake failed (bad certificate, not TLS at all, peer left).
    """
    try:
        await stream.do_handshake()
    except trio.BrokenResourceError as exc:
        cause = exc.__cause__
        reason = (getattr(cause, "reason", None) or str(cause)) if cause else "connection lost"
        raise HandshakeError(f"TLS handshake failed: {reason}") from None
    return attrs.evolve(peer, certificate=certificate_subject(stream.getpeercert()))


def unauthorized(request_id: object, detail: str) -> dict[str, Any]:
    """The JSON-RPC error a newline channel gets when it does not authenticate."""
    from .auth import UNAUTHORIZED  # loaded: only a listener with tokens gets here

    data = {"reason": "unauthorized", "detail": detail}
    error = {"code": UNAUTHORIZED, "message": "Unauthorized", "data": data}
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


async def authenticate_first_message(channel: StreamChannel, tokens: TokenSet) -> str:
    """Check the token of the connection's first message; return the matching token's label.

    The first message must be a ``bridge/authenticate`` notification.

    Raises:
        HandshakeError: anything else came first, or the token is wrong; the peer was answered
            with :data:`~channels._core.auth.UNAUTHORIZED` (by id, if it sent a request).
    """
    try:
        first = await channel.receive()
    except ProtocolError as exc:
        first, problem = {}, f"first message was not valid JSON-RPC ({exc})"
    except (trio.EndOfChannel, trio.BrokenResourceError) as exc:
        raise HandshakeError("connection ended before it authenticated") from exc
    else:
        problem = ""
    from .auth import token_of_message  # loaded: whoever gave the tokens imported it

    token = token_of_message(first)
    label = tokens.match(token)
    if label is not None:
        return label
    if not problem:
        problem = (
            "wrong token" if token is not None else "first message was not a bridge/authenticate notification"
        )
    request_id = first.get("id") if "method" in first else None
    with trio.move_on_after(REFUSAL_SEND_TIMEOUT):
        try:
            await channel.send(
                unauthorized(
                    request_id,
                    "this listener requires a bearer token: send "
                    '{"jsonrpc":"2.0","method":"bridge/authenticate","params":{"token":"..."}} '
                    "as the first line (mcp-bridge connect --token-file does)",
                )
            )
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
    raise CredentialsRefused(f"authentication failed: {problem}")


@final
@attrs.define(eq=False)
class StreamIncoming(Incoming):
    """An accepted byte stream (Unix, TCP, TLS, stdio) that becomes a :class:`StreamChannel`.

    Args:
        stream: the connection, owned from now on: the channel :meth:`establish` yields owns it
            then, and :meth:`aclose` closes it otherwise. An ``SSLStream`` gets its TLS handshake
            in :meth:`establish`.
        initial_peer: what the listener knows of the peer.
        max_message_bytes: the channel's line limit.
        tokens: if set, the first line must be a ``bridge/authenticate`` notification carrying
            one of these tokens.
        handshake_timeout: seconds for the TLS handshake and the authentication together.
        idle_timeout: set as the channel's :attr:`~MessageChannel.idle_timeout`.
    """

    stream: trio.abc.Stream
    initial_peer: PeerInfo
    max_message_bytes: int
    tokens: TokenSet | None = None
    handshake_timeout: float = 10.0
    idle_timeout: float | None = None

    @property
    def peer(self) -> PeerInfo:
        """What the listener knew of the peer (the established channel's may say more)."""
        return self.initial_peer

    @asynccontextmanager
    async def establish(self) -> AsyncIterator[MessageChannel]:
        """Run the TLS handshake and the token check, if any; yield a :class:`StreamChannel`.

        Both together are bounded by ``handshake_timeout``. The channel's
        :attr:`~MessageChannel.peer` adds the client certificate's subject (mTLS) and the matched
        token's label. Leaving the block closes the channel and the stream, however it ends.

        Raises:
            HandshakeError: the TLS handshake failed, the first message was not a
                ``bridge/authenticate`` notification with an accepted token (the peer was answered
                with :data:`~channels.UNAUTHORIZED`), the peer left, or the deadline passed.
        """
        channel: StreamChannel | None = None
        try:
            with trio.move_on_after(self.handshake_timeout) as deadline:
                peer = self.initial_peer
                if isinstance(self.stream, TLS_STREAMS):
                    peer = await tls_handshake(self.stream, peer)
                channel = StreamChannel(self.stream, max_message_bytes=self.max_message_bytes, peer=peer)
                channel.idle_timeout = self.idle_timeout
                if self.tokens is not None:
                    label = await authenticate_first_message(channel, self.tokens)
                    channel.peer = attrs.evolve(peer, credential=label)
            if deadline.cancelled_caught:
                raise HandshakeError(f"no handshake within {self.handshake_timeout:g}s")
            assert channel is not None
            yield channel
        finally:
            await trio.aclose_forcefully(channel if channel is not None else self.stream)

    async def aclose(self) -> None:
        """Close the stream (idempotent); for a connection that will not be established."""
        await self.stream.aclose()


@final
class StreamListener(MessageListener):
    """Any trio listener of byte streams as a :class:`MessageListener`.

    Each accepted stream becomes a :class:`StreamIncoming` (newline framing, ``options.tokens``
    checked by the first message if set). The building block for a new stream-based channel kind.

    Args:
        listener: the trio listener, owned from now on (closed by :meth:`aclose`).
        address: this listener's address as text, for logs and ``Daemon.addresses``.
        options: the message limit, tokens and handshake timeout.
        transport: the name put on each channel's :attr:`~channels.PeerInfo.transport`.
    """

    def __init__(
        self,
        listener: trio.abc.Listener[trio.abc.Stream],
        address: str,
        options: ListenOptions,
        *,
        transport: str,
    ) -> None:
        self._listener = listener
        self._address = address
        self._options = options
        self._transport = transport

    @property
    def address(self) -> str:
        """The address given to the constructor."""
        return self._address

    async def accept(self) -> Incoming:
        """Accept the next stream from the wrapped listener; the caller owns the result.

        Raises:
            OSError: the wrapped listener's ``accept()`` is out of file descriptors (``EMFILE``...).
            trio.ClosedResourceError: the listener was closed (:meth:`aclose`).
            Exception: anything else the wrapped listener's ``accept()`` raises, as it raised it.
        """
        stream = await self._listener.accept()
        return StreamIncoming(
            stream,
            PeerInfo(self._transport, self._address),
            self._options.max_message_bytes,
            tokens=self._options.tokens,
            handshake_timeout=self._options.handshake_timeout,
        )

    async def aclose(self) -> None:
        """Close the wrapped listener; connections already accepted are not affected."""
        await self._listener.aclose()
