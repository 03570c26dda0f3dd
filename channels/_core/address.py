"""Addresses: one parser, one registry, and each kind knows how to listen and connect.

An address is text: ``unix:PATH``, ``tcp:HOST:PORT``, ``tls:HOST:PORT``, ``ws://HOST:PORT/PATH``,
``wss://...``, ``stdio:``. Its scheme (the part before the
first ``:``) picks the kind from the registry. Adding a channel kind is one :class:`Address` subclass
and one :func:`register_address_kind` call. What listening and connecting take, and raise when they
fail, is in :mod:`channels._core.options`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager
from typing import ClassVar, Self

from .channel import MessageChannel
from .listener import MessageListener
from .options import ConnectOptions, ListenOptions


class AddressError(ValueError):
    """An address that cannot be parsed; the message says what form was expected.

    Raised by :func:`parse_address`, ``Address.parse`` and everything that takes address text.
    """


class Address(ABC):
    """One kind of address: how to parse it, listen on it and connect to it.

    Subclasses are frozen attrs classes, registered with :func:`register_address_kind`;
    ``str(address)`` gives the text back in the form :meth:`parse` reads.

    Attributes:
        scheme: the text before the first ``:`` that selects this kind (``"unix"``, ``"ws"``).
    """

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

        The caller owns the listeners and closes them (:func:`~channels.serve` and the bridge's
        daemon do). If it raises :class:`ListenError`, nothing is left open.

        Args:
            options: limits, authentication and TLS settings; each kind reads the fields that
                concern it.

        Raises:
            ListenError: it cannot be listened on.
        """

    @abstractmethod
    def connect(self, options: ConnectOptions) -> AbstractAsyncContextManager[MessageChannel]:
        """Connect (and authenticate, with ``options.token``); use as ``async with``.

        The channel is closed when the block ends, however it ends. Some channels run background
        tasks (a WebSocket's keepalive), hence a context manager rather than a bare channel.

        Args:
            options: limits, credentials and TLS settings for this connection.

        Raises:
            ConnectError: the connection could not be made (on entering the block).
        """


_KINDS: dict[str, type[Address]] = {}

# Schemes whose kind registers itself when its module is imported, and what imports it: the package
# top defers ws:// and http:// this way, so that their libraries load only when such an address is
# parsed (or one of their names is used).
_DEFERRED: dict[str, Callable[[], object]] = {}


# Deferred schemes registered by a caller before their room loaded (see register_address_kind).
_CLAIMED: set[str] = set()
_OWN_PREFIX = "channels."  # the modules of this package: a room's own kinds live there


def defer_address_kinds(schemes: Iterable[str], load: Callable[[], object]) -> None:
    """Know ``schemes`` before their kind is registered: :func:`parse_address` calls ``load`` first.

    ``load`` must register the kinds (import the module that defines them). A scheme registered
    meanwhile with :func:`register_address_kind` keeps that kind.
    """
    for scheme in schemes:
        if scheme not in _KINDS:
            _DEFERRED[scheme] = load


def register_address_kind(kind: type[Address]) -> type[Address]:
    """Register an address kind under its ``scheme`` (usable as a class decorator).

    A kind registered later under the same scheme replaces the earlier one, with one exception: a
    scheme this package defers (``ws``, ``http``...) that was registered before its room loaded
    keeps that kind when the room loads, as it would had the room been loaded first. The registry
    is process-wide.

    Returns:
        ``kind`` itself.
    """
    scheme = kind.scheme
    if scheme in _DEFERRED:
        _DEFERRED.pop(scheme)
        if not kind.__module__.startswith(_OWN_PREFIX):
            _CLAIMED.add(scheme)  # registered before the room: the room must not replace it
    elif scheme in _CLAIMED and kind.__module__.startswith(_OWN_PREFIX):
        return kind
    _KINDS[scheme] = kind
    return kind


def address_schemes() -> list[str]:
    """The registered schemes (deferred ones included), sorted, for help texts."""
    return sorted({*_KINDS, *_DEFERRED})


def parse_address(text: str) -> Address:
    """Parse any registered address; its scheme (the text before the first ``:``) picks the kind.

    Raises:
        AddressError: unknown scheme or malformed address.
    """
    scheme, colon, _ = text.partition(":")
    if colon and scheme in _DEFERRED:
        _DEFERRED[scheme]()
    if not colon or scheme not in _KINDS:
        known = ", ".join(f"{name}:" for name in address_schemes())
        raise AddressError(f"{text!r}: unknown address kind; expected one of {known}")
    return _KINDS[scheme].parse(text)
