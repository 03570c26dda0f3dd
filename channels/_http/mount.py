"""The listener of one server mounted on a shared host: its service served, then unmounted.

:meth:`~channels.HttpMountAddress.listen` returns one :class:`HttpMountListener`. The socket and
its connections are the host's; what the listener has of its own is the mount's service (its
checks, sessions and routes): :meth:`HttpMountListener.serve` hands the service the bridge's
handler, and :meth:`HttpMountListener.aclose` unmounts it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NoReturn, final

import trio

from .._core.channel import ExchangeHandler
from .._core.listener import IncomingHandler
from .._core.mounts import MountListener
from .server.service import HttpService


@final
class HttpMountListener(MountListener[HttpService]):
    """Serves one mounted server's requests, which the host routes to its service.

    Args:
        address: the mount's URL.
        mount: the mount's service (its checks, sessions and routes), owned from now on.
        unmount: the host's, to route nothing to the service any more and end its sessions.
    """

    def dispatch_exchanges(self, handler: ExchangeHandler) -> None:
        self._mount.exchanges = handler

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
        service = self._mount
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
        oauth = self._mount.oauth
        return oauth.verifier.outcomes if oauth is not None else None
