"""The process's own stdin/stdout as a channel (``stdio:``), the wire format of MCP itself.

``trio.lowlevel.FdStream`` needs a file descriptor the kernel can poll (a pipe, a socket, a
terminal). Regular files and ``/dev/null`` cannot be polled; for those, plain blocking ``os.read`` and
``os.write`` never wait, so :class:`_FileStream` calls them directly. Either way the channel works on
duplicates of fds 0 and 1, so closing it does not close the process's own descriptors.
"""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Self, final

import attrs
import trio

from .._core.address import Address, AddressError, register_address_kind
from .._core.channel import MessageChannel, PeerInfo
from .._core.listener import Incoming, MessageListener, StreamIncoming
from .._core.options import ConnectOptions, ListenOptions
from .._core.stream import StreamChannel


def _pollable(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


@final
class _FileStream(trio.abc.Stream):
    """A stream over a regular file (or /dev/null): reads and writes never block there."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.lowlevel.checkpoint()
        if self._fd < 0:
            raise trio.ClosedResourceError
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        if self._fd < 0:
            raise trio.ClosedResourceError
        return os.read(self._fd, max_bytes or 65536)

    async def aclose(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        await trio.lowlevel.checkpoint()


def _open_fd_stream(fd: int) -> trio.abc.Stream:
    duplicate = os.dup(fd)
    return trio.lowlevel.FdStream(duplicate) if _pollable(duplicate) else _FileStream(duplicate)


def open_stdio_stream() -> trio.StapledStream[trio.abc.Stream, trio.abc.Stream]:
    """A half-closeable stream over this process's stdout (send) and stdin (receive).

    The stream works on duplicates of fds 1 and 0: ``send_eof()`` closes our duplicate of stdout,
    and closing the stream closes both duplicates, never the process's own descriptors. The caller
    owns the stream and closes it.

    Raises:
        OSError: a descriptor cannot be duplicated (stdin or stdout is closed).
    """
    return trio.StapledStream(_open_fd_stream(1), _open_fd_stream(0))


@final
class StdioListener(MessageListener):
    """Accepts exactly one channel: the process's own stdin/stdout. Later accepts wait forever."""

    def __init__(self, options: ListenOptions) -> None:
        self._options = options
        self._accepted = False

    @property
    def address(self) -> str:
        return "stdio:"

    async def accept(self) -> Incoming:
        if self._accepted:
            await trio.sleep_forever()
        await trio.lowlevel.checkpoint()  # before taking the one connection: a cancel loses nothing
        self._accepted = True
        return StreamIncoming(open_stdio_stream(), PeerInfo("stdio"), self._options.max_message_bytes)

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


@register_address_kind
@attrs.frozen
class StdioAddress(Address):
    """``stdio:``: this process's standard input and output.

    Listening accepts exactly one connection, stdin/stdout itself; connecting gives a channel
    over them.
    """

    scheme = "stdio"

    @classmethod
    def parse(cls, text: str) -> Self:
        """Parse ``stdio:`` (nothing may follow the colon).

        Raises:
            AddressError: any other text.
        """
        if text != "stdio:":
            raise AddressError(f"{text!r}: expected exactly stdio:")
        return cls()

    def __str__(self) -> str:
        return "stdio:"

    async def listen(self, options: ListenOptions) -> list[MessageListener]:
        """One listener whose first ``accept`` yields stdin/stdout; later ones wait forever.

        Only ``options.max_message_bytes`` applies: no tokens, no TLS. Never raises
        :class:`~channels.ListenError`; the caller owns the listener.
        """
        await trio.lowlevel.checkpoint()
        return [StdioListener(options)]

    @asynccontextmanager
    async def connect(self, options: ConnectOptions) -> AsyncIterator[MessageChannel]:
        """A channel over duplicates of stdin and stdout, closed when the block ends.

        Only ``options.max_message_bytes`` applies. Closing the channel closes the duplicates,
        not the process's own descriptors.

        Raises:
            OSError: a descriptor cannot be duplicated (stdin or stdout is closed).
        """
        await trio.lowlevel.checkpoint()
        channel = StreamChannel(
            open_stdio_stream(), max_message_bytes=options.max_message_bytes, peer=PeerInfo("stdio")
        )
        async with channel:
            yield channel
