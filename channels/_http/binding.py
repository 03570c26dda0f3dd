"""Binding a shared HTTP listener's sockets (:class:`~channels.HttpHost`): TCP, TLS or activated.

``http://HOST:PORT`` and ``https://HOST:PORT`` bind as an ``http://`` address does (the loopback
rule, TLS files, the real port for port 0); ``http+fd:NAME`` adopts the sockets systemd passed
under ``NAME``, as ``http+fd:NAME/PATH`` does. The loopback rule applies to the host itself only
when it serves an index (its own authentication guards that alone): each mounted server applies
it with its own options when mounted.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import attrs
import trio

from .._core.address import AddressError
from .._core.options import ListenOptions
from .._sockets.activation import activated_fds, adopt
from .._sockets.endpoint import Endpoint, parse_endpoint, server_tls
from .._sockets.tcp import check_exposure, format_host_port, is_loopback, open_tcp_listeners
from .accepting import HttpSocket
from .address import ALPN_PROTOCOLS

if TYPE_CHECKING:
    from .._core.tlscontext import ServerTls  # https:// and wss:// only (server_tls loads it)


@attrs.frozen
class Bound:
    """A host's bound sockets (the caller's to close) and what its services need to know of them.

    Attributes:
        sockets: the listening sockets.
        endpoint: the scheme, bind host and bound port, with the prefix as its path.
        address: ``SCHEME://HOST:PORT`` with the bound port, or ``http+fd:NAME``.
        loopback: whether every socket is on loopback (or an activated Unix socket).
        tls: an ``https://`` host's certificates.
    """

    sockets: list[HttpSocket]
    endpoint: Endpoint
    address: str
    loopback: bool
    tls: ServerTls | None


async def bind_shared(text: str, options: ListenOptions, prefix: str, *, guarded: bool) -> Bound:
    """Bind ``text`` for a host mounting servers under ``prefix``; ``guarded``: it has an index.

    Raises:
        AddressError: another scheme, or a path in the URL.
        ListenError: the bind failed; ``https://`` without a certificate; an index beyond
            loopback without authentication or opt-out.
    """
    if text.startswith("http+fd:"):
        return await _activated(text, options, prefix, guarded=guarded)
    scheme = text.partition(":")[0]
    if scheme not in ("http", "https"):
        raise AddressError(f"{text!r}: a shared HTTP listener is http://HOST:PORT or https://HOST:PORT")
    endpoint = parse_endpoint(text, scheme, kind="a shared HTTP listener", example_path="")
    if endpoint.path != "/":
        raise AddressError(
            f"{text!r}: a shared listener takes no path; its servers are mounted under a prefix"
        )
    address = text.rstrip("/")
    tls = server_tls(endpoint, address, options, alpn=ALPN_PROTOCOLS)
    loopback = await _loopback(address, endpoint.host, options, endpoint.secure, guarded=guarded)
    listeners = await open_tcp_listeners(address, endpoint.host, endpoint.port)
    port = listeners[0].socket.getsockname()[1]
    address = f"{scheme}://{format_host_port(endpoint.host, port)}"
    sockets = [HttpSocket(one, scheme, tls, options.tcp_keepalive, address) for one in listeners]
    return Bound(sockets, attrs.evolve(endpoint, port=port, path=prefix), address, loopback, tls)


async def _activated(text: str, options: ListenOptions, prefix: str, *, guarded: bool) -> Bound:
    name = text.removeprefix("http+fd:")
    if not name or "/" in name or ":" in name:
        raise AddressError(
            f"{text!r}: expected http+fd:NAME, NAME being the socket unit's FileDescriptorName="
        )
    await trio.lowlevel.checkpoint()
    adopted = [adopt(fd, text) for fd in activated_fds(name, text)]
    try:
        first = adopted[0].getsockname()
        if adopted[0].family == socket.AF_UNIX:  # a local reverse proxy's
            endpoint, loopback = Endpoint("http", "localhost", 80, prefix), True
        else:
            endpoint = Endpoint("http", first[0], first[1], prefix)
            loopback = all(
                [
                    await _loopback(text, one.getsockname()[0], options, False, guarded=guarded)
                    for one in adopted
                ]
            )
    except BaseException:
        for one in adopted:
            one.close()
        raise
    listeners = [trio.SocketListener(trio.socket.from_stdlib_socket(one)) for one in adopted]
    sockets = [HttpSocket(one, "http", None, options.tcp_keepalive, text) for one in listeners]
    return Bound(sockets, endpoint, text, loopback, None)


async def _loopback(
    address: str, host: str, options: ListenOptions, encrypted: bool, *, guarded: bool
) -> bool:
    if guarded:
        return await check_exposure(address, host, options, encrypted=encrypted, web=True)
    return await is_loopback(host)
