"""One HTTP(S) socket shared by several servers, each mounted at its own path: :class:`HttpHost`.

A host is opened once (``await HttpHost.open("http://127.0.0.1:8080", options)``) by whoever
serves several servers on one port (the bridge's fleet), served with
``await nursery.start(host.serve)`` and closed with ``aclose()``; it outlives the servers mounted
on it. Each server gets an :class:`HttpMountAddress` from :meth:`HttpHost.mount_address`, an
ordinary :class:`~channels.Address` whose ``listen(options)`` mounts it with that server's own
options (tokens, OAuth, sessions, CORS, metadata) and whose listener is served exactly as an
``http://`` address's is; closing that listener unmounts the server.

Per mount at path ``P``: the MCP endpoint at ``P``; the 2024-11-05 HTTP+SSE endpoints at
``dirname(P)/sse`` and ``dirname(P)/messages``; the protected-resource metadata at
``/.well-known/oauth-protected-resource{P}`` (RFC 9728, path-suffixed). Sessions are the
mount's own: one server's session id is unknown (404) to another.

The host keeps everything socket-level: connection slots, head and keep-alive deadlines, the TLS
handshake, TCP keepalive, parsing and its limits. Before any route, a request target is refused
if it could confuse routing (docs/security.md, "One port for many servers"): dot segments and
encoded slashes or dots (400), a target over :data:`MAX_TARGET_BYTES` (414); paths match exactly
and case-sensitively (a trailing slash is another path), and an unknown path gets a 404 whose
JSON body names no server.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import NoReturn, Self, final

import attrs
import trio

from .._core.address import Address, AddressError
from .._core.channel import MessageChannel
from .._core.jsonrpc import JSONObject
from .._core.listener import MessageListener
from .._core.options import ConnectOptions, ListenOptions

# A mounted server's name: one path segment, safe in URLs, logs and metric labels without
# escaping; 64 characters as a DNS label's bound (RFC 1035 §2.3.4), long enough for any name.
SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# The longest request target a host routes; longer ones get 414. Mount paths are far shorter
# (a prefix, a name and "/mcp"); 2 KiB leaves room for a query and is well under the head limit.
MAX_TARGET_BYTES = 2048
# Where servers are mounted unless the host is told otherwise: PREFIX/NAME/mcp.
DEFAULT_PREFIX = "/servers"


@final
class HttpHost:
    """One HTTP or HTTPS socket serving several mounted servers by path.

    Owned by whoever opened it: it runs ``await nursery.start(host.serve)`` and closes the host
    with :meth:`aclose` at the end (after unmounting, or not: closing ends every mount).

    Attributes:
        index: what ``GET {prefix}`` and ``GET {prefix}/`` list, set by the owner: a callable
            returning one JSON object per server (name, path, era, state...). ``None``: each
            mount's name and path. Answered only to callers passing the host's own
            authentication (its options' tokens or OAuth; loopback without either is open), and
            404 when the host was opened with ``index=False``.
    """

    index: Callable[[], list[JSONObject]] | None

    @classmethod
    async def open(
        cls,
        url_or_address: str,
        options: ListenOptions,
        *,
        prefix: str = DEFAULT_PREFIX,
        index: bool = True,
    ) -> Self:
        """Bind ``url_or_address`` (``http://HOST:PORT``, ``https://HOST:PORT`` or ``http+fd:NAME``).

        ``options`` are the listener's own: TLS files, TCP keepalive, the handshake timeout,
        ``allow_hosts``/``allow_origins``/``http.trust_proxy``, and the tokens and OAuth that
        guard the index alone (each mount brings its own security to :meth:`mount_address`'s
        ``listen``). The caller owns the host and closes it.

        Raises:
            AddressError: another scheme, a path in the URL, or a bad ``prefix`` (it must start
                with ``/``, end without one, and have no dot segments nor ``%``).
            ListenError: the bind failed; ``https://`` without a certificate; an index beyond
                loopback without authentication or opt-out.
        """
        raise NotImplementedError

    @property
    def address(self) -> str:
        """``SCHEME://HOST:PORT`` with the bound port (``http+fd:NAME`` for an activated socket)."""
        raise NotImplementedError

    @property
    def prefix(self) -> str:
        """Where servers are mounted by default: ``{prefix}/{name}/mcp``."""
        raise NotImplementedError

    @property
    def mounts(self) -> Mapping[str, str]:
        """The servers mounted now: name to endpoint path."""
        raise NotImplementedError

    def mount_address(self, name: str, path: str | None = None) -> HttpMountAddress:
        """The address that mounts server ``name`` at ``path`` (default ``{prefix}/{name}/mcp``).

        Nothing is registered until its ``listen(options)``; see :class:`HttpMountAddress`.

        Raises:
            AddressError: ``name`` is not ``[A-Za-z0-9][A-Za-z0-9._-]{0,63}``, or ``path`` is
                not an absolute path of safe segments (no dot segments, no ``%``, no query).
        """
        raise NotImplementedError

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> NoReturn:
        """Accept and serve connections until cancelled; ``task_status.started()`` once accepting.

        Connections run inside this call: cancelling it ends them. Each request goes to the mount
        its path names, in that mount's handler nursery (see :meth:`HttpMountAddress.listen`).
        """
        raise NotImplementedError

    def reload_certificates(self) -> bool:
        """Read the TLS certificate and key again, if the host has TLS (see ``MessageListener``).

        Raises:
            ListenError: a file cannot be loaded; the ones in use stay.
        """
        raise NotImplementedError

    @property
    def oauth_outcomes(self) -> Mapping[str, int] | None:
        """With OAuth on the host (the index's): its verifier's outcome counts."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close the socket and unmount every server still mounted (their sessions end)."""
        raise NotImplementedError


@final
@attrs.frozen
class HttpMountAddress(Address):
    """Server ``name`` mounted at ``path`` on ``host``: an address for one server's daemon.

    Two compare equal iff they have the same host (the same object), name and path, so an
    unchanged server's configuration stays equal across reloads. ``str()`` is the endpoint's
    URL, ``f"{host.address}{path}"``. Not registered as an address kind: only the host makes
    them.
    """

    scheme = "http-mount"
    host: HttpHost = attrs.field(eq=id, repr=False)
    name: str
    path: str

    @classmethod
    def parse(cls, text: str) -> Self:
        """Not possible: mount addresses are made by :meth:`HttpHost.mount_address`.

        Raises:
            AddressError: always.
        """
        raise AddressError(f"{text!r}: a mounted server's address is made by its HttpHost, not parsed")

    def __str__(self) -> str:
        return f"{self.host.address}{self.path}"

    async def listen(self, options: ListenOptions) -> list[MessageListener]:
        """Mount the server with its own ``options``; return its one listener (the caller's).

        ``options`` are the server's: tokens, OAuth (audience: this mount's URL by default),
        ``http`` (sessions cap and idle timeout, CORS, metadata, trust_proxy), ``allow_hosts``,
        ``allow_origins``, ``max_message_bytes``. The listener's ``serve(handler,
        handler_nursery)`` hands the bridge this server's incomings exactly as an ``http://``
        listener's does; until it serves, and once it stops serving, the mount's requests get
        503. Its ``aclose()`` unmounts: the mount's sessions and streams end, and its paths get
        404 from then on.

        Raises:
            ListenError: the path, a sibling path or the metadata path is already mounted (naming
                both servers); the host is closed; beyond loopback without authentication.
        """
        raise NotImplementedError

    @asynccontextmanager
    async def connect(self, options: ConnectOptions) -> AsyncIterator[MessageChannel]:
        """Connect to the mounted server as a Streamable HTTP client (as ``http://`` does).

        Raises:
            ConnectError: the server cannot be reached.
        """
        raise NotImplementedError
        yield  # pragma: no cover
