"""One server mounted on a shared WebSocket host: its upgrades checked and served, then unmounted.

The host (:class:`~channels.WebSocketHost`) owns the socket, accepts, runs TLS handshakes and
reads each upgrade request to route it by its path. A :class:`WebSocketMount` is what the host's
mount table routes one server's path to: it holds that server's own checks (Host, Origin,
tokens, OAuth) and limits, and hands each routed connection, as a
:class:`~channels._ws.listener.WebSocketIncoming`, to the bridge's handler in the bridge's
handler nursery, where the upgrade is checked and answered as a ``ws://`` listener's is.
:class:`WebSocketMountListener` is the server's listener: serving attaches the handler, closing
unmounts (the mount's open WebSockets get close 1001, later upgrades to its path 404).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, NoReturn, final

import trio

from .._core.channel import CloseReason, PeerInfo
from .._core.guard import Rejection, RequestGuard
from .._core.listener import IncomingHandler
from .._core.mounts import MountListener, not_available
from .._core.options import ListenOptions
from .._sockets.endpoint import Endpoint
from .channel import WebSocketChannel
from .listener import WebSocketIncoming
from .upgrade import Upgrade

if TYPE_CHECKING:
    from .oauth import WsOAuth  # the host creates it, with ListenOptions.oauth only

logger = logging.getLogger("channels.websocket")


class WebSocketMount:
    """One server's path on a shared WebSocket host; owned by its :class:`WebSocketMountListener`.

    Args:
        name: the server's name.
        endpoint: the host's scheme, bind host and port, with the mount's path.
        guard: the mount's Host, Origin and token checks (tokens: none when ``oauth`` checks them).
        options: the server's own listen options (message limit, pings, handshake timeout).
        oauth: the mount's OAuth check, if it has OAuth.

    Attributes:
        handler, nursery: the bridge's, while the listener serves; until then and after, the
            mount's upgrades get 503.
        opened: the mount's established WebSockets, closed with 1001 when it is unmounted.
    """

    def __init__(
        self,
        name: str,
        endpoint: Endpoint,
        guard: RequestGuard,
        options: ListenOptions,
        oauth: WsOAuth | None,
    ) -> None:
        self.name = name
        self.endpoint = endpoint
        self.guard = guard
        self.options = options
        self.oauth = oauth
        self.handler: IncomingHandler | None = None
        self.nursery: trio.Nursery | None = None
        self.opened: set[WebSocketChannel] = set()

    def hand_over(self, stream: trio.abc.Stream, peer: PeerInfo, upgrade: Upgrade) -> Rejection | None:
        """Give the routed connection to the bridge's handler (which owns it from then on).

        Returns:
            ``None`` once handed over; the 503 to answer (the caller still owns ``stream``) when
            the mount does not serve.
        """
        handler, nursery = self.handler, self.nursery
        if handler is None or nursery is None:
            return not_available(self.name)
        incoming = WebSocketIncoming(
            stream, peer, self.endpoint, self.guard, self.options, self.oauth, upgrade, self.opened
        )
        nursery.start_soon(handler, incoming)
        return None

    async def close(self) -> None:
        """Serve nothing more; close every WebSocket of the mount with 1001 (going away)."""
        self.handler = self.nursery = None
        for channel in list(self.opened):
            await channel.aclose_with(CloseReason.GOING_AWAY, f"server {self.name} unmounted")
        self.opened.clear()


@final
class WebSocketMountListener(MountListener[WebSocketMount]):
    """Serves one mounted server's WebSockets, which the host routes to its mount.

    Args:
        address: the mount's URL.
        mount: the mount, owned from now on.
        unmount: the host's, to route nothing to the mount any more and close its WebSockets.
    """

    async def serve(
        self,
        handler: IncomingHandler,
        handler_nursery: trio.Nursery,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> NoReturn:
        """Hand the mount's upgrades to ``handler`` in ``handler_nursery`` until cancelled.

        The OAuth verifier (if any) runs beside. Before this and once it is cancelled (a
        graceful stop), the mount's upgrades get 503; WebSockets already open go on.
        """
        mount = self._mount
        try:
            async with trio.open_nursery() as nursery:
                if mount.oauth is not None:
                    await nursery.start(mount.oauth.run)
                mount.handler, mount.nursery = handler, handler_nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            mount.handler = mount.nursery = None
        raise AssertionError("unreachable")  # pragma: no cover

    @property
    def oauth_outcomes(self) -> Mapping[str, int] | None:
        oauth = self._mount.oauth
        return oauth.verifier.outcomes if oauth is not None else None
