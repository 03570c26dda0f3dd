"""Accepting HTTP connections on one socket into a front, for ``http://`` listeners and hosts alike.

:class:`HttpSocket` is one bound socket with what accepting on it needs (the scheme, TLS, TCP
keepalive); :meth:`HttpSocket.accept_into` takes connections off it, each in a connection slot of
the :class:`~channels._http.server.front.HttpFront` it serves, and runs each in a task of the
nursery it is given. The socket is the owner's (the listener's or the host's) to close.
"""

from __future__ import annotations

import errno
import logging
import socket
from typing import TYPE_CHECKING, NoReturn

import trio

from .._core.channel import PeerInfo
from .._core.options import TcpKeepalive
from .._sockets.tcp import accept_tcp
from .server.front import HttpFront

if TYPE_CHECKING:
    from .._core.tlscontext import ServerTls  # https:// and wss:// only (server_tls loads it)

logger = logging.getLogger("channels.http")

# What trio.serve_listeners treats as "out of resources, try again": the process or system is out
# of file descriptors, or the kernel of buffer memory.
ACCEPT_CAPACITY_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
ACCEPT_RETRY = 0.1  # seconds, as trio.serve_listeners sleeps


class HttpSocket:
    """One listening socket of an HTTP address or host.

    Args:
        listener: the socket (its owner closes it).
        scheme: ``"http"`` or ``"https"``, for peers.
        tls: the TLS context of an ``https`` socket.
        keepalive: TCP keepalive for accepted connections.
        address: the address as text, for log lines and the peers of an activated Unix socket.
    """

    def __init__(
        self,
        listener: trio.SocketListener,
        scheme: str,
        tls: ServerTls | None,
        keepalive: TcpKeepalive | None,
        address: str,
    ) -> None:
        self.listener = listener
        self.scheme = scheme
        self.tls = tls
        self.keepalive = keepalive
        self.address = address
        self.unix = listener.socket.family == socket.AF_UNIX

    async def accept_into(self, front: HttpFront, nursery: trio.Nursery) -> NoReturn:
        """Accept until cancelled; serve each connection with ``front`` in ``nursery``."""
        while True:
            # At most MAX_CONNECTIONS TCP connections at once: beyond, new ones wait in the
            # kernel's backlog rather than cost memory and file descriptors here.
            slot = await front.connection_slot()
            try:
                stream, peer = await self.accept()
            except BaseException:
                front.release_slot(slot)
                raise
            nursery.start_soon(front.serve_connection, stream, peer, slot)

    async def accept(self) -> tuple[trio.abc.Stream, PeerInfo]:
        """The next connection.

        Retried after a pause when out of file descriptors (EMFILE...), as
        ``trio.serve_listeners`` does, so that a connection flood never ends the daemon.
        """
        while True:
            try:
                if self.unix:  # an activated Unix socket: a local reverse proxy's
                    return await self.listener.accept(), PeerInfo(self.scheme, self.address)
                return await accept_tcp(
                    self.listener, self.scheme, self.tls, https_compatible=True, keepalive=self.keepalive
                )
            except OSError as exc:
                if exc.errno not in ACCEPT_CAPACITY_ERRORS:
                    raise
                logger.error("%s: accept failed (%s); retrying in %gs", self.address, exc, ACCEPT_RETRY)
                await trio.sleep(ACCEPT_RETRY)
