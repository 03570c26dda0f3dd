"""The socket side of HTTP serving: connections, their limits, and which service answers each request.

One :class:`HttpFront` per ``http://`` address (its one service, shared by its listeners: a host
name may bind several sockets) or per :class:`~channels.HttpHost` (the services of the servers
mounted on it, and its index). It keeps everything that belongs to a connection rather than to a
server: the connection slots (:data:`MAX_CONNECTIONS`), the head, body and keep-alive deadlines
(one :class:`~channels._core.ticker.Ticker`), the TLS handshake, the parsing and its limits, and
the graceful stop. Each request goes by its exact path to the service that registered it
(:meth:`HttpFront.add`): its head check (Host, Origin, tokens, OAuth) runs on the head, its
routes after the body; the body limit is that service's.

A path no service registered is refused by the front: an ``http://`` address's front answers 404
naming its endpoint, as it always did; a host's (``strict``) first refuses targets that could
confuse routing (:mod:`channels._http.server.routing`), and its 404 names no server.
"""

from __future__ import annotations

import logging
import sys
from functools import partial

import trio

from ..._core.channel import PeerInfo
from ..._core.fdio import TLS_STREAMS
from ..._core.listener import HandshakeError, tls_handshake
from ..._core.mounts import MountTable
from ..._core.options import ListenOptions
from ..._core.ticker import Ticker
from ..._mcp.admission import HttpRefusal
from .conn import HttpConnection
from .connvalues import ConnectionLimits
from .proxying import Headers
from .request import BadRequest, Credential, Parsing
from .routing import MAX_TARGET_BYTES, not_found, unsafe_target
from .service import HttpService, Route, refuse_on
from .stream import ResponseStream

logger = logging.getLogger("channels.http")

# The body of a request may take this long once its head is in, and a kept-alive connection may
# wait this long for its next request (nginx's client_body_timeout and keepalive_timeout are 60 s
# and 75 s); both at least the handshake timeout.
BODY_TIMEOUT = 30.0
IDLE_TIMEOUT = 60.0
# A response the client does not read for this long is cut off (as --send-timeout's default).
SEND_TIMEOUT = 30.0
# TCP connections one HTTP address serves at once; more wait in the kernel's listen backlog.
# Each costs a file descriptor and a task; systemd's default soft limit is 1024 descriptors, and
# children and their pipes need some too.
MAX_CONNECTIONS = 512


