"""Channels: whole JSON-RPC messages over one kind of transport.

This package knows framing and the JSON-RPC shape, nothing about child processes, sessions or MCP
protocol eras. ``bridge`` imports it; it never imports ``bridge``.
"""

from ._activation import FdAddress, take_activated_sockets
from ._address import (
    AccessDenied,
    Address,
    AddressError,
    ConnectError,
    ConnectOptions,
    HttpOptions,
    ListenError,
    ListenOptions,
    address_schemes,
    parse_address,
    register_address_kind,
)
from ._auth import (
    AUTHENTICATE_METHOD,
    UNAUTHORIZED,
    CredentialError,
    TokenSet,
    authenticate_message,
    client_token_from_env,
    client_token_from_file,
    tokens_from_credential,
    tokens_from_env,
    tokens_from_file,
)
from ._channel import CloseReason, MessageChannel, PeerInfo, receive_batch
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
from ._http import HttpAddress, HttpFdAddress, HttpsAddress
from ._httpclient import HttpClientChannel
from ._jsonrpc import JSONObject, Kind, RequestId, decode, encode, is_request_id, kind, validate
from ._listener import (
    HandshakeError,
    Incoming,
    IncomingHandler,
    MessageListener,
    StreamIncoming,
    StreamListener,
    serve_listeners,
)
from ._lock import HandoffLock
from ._serve import connect, open_listeners, serve
from ._stdio import StdioAddress, open_stdio_stream
from ._stream import DEFAULT_MAX_MESSAGE_BYTES, StreamChannel
from ._tcp import TcpAddress
from ._tls import TlsAddress
from ._unix import UnixAddress
from ._unwrap import single_exception
from ._websocket import SecureWebSocketAddress, WebSocketAddress
from ._wschannel import WebSocketChannel

__all__ = [
    "AUTHENTICATE_METHOD",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "INVALID_REQUEST",
    "PARSE_ERROR",
    "UNAUTHORIZED",
    "AccessDenied",
    "Address",
    "AddressError",
    "CloseReason",
    "ConnectError",
    "ConnectOptions",
    "CredentialError",
    "FdAddress",
    "HandoffLock",
    "HandshakeError",
    "HttpAddress",
    "HttpClientChannel",
    "HttpFdAddress",
    "HttpOptions",
    "HttpsAddress",
    "Incoming",
    "IncomingHandler",
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
    "RequestId",
    "SecureWebSocketAddress",
    "SendTimeout",
    "StdioAddress",
    "StreamChannel",
    "StreamIncoming",
    "StreamListener",
    "TcpAddress",
    "TlsAddress",
    "TokenSet",
    "UnixAddress",
    "WebSocketAddress",
    "WebSocketChannel",
    "address_schemes",
    "authenticate_message",
    "client_token_from_env",
    "client_token_from_file",
    "connect",
    "decode",
    "encode",
    "is_request_id",
    "kind",
    "open_listeners",
    "open_stdio_stream",
    "parse_address",
    "receive_batch",
    "register_address_kind",
    "serve",
    "serve_listeners",
    "single_exception",
    "take_activated_sockets",
    "tokens_from_credential",
    "tokens_from_env",
    "tokens_from_file",
    "validate",
]
