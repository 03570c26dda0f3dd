"""The few exceptions a channel raises beyond trio's own vocabulary.

A channel reports transport state with trio's exceptions (``trio.EndOfChannel``,
``trio.ClosedResourceError``, ``trio.BrokenResourceError``, ``trio.BusyResourceError``). What it adds
is one family for *one bad message*: :class:`ProtocolError`. Like h11's ``RemoteProtocolError`` it is
the only exception garbage input may produce, and it carries a hint: the JSON-RPC error code and, where
it could be read, the offending request's id, so that whoever owns the channel can answer the peer.
A channel stays usable after a ``ProtocolError``; whether to go on is the caller's policy.
"""

from __future__ import annotations

from typing import Any

import trio

# JSON-RPC 2.0 standard codes (https://www.jsonrpc.org/specification#error_object).
PARSE_ERROR = -32700
"""JSON-RPC's code for a message that is not valid JSON (:class:`ParseError`)."""
INVALID_REQUEST = -32600
"""JSON-RPC's code for valid JSON that is not a valid message (:class:`InvalidMessage`,
:class:`MessageTooLarge`)."""


class ProtocolError(Exception):
    """One message from the peer could not be accepted.

    Raised by ``receive()``, ``receive_nowait()`` and :func:`~channels.decode`; the channel stays
    usable, and the next message can be received.

    Args:
        message: what was wrong, for logs and ``error.data.detail``.
        request_id: see the attribute.

    Attributes:
        rpc_code: the JSON-RPC error code that answers it (``-32700`` or ``-32600``).
        reason: a short machine-readable tag for ``error.data.reason`` and logs.
        request_id: the id of the offending request when it could be read, else ``None``.
        excerpt: the first bytes of the offending line, for logs (set by the channel; empty
            otherwise).
    """

    rpc_code: int = INVALID_REQUEST
    reason: str = "invalid-message"

    def __init__(self, message: str, *, request_id: Any = None) -> None:
        super().__init__(message)
        self.request_id = request_id
        self.excerpt = b""
        """The first bytes of the offending line, for logs (set by the channel)."""

    def detached(self) -> ProtocolError:
        """This error without its traceback, cause or context: fit to be kept as a batch's item.

        Kept in a list by the frame that caught it, its traceback (or its context's, through
        each frame's caller) would lead back to that frame and the list: a reference cycle,
        freed with the channel and batch the frames hold only by a full collection.
        """
        self.__traceback__ = self.__cause__ = self.__context__ = None
        return self


class ParseError(ProtocolError):
    """The line is not a JSON text we accept (bad UTF-8, bad JSON, NaN, too deep, ...)."""

    rpc_code = PARSE_ERROR
    reason = "parse-error"


class InvalidMessage(ProtocolError):
    """Valid JSON, but not one JSON-RPC 2.0 request, notification or response."""

    reason = "invalid-message"


class MessageTooLarge(ProtocolError):
    """A line longer than the channel's limit; it is discarded, see :mod:`channels._core.framing`.

    Channels that cannot skip an over-long message (WebSocket) close instead, and their
    ``receive`` raises ``trio.BrokenResourceError``.

    Attributes:
        limit: the limit in bytes that was exceeded.
        prefix: the first bytes of the discarded line (for logs and for recovering a request id).
    """

    reason = "message-too-large"

    def __init__(self, message: str, *, limit: int, prefix: bytes, request_id: Any = None) -> None:
        super().__init__(message, request_id=request_id)
        self.limit = limit
        self.prefix = prefix


class SendTimeout(trio.BrokenResourceError):
    """The peer accepted nothing for the channel's ``send_timeout``; the channel is now broken.

    A subclass of ``trio.BrokenResourceError``, so code that treats a broken peer as gone needs no
    change; code that wants to say why can catch it first.
    """
