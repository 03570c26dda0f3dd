"""Unix domain socket channels, with a listener that is safe to run as a daemon.

Creating the socket file, where the path may already be taken (docs/design.md §5.7: created 0600, or
0660 with a group, without a permission window; a live socket is never stolen):

* The path must fit ``sun_path`` (107 bytes plus NUL, unix(7)); checked before anything is created.
* The file is created by ``bind`` under a umask that leaves only the owner's bits, so there is no
  moment at which it is more open than asked for; group ownership and the final mode (for example
  0660) are applied afterwards, which only ever widens access to what was requested.
* A path that exists is claimed by binding, never by unlinking first. On ``EADDRINUSE`` the path is
  ``lstat``-ed: anything but a socket (a file, a directory, a symlink) is refused and left alone;
  a socket is probed with a non-blocking ``connect``: a live server is refused with a clear error,
  never stolen; ``ECONNREFUSED`` means a stale socket from a dead process, which is unlinked and the
  bind retried once.
* On close the file is unlinked only if it is still the inode this listener created.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import stat
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Self, final

import attrs
import trio

from .._core.address import Address, AddressError, register_address_kind
from .._core.channel import MessageChannel, PeerInfo
from .._core.listener import Incoming, MessageListener, StreamIncoming
from .._core.options import (
    DEFAULT_UNIX_IDLE_TIMEOUT,
    ConnectError,
    ConnectOptions,
    ListenError,
    ListenOptions,
)
from .._core.stream import StreamChannel

logger = logging.getLogger("channels.unix")

# sun_path is 108 bytes on Linux, including the terminating NUL (unix(7)).
MAX_SOCKET_PATH_BYTES = 107

# Pending connections the kernel queues for us; socat's default of 5 refuses bursts of clients.
# Linux caps it at net.core.somaxconn (4096 on current kernels).
LISTEN_BACKLOG = 4096

_UCRED = struct.Struct("3i")  # struct ucred {pid_t pid; uid_t uid; gid_t gid;}


def peer_credentials(sock: trio.socket.SocketType) -> tuple[int, int, int] | None:
    """``(pid, uid, gid)`` of the process at the other end of a connected Unix socket."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    except (OSError, AttributeError):  # AttributeError: no SO_PEERCRED on this platform
        return None
    pid, uid, gid = _UCRED.unpack(raw)
    return pid, uid, gid


def _bind_owner_only(path: str) -> socket.socket:
    """Bind a new socket at ``path`` with mode 0600 from the first instant (process umask)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o177)
    try:
        sock.bind(path)
    except BaseException:
        sock.close()
        raise
    finally:
        os.umask(previous)
    return sock


def _claim_stale(path: str) -> None:
    """Remove ``path`` if it is a socket nobody listens on; raise ListenError otherwise."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return  # gone in the meantime; the retry will bind
    if not stat.S_ISSOCK(info.st_mode):
        raise ListenError(
            f"unix:{path}: the path exists and is not a socket; refusing to remove it "
            "(choose another path or remove it yourself)"
        )
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.setblocking(False)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        os.unlink(path)  # stale: its server is gone
        return
    except BlockingIOError:
        pass  # a full backlog: somebody is listening
    except OSError as exc:
        raise ListenError(f"unix:{path}: cannot check the existing socket: {exc.strerror}") from exc
    finally:
        probe.close()
    raise ListenError(
        f"unix:{path}: another server is listening on this socket; refusing to take it over "
        "(stop it first or choose another path)"
    )


def open_unix_socket_listener(path: str, options: ListenOptions) -> tuple[socket.socket, os.stat_result]:
    """Bind and listen at ``path`` following the module's rules; return the socket and its inode.

    Raises:
        ListenError: with the reason and the fix.
    """
    if len(os.fsencode(path)) > MAX_SOCKET_PATH_BYTES:
        raise ListenError(
            f"unix:{path}: path is {len(os.fsencode(path))} bytes, the limit is "
            f"{MAX_SOCKET_PATH_BYTES} (unix(7) sun_path); choose a shorter path"
        )
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        raise ListenError(f"unix:{path}: directory {directory} does not exist; create it first")
    try:
        try:
            sock = _bind_owner_only(path)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            _claim_stale(path)
            sock = _bind_owner_only(path)
        try:
            if options.socket_group is not None:
                os.chown(path, -1, options.socket_group)
            os.chmod(path, options.socket_mode)
            sock.listen(LISTEN_BACKLOG)
            created = os.lstat(path)
        except BaseException:
            sock.close()
            os.unlink(path)
            raise
    except OSError as exc:
        raise ListenError(f"unix:{path}: {exc.strerror or exc}") from exc
    return sock, created


