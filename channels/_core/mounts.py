"""Sockets shared by several servers, each mounted at its own paths: the mount table and its checks.

An :class:`~channels.HttpHost` and a :class:`~channels.WebSocketHost` serve several servers on
one socket, each at its own paths. Both route through one :class:`MountTable` (which owner
answers each path, under which server name; a second claim on a path or a name is refused naming
both) and refuse the same request targets before routing (:func:`unsafe_target`): a target that
could be read as another path than the one it spells must never reach a route. Routing is an
exact, case-sensitive match of the path as sent, after refusing (in this order) a target over
:data:`MAX_TARGET_BYTES` (414), and dot segments or percent-encoded slashes, backslashes or dots
(400), which a proxy or a client library in front could normalise into another server's path.
Everything else that matches nothing is a 404 naming no server (:data:`NOT_FOUND`).

Mount paths and names are checked when mounted (:func:`check_mount_path`,
:func:`check_server_name`), so a path that passes them never needs a refusal: the target checks
run only for targets that matched no route, off the hot path. :class:`MountAddress` is the base
of the address each host hands one server. See docs/security.md, "One port for many servers".
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Generic, Protocol, Self, TypeVar

import attrs
import trio

from .address import Address, AddressError
from .guard import Rejection
from .listener import Incoming, MessageListener
from .options import ListenError

# A mounted server's name: one path segment, safe in URLs, logs and metric labels without
# escaping; at most 64 characters, as a DNS label (RFC 1035 §2.3.4), long enough for any name.
SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# The longest request target a host routes; longer ones get 414. Mount paths are far shorter
# (a prefix, a name and "/mcp"); 2 KiB leaves room for a query and is well under the head limit.
MAX_TARGET_BYTES = 2048
# The longest mount path (or prefix): a quarter of the target bound, leaving the rest to queries.
MAX_PATH_BYTES = 512
# One segment of a mount path: RFC 3986's unreserved characters, nothing to decode or normalise.
_SEGMENT = re.compile(r"[A-Za-z0-9._~-]+")
# Percent-encodings that decode to "/", "\", or "." (RFC 3986 §2.1: hex digits in either case).
_ENCODED = re.compile(r"%(2f|5c|2e)", re.IGNORECASE)
# Where well-known URIs live (RFC 8615): never a mount's own path.
WELL_KNOWN_ROOT = "/.well-known"

# The refusal of a path no server is mounted at: its body names no server.
NOT_FOUND = Rejection(404, "not-found", "Not Found: no MCP server at this path")


def unsafe_target(target: str) -> Rejection | None:
    """The refusal of a target that could confuse routing, or ``None`` if it is only unknown.

    ``target`` is the request target as sent (path and query).
    """
    if len(target) > MAX_TARGET_BYTES:
        return Rejection(
            414, "uri-too-long", f"URI Too Long: a request target is at most {MAX_TARGET_BYTES} bytes"
        )
    path = target.partition("?")[0]
    if _ENCODED.search(path):
        return Rejection(400, "bad-path", "Bad Request: encoded slashes or dots in the path are not routed")
    if any(segment in (".", "..") for segment in path.split("/")) or "\\" in path:
        return Rejection(400, "bad-path", "Bad Request: dot segments in the path are not routed")
    return None


def not_available(name: str | None) -> Rejection:
    """The 503 of a path mounted for server ``name`` that does not serve (not yet, or any more)."""
    return Rejection(503, "not-available", f"Service Unavailable: server {name} is not available")


def check_server_name(name: str) -> str | None:
    """Why ``name`` cannot be a mounted server's name, or ``None`` if it can."""
    if SERVER_NAME.fullmatch(name):
        return None
    shown = name if len(name) <= 80 else name[:80] + "..."
    return (
        f"server name {shown!r} cannot be mounted: use 1 to 64 of letters, digits, '.', '_' and '-', "
        "starting with a letter or digit"
    )


def check_mount_path(path: str, what: str = "mount path") -> str | None:
    """Why ``path`` cannot be mounted (or be a prefix), or ``None`` if it can.

    Absolute, of unreserved characters only (nothing to decode), no empty or dot segment, no
    trailing slash, not under ``/.well-known``, at most :data:`MAX_PATH_BYTES` long.
    """
    if len(path) > MAX_PATH_BYTES:
        return f"{what} is over {MAX_PATH_BYTES} bytes"
    if not path.startswith("/") or path == "/":
        return f"{what} {path!r} must start with '/' and name something"
    segments = path[1:].split("/")
    if any(not _SEGMENT.fullmatch(segment) or segment in (".", "..") for segment in segments):
        return (
            f"{what} {path!r} must be '/'-separated segments of letters, digits, '.', '_', '~' and '-' "
            "(no empty, '.' or '..' segment, no trailing '/', nothing percent-encoded)"
        )
    if path == WELL_KNOWN_ROOT or path.startswith(WELL_KNOWN_ROOT + "/"):
        return f"{what} {path!r} is under {WELL_KNOWN_ROOT}, where the metadata documents live"
    return None


def mount_path(host: str, prefix: str, name: str, path: str | None, leaf: str) -> str:
    """Where server ``name`` mounts on the host at ``host``: ``path``, or ``{prefix}/{name}/{leaf}``.

    Raises:
        ListenError: ``name`` fails :func:`check_server_name`, or the path :func:`check_mount_path`
            (named with the host's address).
    """
    problem = check_server_name(name)
    if problem is None:
        path = f"{prefix}/{name}/{leaf}" if path is None else path
        problem = check_mount_path(path)
    if problem is not None:
        raise ListenError(f"{host}: {problem}")
    assert path is not None
    return path


