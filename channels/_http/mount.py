"""The listener of one server mounted on a shared host: its service served, then unmounted.

:meth:`~channels.HttpMountAddress.listen` returns one :class:`HttpMountListener`. The socket and
its connections are the host's; what the listener has of its own is the mount's service (its
checks, sessions and routes): :meth:`HttpMountListener.serve` hands the service the bridge's
handler, and :meth:`HttpMountListener.aclose` unmounts it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import NoReturn, final

import trio

from .._core.listener import Incoming, IncomingHandler, MessageListener
from .server.service import HttpService


@final
class HttpMountListener(MessageListener):
    """Serves one mounted server's requests, which the host routes to its service.

    Args:
        address: the mount's URL.
        service: the mount's service, owned from now on.
        unmount: the host's, to route nothing to the service any more and end its sessions.
    """

    def __init__(
        self, address: str, service: HttpService, unmount: Callable[[HttpService], Awaitable[None]]
    ) -> None:
        self._address = address
        self._service = service
        self._unmount = unmount
        self._closed = False

    @property
    def address(self) -> str:
        return self._address

    async def accept(self) -> Incoming:
        """Not used: requests come over the host's connections. Serve with :meth:`serve`.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError("a mounted server's listener is served with serve(), not accept()")

    async def serve(
        self,
        handler: IncomingHandler,
        handler_nursery: trio.Nursery,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> NoReturn:
        """Serve the mount's requests until cancelled: sessions and streams start in ``handler_nursery``.

        Before this and once it is cancelled (a graceful stop), the mount's requests get 503;
        responses in progress finish (they run on the host's connections).
        """
        service = self._service
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(service.mcp.reap_idle_sessions)
                service.attach(handler, handler_nursery)
                await service.start_oauth(handler_nursery)
                task_status.started()
                await trio.sleep_forever()
        finally:
            service.stop()
        raise AssertionError("unreachable")  # pragma: no cover

    @property
    def oauth_outcomes(self) -> Mapping[str, int] | None:
        oauth = self._service.oauth
        return oauth.verifier.outcomes if oauth is not None else None

    async def aclose(self) -> None:
        """Unmount: the mount's paths get 404 from now on, its sessions and event streams end."""
        if not self._closed:
            self._closed = True
            await self._unmount(self._service)
        else:
            await trio.lowlevel.checkpoint()
