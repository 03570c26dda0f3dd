"""The two calls most programs need: connect to an address, and serve addresses with a handler."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import NoReturn

import trio

from .address import Address, parse_address
from .channel import MessageChannel
from .listener import HandshakeError, Incoming, MessageListener, serve_listeners
from .options import ConnectOptions, ListenOptions

logger = logging.getLogger("channels.serve")

Handler = Callable[[MessageChannel], Awaitable[object]]


def connect(
    address: str | Address, options: ConnectOptions | None = None
) -> AbstractAsyncContextManager[MessageChannel]:
    """Connect to ``address``; an async context manager that yields the channel.

    Use as ``async with channels.connect(address) as channel:``.
    The channel, and any task the connection needs (a WebSocket's keepalive), live until the block
    ends; then the channel is closed, however the block ends (cancellation included; a WebSocket
    sends its close frame shielded, within a short bound). The caller must not keep the channel
    beyond the block.

    Args:
        address: text such as ``"unix:/run/mcp.sock"``, or a parsed :class:`Address`.
        options: limits, credentials and TLS settings (default: ``ConnectOptions()``).

    Raises:
        AddressError: the text is not a valid address (raised by the call itself, before
            ``async with``).
        ConnectError: on entering the block, the connection, TLS handshake or upgrade failed
            (``AccessDenied`` if a WebSocket server refused the credentials; see
            :class:`AccessDenied` for newline channels).
    """
    if isinstance(address, str):
        address = parse_address(address)
    return address.connect(options or ConnectOptions())


async def open_listeners(
    addresses: Sequence[str | Address], options: ListenOptions | None = None
) -> list[MessageListener]:
    """Open a listener for every address (a host name may give several); the caller owns them.

    The caller closes the listeners, or hands them to :func:`serve`, which then owns them. If this
    fails or is cancelled, the listeners opened so far are closed.

    Args:
        addresses: address texts or parsed addresses, opened in order.
        options: limits, TLS and authentication (default: ``ListenOptions()``).

    Raises:
        AddressError: a text is not a valid address (nothing is opened).
        ListenError: an address cannot be listened on; the listeners opened before it are closed.
    """
    parsed = [parse_address(item) if isinstance(item, str) else item for item in addresses]
    listeners: list[MessageListener] = []
    try:
        for address in parsed:
            listeners.extend(await address.listen(options or ListenOptions()))
    except BaseException:
        for listener in listeners:
            await trio.aclose_forcefully(listener)
        raise
    return listeners


async def _establish_and_handle(handler: Handler, incoming: Incoming) -> None:
    try:
        async with incoming.establish() as channel:
            await handler(channel)
    except HandshakeError as exc:
        logger.warning("%s: refused: %s", incoming.peer, exc)


async def serve(
    handler: Handler,
    addresses: Sequence[str | Address | MessageListener],
    options: ListenOptions | None = None,
    *,
    handler_nursery: trio.Nursery | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> NoReturn:
    """Serve every address until cancelled, handing each connection to ``handler``.

    Each connection that completes its handshake (TLS, WebSocket upgrade, authentication, per
    ``options``) is handed to ``handler`` in a task of its own; the channel is closed when the
    handler returns. Failed handshakes are logged (logger ``channels.serve``) and dropped. Like
    ``trio.serve_listeners``, and usable with ``nursery.start``, which returns the bound addresses
    (real ports for port 0) once every listener is open.

    ``serve`` never returns: cancel it to stop. Every listener is closed when it ends; a
    connection's task is cancelled with it unless it runs in ``handler_nursery``.

    Args:
        handler: called with each established channel; it does not need to close it. An exception
            escaping it ends ``serve`` (inside an ``ExceptionGroup``), or ``handler_nursery`` if
            given, as with ``trio.serve_listeners``.
        addresses: address texts, parsed addresses, or listeners already open (which ``serve``
            then owns and closes, also if it fails to open the others).
        options: limits, TLS and authentication for the listeners it opens.
        handler_nursery: where handler tasks run (default: a nursery inside ``serve``).
        task_status: for ``nursery.start``: reports the bound addresses as text.

    Raises:
        AddressError, ListenError: as :func:`open_listeners` (before ``task_status.started``).
    """
    to_open = [item for item in addresses if not isinstance(item, MessageListener)]
    listeners = [item for item in addresses if isinstance(item, MessageListener)]
    try:
        listeners.extend(await open_listeners(to_open, options))
    except BaseException:
        for listener in listeners:
            await trio.aclose_forcefully(listener)
        raise
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(
                partial(
                    serve_listeners,
                    partial(_establish_and_handle, handler),
                    listeners,
                    handler_nursery=handler_nursery,
                )
            )
            task_status.started([listener.address for listener in listeners])
    finally:
        for listener in listeners:
            await trio.aclose_forcefully(listener)
    raise AssertionError("unreachable")  # pragma: no cover
