"""Channels: whole JSON-RPC messages over one kind of transport.

This package knows framing and the JSON-RPC shape, nothing about child processes, sessions or MCP
protocol eras. ``bridge`` imports it; it never imports ``bridge``.
"""

from ._address import (
    Address,
    AddressError,
    ConnectError,
    ConnectOptions,
    ListenError,
    ListenOptions,
    MessageListener,
    address_schemes,
    parse_address,
    register_address_kind,
)
from ._channel import MessageChannel, PeerInfo, receive_batch
from ._errors import (
    INVALID_REQUEST,
    PARSE_ERROR,
    InvalidMessage,
    MessageTooLarge,
    ParseError,
    ProtocolError,
    SendTimeout,
)
from ._framing import LineFramer, Oversized
from ._jsonrpc import JSONObject, Kind, RequestId, decode, encode, is_request_id, kind, validate
from ._stdio import StdioAddress, open_stdio_stream
from ._stream import DEFAULT_MAX_MESSAGE_BYTES, StreamChannel
from ._tcp import TcpAddress
from ._unix import UnixAddress

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "INVALID_REQUEST",
    "PARSE_ERROR",
    "Address",
    "AddressError",
    "ConnectError",
    "ConnectOptions",
    "InvalidMessage",
    "JSONObject",
    "Kind",
    "LineFramer",
    "ListenError",
    "ListenOptions",
    "MessageChannel",
    "MessageListener",
    "MessageTooLarge",
    "Oversized",
    "ParseError",
    "PeerInfo",
    "ProtocolError",
    "SendTimeout",
    "RequestId",
    "StdioAddress",
    "StreamChannel",
    "TcpAddress",
    "UnixAddress",
    "address_schemes",
    "decode",
    "encode",
    "is_request_id",
    "kind",
    "open_stdio_stream",
    "parse_address",
    "receive_batch",
    "register_address_kind",
    "validate",
]