@final
class UnixListener(MessageListener):
    """Accepts Unix socket connections as :class:`StreamChannel`; owns and removes its socket file.

    Each accepted channel's :attr:`~MessageChannel.peer` carries the peer's pid, uid and gid.
    """

    def __init__(
        self,
        sock: socket.socket,
        path: str,
        created: os.stat_result | None,
        options: ListenOptions,
        *,
        address: str | None = None,
    ) -> None:
        self._listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
        self._path = path
        # None: the file is not ours to remove (a socket systemd created and passed us).
        self._inode = (created.st_dev, created.st_ino) if created is not None else None
        self._options = options
        self._closed = False
        self._address = address or f"unix:{path}"

    @property
    def address(self) -> str:
        return self._address

    async def accept(self) -> Incoming:
        """The next peer the allowlist admits (see :class:`ListenOptions`).

        Others are dropped here, before a byte of theirs is read. Unix peers are not asked for
        tokens: the socket file's permissions and the allowlist are their authentication.
        """
        while True:
            stream = await self._listener.accept()
            credentials = peer_credentials(stream.socket)
            pid, uid, gid = credentials if credentials else (None, None, None)
            peer = PeerInfo("unix", self._path, pid=pid, uid=uid, gid=gid)
            if self._admits(uid, gid):
                return StreamIncoming(
                    stream,
                    peer,
                    self._options.max_message_bytes,
                    idle_timeout=self._options.idle_timeout_for(DEFAULT_UNIX_IDLE_TIMEOUT),
                )
            logger.warning("%s: refused: peer not in --allow-uid/--allow-gid", peer)
            await trio.aclose_forcefully(stream)

    def _admits(self, uid: int | None, gid: int | None) -> bool:
        options = self._options
        if not options.allow_uids and not options.allow_gids:
            return True
        return uid in options.allow_uids or gid in options.allow_gids

    async def aclose(self) -> None:
        if not self._closed and self._inode is not None:
            self._closed = True
            try:
                info = os.lstat(self._path)
                if (info.st_dev, info.st_ino) == self._inode:
                    os.unlink(self._path)
            except OSError:
                pass  # already gone, or no longer ours: leave it
        await self._listener.aclose()


@register_address_kind
@attrs.frozen
class UnixAddress(Address):
    """``unix:PATH``: a Unix domain stream socket (a relative path is taken from the cwd).

    Attributes:
        path: the socket file's absolute path.
    """

    scheme = "unix"
    path: str

    @classmethod
    def parse(cls, text: str) -> Self:
        """Parse ``unix:PATH``, making ``PATH`` absolute from the current directory.

        Raises:
            AddressError: the path is empty.
        """
        path = text.removeprefix("unix:")
        if not path:
            raise AddressError(f"{text!r}: expected unix:PATH, for example unix:/run/mcp.sock")
        return cls(os.path.abspath(path))

    def __str__(self) -> str:
        return f"unix:{self.path}"

    async def listen(self, options: ListenOptions) -> list[MessageListener]:
        """Create the socket file and listen on it; the caller owns the listener.

        The file is created owner-only, then given ``options.socket_group`` and
        ``options.socket_mode``. A stale socket left by a dead server is replaced; a live server's
        socket, or any other file, is left alone. Closing the listener removes the file if it is
        still the one created. Each peer's pid, uid and gid are on its channel's ``peer``;
        ``options.allow_uids`` and ``options.allow_gids`` restrict who is served.
        ``options.tokens`` does not apply.

        Raises:
            ListenError: the path is too long or its directory is missing, another server listens
                there, the path is not a socket, or creating or configuring the file failed.
        """
        await trio.lowlevel.checkpoint()  # before binding: a cancel leaves no socket behind
        sock, created = open_unix_socket_listener(self.path, options)
        return [UnixListener(sock, self.path, created, options)]

    @asynccontextmanager
    async def connect(self, options: ConnectOptions) -> AsyncIterator[MessageChannel]:
        """Connect to the socket; the channel is closed when the block ends.

        ``options.token`` is not sent: a Unix server authenticates by file permissions and peer
        credentials.

        Raises:
            ConnectError: no such socket, nobody listening, or permission denied.
        """
        try:
            stream = await trio.open_unix_socket(self.path)
        except OSError as exc:
            raise ConnectError(f"{self}: {exc.strerror or exc}") from exc
        channel = StreamChannel(
            stream, max_message_bytes=options.max_message_bytes, peer=PeerInfo("unix", self.path)
        )
        async with channel:
            yield channel
