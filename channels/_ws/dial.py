"""The WebSocket opening handshake, the client's side: the upgrade request and its answer.

The handshake is the ``websockets`` library's (:class:`~websockets.client.ClientProtocol`); this
module moves its bytes, as :mod:`channels._ws.upgrade` does for the server's side, and turns a
refusal into :class:`~channels.AccessDenied` (401, 403) or :class:`~channels.ConnectError`.
Loaded only when a client connects (``ws://`` and ``wss://`` addresses' ``connect``): a bridge
that serves WebSocket clients never loads websockets' client modules.
"""

from __future__ import annotations

import trio
from websockets.client import ClientProtocol
from websockets.exceptions import InvalidStatus
from websockets.protocol import State
from websockets.uri import parse_uri

from .._core.fdio import RECEIVE_SIZE
from .._core.options import AccessDenied, ConnectError, ConnectOptions
from .upgrade import SUBPROTOCOL, wire_logger


async def request_upgrade(
    stream: trio.abc.Stream, address: object, options: ConnectOptions
) -> ClientProtocol:
    """Send the upgrade request for ``address`` (with ``options.token``) and read the response.

    Raises:
        AccessDenied: refused with 401 or 403.
        ConnectError: refused otherwise, or not a WebSocket server.
    """
    protocol = ClientProtocol(
        parse_uri(str(address)),
        subprotocols=[SUBPROTOCOL],
        max_size=options.max_message_bytes,
        logger=wire_logger,
    )
    request = protocol.connect()
    if options.token is not None:
        request.headers["Authorization"] = f"Bearer {options.token}"
    protocol.send_request(request)
    try:
        await stream.send_all(b"".join(protocol.data_to_send()))
        while protocol.state is State.CONNECTING and protocol.handshake_exc is None:
            data = await stream.receive_some(RECEIVE_SIZE)
            if data:
                protocol.receive_data(data)
            else:
                protocol.receive_eof()
    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        raise ConnectError(f"{address}: connection lost during the upgrade: {exc}") from None
    failure = protocol.handshake_exc
    if isinstance(failure, InvalidStatus):
        status = failure.response.status_code
        error = AccessDenied if status in (401, 403) else ConnectError
        raise error(
            f"{address}: upgrade refused with HTTP {status}" + _rejection_detail(bytes(failure.response.body))
        )
    if failure is not None:
        raise ConnectError(f"{address}: not a WebSocket server: {failure}")
    return protocol


def _rejection_detail(body: bytes | None) -> str:
    if not body:
        return ""
    text = body[:200].decode(errors="replace")
    return f": {text}"
