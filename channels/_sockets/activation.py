"""Socket activation: ``fd:NAME`` listens on a socket systemd opened and passed to this process.

Any sd_listen_fds(3) launcher works, ``systemd-socket-activate`` included.

The protocol (sd_listen_fds(3), a stable interface): ``LISTEN_PID`` names the process the sockets
are for, ``LISTEN_FDS`` how many there are, starting at fd 3, and ``LISTEN_FDNAMES`` their names,
colon-separated (``FileDescriptorName=`` in the .socket unit; ``unknown`` when unnamed). The
variables are read once and removed from the environment, so no child ever inherits them.

Each socket is checked before use: a stream socket, already listening, of family Unix, IPv4 or
IPv6. A Unix socket gets the same peer credentials and ``--allow-uid``/``--allow-gid`` check as
``unix:`` (its file belongs to systemd and is never removed); a TCP socket gets the loopback rule
and bearer tokens of ``tcp:``. The framing is newline-delimited JSON-RPC.
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, MutableMapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Self

import attrs
import trio

from .._core.address import Address, AddressError, register_address_kind
from .._core.channel import MessageChannel
from .._core.listener import MessageListener
from .._core.options import ConnectError, ConnectOptions, ListenError, ListenOptions
from .tcp import TcpListener, check_exposure
from .unix import UnixListener

# sd_listen_fds(3): passed sockets start at fd 3 (after stdin, stdout and stderr).
SD_LISTEN_FDS_START = 3
# The name systemd gives a socket whose unit sets no FileDescriptorName=.
UNNAMED = "unknown"
ACTIVATION_VARIABLES = ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")

_activated: dict[str, list[int]] | None = None


def take_activated_sockets(
    environ: MutableMapping[str, str] | None = None, pid: int | None = None
) -> dict[str, list[int]]:
    """The file descriptors passed to this process, by name; read once, then remembered.

    The ``LISTEN_*`` variables are removed from ``environ`` (``os.environ`` by default). Sockets
    meant for another process (``LISTEN_PID`` differs) are ignored, as sd_listen_fds(3) says.
    """
    global _activated
    if _activated is not None:
        return _activated
    environ = os.environ if environ is None else environ
    values = {name: environ.pop(name, None) for name in ACTIVATION_VARIABLES}
    _activated = {}
    count = values["LISTEN_FDS"]
    if values["LISTEN_PID"] != str(os.getpid() if pid is None else pid) or not count:
        return _activated
    if not count.isdigit():
        return _activated
    names = (values["LISTEN_FDNAMES"] or "").split(":") if values["LISTEN_FDNAMES"] else []
    for index in range(int(count)):
        fd = SD_LISTEN_FDS_START + index
        try:
            os.set_inheritable(fd, False)  # never passed on to a child
        except OSError:
            continue  # LISTEN_FDS promised more than was passed: FdAddress.listen says so
        name = names[index] if index < len(names) and names[index] else UNNAMED
        _activated.setdefault(name, []).append(fd)
    return _activated


def _forget_activated_sockets() -> None:
    """For tests: read the environment again on the next :func:`take_activated_sockets`."""
    global _activated
    _activated = None


@asynccontextmanager
async def listen_only(address: object) -> AsyncIterator[MessageChannel]:
    """``connect`` for a socket-activated address: there is nothing to connect to.

    Raises:
        ConnectError: always, on entering the block.
    """
    await trio.lowlevel.checkpoint()
    raise ConnectError(f"{address}: socket-activated addresses can only be listened on")
    yield  # pragma: no cover  (makes this an async generator, as asynccontextmanager needs)


def activated_fds(name: str, address: object) -> list[int]:
    """The fds systemd passed under ``name``.

    Raises:
        ListenError: none were, naming the ones that were and the unit setting to use.
    """
    activated = take_activated_sockets()
    fds = activated.get(name)
    if not fds:
        passed = ", ".join(sorted(activated)) or "none"
        raise ListenError(
            f"{address}: no socket named {name!r} was passed by systemd (passed: {passed}); "
            f"set FileDescriptorName={name} in the .socket unit"
        )
    return fds


def adopt(fd: int, address: object) -> socket.socket:
    """A socket object over a duplicate of ``fd``, after checking it is a listening stream socket.

    The duplicate is what the listener owns and closes; systemd's fd itself stays open for the
    life of the process, so that a listener opened again (a reload) finds the same socket, never
    whatever file later took the number.

    Raises:
        ListenError: it is not.
    """
    try:
        sock = socket.socket(fileno=os.dup(fd))
    except OSError as exc:
        raise ListenError(f"{address}: fd {fd} is not a socket ({exc.strerror})") from None
    try:
        if sock.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE) != socket.SOCK_STREAM:
            raise ListenError(
                f"{address}: fd {fd} is not a stream socket; use ListenStream= in the .socket unit"
            )
        if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            raise ListenError(f"{address}: fd {fd} is not listening (Accept=yes is not supported)")
        if sock.family not in (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6):
            raise ListenError(f"{address}: fd {fd} is of family {sock.family!r}, not Unix or TCP")
    except BaseException:
        sock.close()  # our duplicate only; systemd's fd stays
        raise
    sock.setblocking(False)
    return sock


@register_address_kind
@attrs.frozen
class FdAddress(Address):
    """``fd:NAME``: the listening sockets systemd passed under ``FileDescriptorName=NAME``."""

    scheme = "fd"
    name: str

    @classmethod
    def parse(cls, text: str) -> Self:
        """Parse ``fd:NAME``.

        Raises:
            AddressError: no name.
        """
        name = text.removeprefix("fd:")
        if not name or ":" in name:
            raise AddressError(f"{text!r}: expected fd:NAME, the socket unit's FileDescriptorName=")
        return cls(name)

    def __str__(self) -> str:
        return f"fd:{self.name}"

    async def listen(self, options: ListenOptions) -> list[MessageListener]:
        """Adopt the sockets passed under this name.

        Raises:
            ListenError: none were passed under this name, or one is not a listening stream
                socket, or a TCP one is beyond loopback without authentication.
        """
        await trio.lowlevel.checkpoint()
        fds = activated_fds(self.name, self)
        listeners: list[MessageListener] = []
        for fd in fds:
            sock = adopt(fd, self)
            if sock.family == socket.AF_UNIX:
                path = sock.getsockname()
                path = path if isinstance(path, str) else repr(path)
                listeners.append(UnixListener(sock, path, None, options, address=f"{self} (unix:{path})"))
            else:
                host = sock.getsockname()[0]
                try:
                    await check_exposure(self, host, options, encrypted=False)
                except BaseException:
                    sock.close()
                    raise
                listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
                listeners.append(TcpListener(listener, options))
        return listeners

    def connect(self, options: ConnectOptions) -> AbstractAsyncContextManager[MessageChannel]:
        """Not possible: an ``fd:`` address only listens.

        Raises:
            ConnectError: always, on entering the block.
        """
        return listen_only(self)
