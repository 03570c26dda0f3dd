"""TCP channels. Listeners bind loopback unless the operator explicitly asks for more.

The MCP transports text says local servers SHOULD bind only to localhost; until authentication exists
on TCP, binding any other address is refused unless :attr:`ListenOptions.allow_non_loopback` is set
(``--insecure-no-auth``), and then a warning is logged for every listener opened.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from typing import Self, final

import attrs
import trio

from ._address import (
    Address,
    AddressError,
    ConnectError,
    ConnectOptions,
    ListenError,
    ListenOptions,
    MessageListener,
    register_address_kind,
)
from ._channel import MessageChannel, PeerInfo
from ._stream import StreamChannel

logger = logging.getLogger("channels.tcp")


def format_host_port(host: str, port: int) -> str:
    """``HOST:PORT`` with IPv6 literals bracketed."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def split_host_port(text: str, *, form: str) -> tuple[str, int]:
    """Split ``HOST:PORT`` or ``[V6]:PORT``.

    Raises:
        AddressError: naming ``form``, the expected shape.
    """
    host, colon, port_text = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    # isdigit() alone admits "²" and other digits int() rejects.
    if (not colon or not host or not (port_text.isascii() and port_text.isdigit())
            or not 0 <= int(port_text) <= 65535):
        raise AddressError(f"{text!r}: expected {form}")
    return host, int(port_text)


async def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = await trio.socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


@final
class TcpListener(MessageListener):
    """Accepts TCP connections as :class:`StreamChannel`; owns its socket."""

    def __init__(self, listener: trio.SocketListener, options: ListenOptions) -> None:
        self._listener = listener
        self._options = options
        host, port = listener.socket.getsockname()[:2]
        self._address = f"tcp:{format_host_port(host, port)}"

    @property
    def address(self) -> str:
        return self._address

    async def accept(self) -> MessageChannel:
        stream = await self._listener.accept()
        host, port = stream.socket.getpeername()[:2]
        peer = PeerInfo("tcp", format_host_port(host, port))
        return StreamChannel(stream, max_message_bytes=self._options.max_message_bytes, peer=peer)

    async def aclose(self) -> None:
        await self._listener.aclose()


@register_address_kind
@attrs.frozen
class TcpAddress(Address):
    """``tcp:HOST:PORT`` (``tcp:[::1]:7300`` for IPv6; port 0 picks a free port)."""

    scheme = "tcp"
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Self:
        try:
            host, port = split_host_port(text.removeprefix("tcp:"),
                                         form="tcp:HOST:PORT, for example tcp:127.0.0.1:7300")
        except AddressError:
            raise AddressError(f"{text!r}: expected tcp:HOST:PORT, for example tcp:127.0.0.1:7300"
                               ) from None
        return cls(host, port)

    def __str__(self) -> str:
        return f"tcp:{format_host_port(self.host, self.port)}"

    async def listen(self, options: ListenOptions) -> list[MessageListener]:
        if not await _is_loopback(self.host):
            if not options.allow_non_loopback:
                raise ListenError(
                    f"{self}: {self.host} is not a loopback address and TCP has no authentication "
                    "yet; bind 127.0.0.1, or pass --insecure-no-auth to expose the server anyway"
                )
            logger.warning("%s: listening beyond loopback without authentication "
                           "(--insecure-no-auth): anyone who can reach it can use the server", self)
        try:
            listeners = await trio.open_tcp_listeners(self.port, host=self.host)
        except OSError as exc:
            raise ListenError(f"{self}: {exc.strerror or exc}") from exc
        return [TcpListener(listener, options) for listener in listeners]

    async def connect(self, options: ConnectOptions) -> MessageChannel:
        try:
            stream = await trio.open_tcp_stream(self.host, self.port)
        except OSError as exc:
            raise ConnectError(f"{self}: {exc.strerror or exc}") from exc
        return StreamChannel(stream, max_message_bytes=options.max_message_bytes,
                             peer=PeerInfo("tcp", format_host_port(self.host, self.port)))
