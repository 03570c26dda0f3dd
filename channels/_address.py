"""Addresses: one parser, one registry, and each kind knows how to listen and connect.

An address is text: ``unix:PATH``, ``tcp:HOST:PORT``, ``stdio:``. Its scheme (the part before the
first ``:``) picks the kind from the registry. Adding a channel kind is one :class:`Address` subclass
and one :func:`register_address_kind` call.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, Self

import attrs
import trio

from ._channel import MessageChannel
from ._stream import DEFAULT_MAX_MESSAGE_BYTES

# Unix socket files are created owner-only unless the operator widens them (DESIGN.md §5.7).
DEFAULT_SOCKET_MODE = 0o600


class AddressError(ValueError):
    """An address that cannot be parsed; the message says what form was expected."""


class ListenError(Exception):
    """A listener could not be opened; the message names the address, the cause and the fix."""


class ConnectError(Exception):
    """A connection could not be made; the message names the address and the cause."""


@attrs.frozen
class ListenOptions:
    """How to open listeners. Each kind reads the fields that concern it.

    Attributes:
        max_message_bytes: longest message accepted from a peer.
        socket_mode: permission bits of a Unix socket file.
        socket_group: group id given to a Unix socket file, or ``None`` for the process's group.
        allow_non_loopback: permit TCP binds beyond loopback (the operator's explicit opt-out).
        allow_uids, allow_gids: Unix sockets: if either is given, only peers whose uid is in
            ``allow_uids`` or whose gid is in ``allow_gids`` are served (``SO_PEERCRED``, checked at
            accept, before any byte is read); others are disconnected and logged.
    """

    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    socket_mode: int = DEFAULT_SOCKET_MODE
    socket_group: int | None = None
    allow_non_loopback: bool = False
    allow_uids: frozenset[int] = frozenset()
    allow_gids: frozenset[int] = frozenset()


@attrs.frozen
class ConnectOptions:
    """How to connect.

    Attributes:
        max_message_bytes: longest message accepted from the peer.
    """

    max_message_bytes: int = 16 * 1024 * 1024


class MessageListener(trio.abc.Listener[MessageChannel]):
    """A listener whose ``accept()`` returns a :class:`MessageChannel`.

    ``accept()`` may raise ``OSError`` with a capacity errno (``EMFILE``...): callers retry, as
    ``trio.serve_listeners`` does. The listener owns its socket and closes it in ``aclose()``.
    """

    __slots__ = ()

    @property
    @abstractmethod
    def address(self) -> str:
        """The bound address as text, with the real port for ``tcp:HOST:0``."""


class Address(ABC):
    """One kind of address. Subclasses are frozen attrs classes."""

    scheme: ClassVar[str]

    @classmethod
    @abstractmethod
    def parse(cls, text: str) -> Self:
        """Parse the full address text (scheme included).

        Raises:
            AddressError: with the expected form.
        """

    @abstractmethod
    async def listen(self, options: ListenOptions) -> list[MessageListener]:
        """Open the listeners for this address (a host name may bind several sockets).

        Raises:
            ListenError: it cannot be listened on.
        """

    @abstractmethod
    async def connect(self, options: ConnectOptions) -> MessageChannel:
        """Connect; the caller owns the returned channel.

        Raises:
            ConnectError: the connection could not be made.
        """


_KINDS: dict[str, type[Address]] = {}


def register_address_kind(kind: type[Address]) -> type[Address]:
    """Register an address kind under its ``scheme`` (usable as a class decorator)."""
    _KINDS[kind.scheme] = kind
    return kind


def address_schemes() -> list[str]:
    """The registered schemes, for help texts."""
    return sorted(_KINDS)


def parse_address(text: str) -> Address:
    """Parse any registered address.

    Raises:
        AddressError: unknown scheme or malformed address.
    """
    scheme, colon, _ = text.partition(":")
    if not colon or scheme not in _KINDS:
        known = ", ".join(f"{name}:" for name in address_schemes())
        raise AddressError(f"{text!r}: unknown address kind; expected one of {known}")
    return _KINDS[scheme].parse(text)