Owner = TypeVar("Owner")
Route = TypeVar("Route")


@attrs.frozen
class _Claim(Generic[Owner, Route]):
    owner: Owner
    route: Route
    name: str | None  # the server's; None for what the host answers itself (its index)


class MountTable(Generic[Owner, Route]):
    """Which owner answers each path of one shared socket, and under which server name.

    An owner is whatever answers a mount's requests (an HTTP service, a WebSocket mount); a route
    is what the owner needs to know of the path (which of its routes; nothing for WebSocket).
    Owned by the host; sans-IO.

    Args:
        address: the socket's address, for errors.
    """

    def __init__(self, address: str) -> None:
        self.address = address
        self.closed = False
        self._paths: dict[str, _Claim[Owner, Route]] = {}
        self._names: dict[str, Owner] = {}

    def get(self, path: str) -> tuple[Owner, Route] | None:
        """The owner answering ``path`` exactly, and its route; ``None`` if none does."""
        claim = self._paths.get(path)
        return None if claim is None else (claim.owner, claim.route)

    @property
    def names(self) -> Mapping[str, Owner]:
        """The servers mounted now, by name."""
        return self._names

    def check(self, what: object, name: str | None) -> None:
        """Refuse to mount server ``name`` before anything else is checked or built for it.

        Raises:
            ListenError: the table is closed, or ``name`` is mounted already.
        """
        if self.closed:
            raise ListenError(f"{what}: the shared listener {self.address} is closed")
        if name is not None and name in self._names:
            raise ListenError(f"{what}: server {name} is mounted already on {self.address}")

    def mount(self, what: object, name: str | None, owner: Owner, paths: Mapping[str, Route]) -> None:
        """Route ``paths`` to ``owner``, mounted for server ``name`` (``None``: the host's own).

        Raises:
            ListenError: the table is closed, ``name`` is mounted already, or a path is taken
                (naming the server that has it, or "the index", and ``name``); nothing changed.
        """
        self.check(what, name)
        for path in paths:
            taken = self._paths.get(path)
            if taken is not None and taken.owner is not owner:
                who = f"server {taken.name}" if taken.name is not None else "the index"
                raise ListenError(
                    f"{what}: {path} is taken on {self.address} by {who}; server {name} cannot have it"
                )
        for path, route in paths.items():
            self._paths[path] = _Claim(owner, route, name)
        if name is not None:
            self._names[name] = owner

    def unmount(self, owner: Owner) -> None:
        """Route nothing to ``owner`` any more: its paths get 404 from now on."""
        for path in [path for path, claim in self._paths.items() if claim.owner is owner]:
            del self._paths[path]
        for name in [name for name, mounted in self._names.items() if mounted is owner]:
            del self._names[name]


class MountHost(Protocol):
    """What a :class:`MountAddress` needs of its host (an HttpHost, a WebSocketHost)."""

    @property
    def address(self) -> str: ...


Host = TypeVar("Host", bound=MountHost)


@attrs.frozen
class MountAddress(Address, Generic[Host]):
    """Server ``name`` mounted at ``path`` on ``host``: an address for one server's daemon.

    Two compare equal iff they are of the same kind and have the same host (the same object),
    name and path, so an unchanged server's configuration stays equal across reloads. ``str()``
    is the endpoint's URL, ``f"{host.address}{path}"``. Not registered as an address kind: only
    a host makes them (``host.mount_address(name, path)``). Each kind's ``listen(options)``
    mounts the server with that server's own options, and closing the listener it returns
    unmounts it; its ``connect`` is a client of the host's kind.
    """

    host: Host = attrs.field(eq=id, repr=False)
    name: str
    path: str

    @classmethod
    def parse(cls, text: str) -> Self:
        """Not possible: mount addresses are made by their host.

        Raises:
            AddressError: always.
        """
        raise AddressError(f"{text!r}: a mounted server's address is made by its host, not parsed")

    def __str__(self) -> str:
        return f"{self.host.address}{self.path}"


Mounted = TypeVar("Mounted")


class MountListener(MessageListener, Generic[Mounted]):
    """The listener of one mounted server: what both hosts' mount listeners share.

    The socket and its connections are the host's; the listener owns the mount (its service or
    its upgrade checks) and is served with ``serve``, never ``accept``. Closing it unmounts, once.

    Args:
        address: the mount's URL.
        mount: what the host routes the mount's requests to, owned from now on.
        unmount: the host's, to route nothing to ``mount`` any more and end what it has open.
    """

    def __init__(self, address: str, mount: Mounted, unmount: Callable[[Mounted], Awaitable[None]]) -> None:
        self._address = address
        self._mount = mount
        self._unmount = unmount
        self._closed = False

    @property
    def address(self) -> str:
        return self._address

    async def accept(self) -> Incoming:
        """Not used: requests come over the host's connections. Serve with ``serve``.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError("a mounted server's listener is served with serve(), not accept()")

    async def aclose(self) -> None:
        """Unmount: the mount's paths get 404 from now on, and what it has open ends."""
        if not self._closed:
            self._closed = True
            await self._unmount(self._mount)
        else:
            await trio.lowlevel.checkpoint()