class HttpFront:
    """Connections of one HTTP socket (or several of one address), routed to services by path.

    Args:
        options: the socket's own options: the handshake timeout (the head's too) and the
            default body limit.
        strict: a host's routing (see the module docstring); ``False`` for an ``http://``
            address.
        address: the socket's, for errors.

    Attributes:
        fallback: the service whose head check a path no service registered passes (an
            ``http://`` address's own service; a host's index, for Host and Origin only).
        routes: path to the service that answers it and its route (``None``: its metadata),
            the table :class:`~channels.WebSocketHost` routes by too.
    """

    def __init__(self, options: ListenOptions, *, strict: bool = False, address: str = "") -> None:
        self.options = options
        self.strict = strict
        self.limits = ConnectionLimits(
            head_timeout=options.handshake_timeout,
            body_timeout=max(options.handshake_timeout, BODY_TIMEOUT),
            idle_timeout=max(options.handshake_timeout, IDLE_TIMEOUT),
            send_timeout=SEND_TIMEOUT,
            max_body=options.max_message_bytes,
        )
        self.ticker = Ticker()
        self.fallback: HttpService | None = None
        self.routes: MountTable[HttpService, Route | None] = MountTable(address)
        self.max_target = MAX_TARGET_BYTES if strict else sys.maxsize
        self.stopping = False
        self._slots = trio.CapacityLimiter(MAX_CONNECTIONS)
        self._ticking = False

    # --- services ------------------------------------------------------------------------

    def add(self, service: HttpService, what: object = None) -> None:
        """Route ``service``'s paths to it, under its name; ``what`` it is, for errors.

        Raises:
            ListenError: its name or one of its paths is taken (naming both servers); nothing
                changed.
        """
        self.routes.mount(what or service.endpoint, service.name, service, service.paths())

    def remove(self, service: HttpService) -> None:
        """Route nothing to ``service`` any more: its paths get 404 from now on."""
        self.routes.unmount(service)

    # --- lifecycle -----------------------------------------------------------------------

    async def connection_slot(self) -> object:
        """Wait for room for one more TCP connection; give the token back to :meth:`release_slot`."""
        slot = object()
        await self._slots.acquire_on_behalf_of(slot)
        return slot

    def release_slot(self, slot: object) -> None:
        self._slots.release_on_behalf_of(slot)

    async def start_ticker(self, nursery: trio.Nursery) -> None:
        """Run the deadlines' ticker in ``nursery``, once; it ends once stopping with no connection.

        ``nursery`` is where the connections run (the bridge's handler nursery, for an
        ``http://`` address): a graceful stop cancels accepting while reads and answers in
        progress still need their deadlines.
        """
        if not self._ticking:
            self._ticking = True
            nursery.start_soon(self.ticker.run, lambda: self.stopping and self._slots.borrowed_tokens == 0)

    def stop(self) -> None:
        """Stop taking requests: idle keep-alive connections close, busy ones after their answer."""
        self.stopping = True
        for waiter in self.ticker.waiters():
            # A response parked until its client's next request (response.park) too: answered, it
            # ends; waiting, it goes on unparked, and its connection closes after its answer.
            if (isinstance(waiter, HttpConnection) and waiter.waiting_for_request) or (
                isinstance(waiter, ResponseStream) and waiter.watching is not None
            ):
                self.ticker.discard(waiter)
                waiter.expire()

    # --- a connection --------------------------------------------------------------------

    async def serve_connection(self, stream: trio.abc.Stream, peer: PeerInfo, slot: object = None) -> None:
        """Serve one TCP connection's requests until it closes.

        Closes ``stream`` and gives back ``slot`` (its place among :data:`MAX_CONNECTIONS`).
        """
        connection = HttpConnection(stream, self.limits)
        connection.parsing.check_head = partial(self._check_head, peer, connection.parsing)
        try:
            if isinstance(stream, TLS_STREAMS):
                with trio.move_on_after(self.options.handshake_timeout) as deadline:
                    peer = await tls_handshake(stream, peer)
                if deadline.cancelled_caught:
                    raise HandshakeError("no TLS handshake in time")
            # Cancelled only while a read is overdue (the ticker's doing) or idle while stopping.
            with trio.CancelScope() as reading:
                connection.read_scope = reading
                first = True
                while not self.stopping or first:
                    self.ticker.add(connection)
                    try:
                        request = await connection.next_request(first=first)
                    except BadRequest as exc:
                        if not exc.logged:
                            logger.info("%s: %s", peer, exc)
                        await connection.refuse(exc)
                        if exc.keep_alive and connection.reusable:
                            first = False
                            continue  # an over-limit body read to its end: the next may follow
                        return
                    finally:
                        self.ticker.discard(connection)
                    if request is None:
                        return
                    if reading.cancel_called:
                        return  # it came just as its deadline passed: not served, the connection closes
                    first = False
                    connection.closing = self.stopping
                    # Routed here, not by a helper: each coroutine of a request's await chain is
                    # passed through again at each of its task's resumptions.
                    found = self.routes.get(request.path) if len(request.target) <= self.max_target else None
                    if found is not None:
                        await found[0].dispatch(connection, request, peer, found[1])
                    else:
                        await self._unrouted(connection, request.target)
                    del request  # a large body is not kept while the connection waits for the next
                    if not connection.reusable:
                        return
            timeout = connection.timed_out() if reading.cancelled_caught else None
            if timeout is not None:
                logger.info("%s: %s", peer, timeout)
                await connection.refuse(timeout)
        except HandshakeError as exc:
            logger.warning("%s: refused: %s", peer, exc)
        except trio.BrokenResourceError:
            pass  # the client left mid-response
        except Exception:
            # A bug here must cost one connection, not the daemon whose nursery this runs in.
            logger.exception("%s: internal error; HTTP connection closed", peer)
        finally:
            await connection.aclose()
            if slot is not None:
                self.release_slot(slot)

    def _check_head(
        self,
        peer: PeerInfo,
        parsing: Parsing,
        method: bytes,
        target: bytes,
        headers: Headers,
        fields: dict[bytes, bytes],
    ) -> BadRequest | Credential:
        """The head check of the service its path names (a :data:`~.request.HeadCheck`).

        With its body limit. A path no service registered passes the fallback's checks: all of
        them for an ``http://`` address (as before there were hosts), Host and Origin on a host.
        """
        path = target.partition(b"?")[0].decode("latin-1")
        found = self.routes.get(path)
        if found is None:
            service = self.fallback
            assert service is not None
            parsing.max_body = self.limits.max_body
            return service.check_head(peer, method, path, headers, open=self.strict, fields=fields)
        service, route = found
        parsing.max_body = service.max_body
        return service.check_head(peer, method, path, headers, open=route is None, fields=fields)

    async def _unrouted(self, connection: HttpConnection, target: str) -> None:
        """Refuse a request whose target no service registered (or a host does not route)."""
        if self.strict:
            await refuse_on(connection, unsafe_target(target) or not_found())
        else:
            assert self.fallback is not None
            message = f"Not Found: the MCP endpoint is {self.fallback.endpoint.path}"
            await refuse_on(connection, HttpRefusal(404, -32000, message, "not-found"))
