"""The core every channel kind builds on; it imports nothing else of ``channels``.

What lives here: the exceptions (``errors``), JSON-RPC values (``jsonrpc``), newline framing
(``framing``), the Channel interface (``channel``), the stream channel (``stream``), reading a file
descriptor directly (``fdio``), the hot-path lock (``lock``) and deadline ticker (``ticker``), the
listener and address machinery (``listener``, ``virtual``, ``address``, ``options``, ``serve``),
TLS contexts and the TLS socket stream (``tlscontext``, ``tlsstream``), bearer tokens (``auth``),
OAuth settings and principals (``oauth``), the HTTP request guard (``guard``) and what hosts
sharing one socket among several servers route by (``mounts``), and two small trio idioms:
``unwrap`` (a nursery's group of one, unwrapped) and ``cancel`` (a block cancelled when something
else happens first). Only the WebSocket and HTTP rooms mount servers: ``MountAddress`` is
imported on first use (PEP 562), and with it ``mounts`` and ``guard``, so that a process serving
Unix sockets or TCP does not hold them; so are
``OAuthSettings`` and ``Principal`` (``oauth``), which only WebSocket and HTTP listeners use, and
bearer tokens (``auth``), which only listeners and clients given some use.

Import rule: modules here import only each other, the standard library and third-party packages.
The sans-IO ones (``errors``, ``jsonrpc``, ``lines``, ``framing``, ``auth``, ``oauth``, ``guard``) import
no trio.
"""

from typing import TYPE_CHECKING

from .address import (
    Address,
    AddressError,
    address_schemes,
    parse_address,
    register_address_kind,
)
from .cancel import (
    Cutoff,
    cancelled_when,
)
from .channel import (
    CloseReason,
    ExchangeHandler,
    MessageChannel,
    PeerInfo,
    receive_batch,
)
from .errors import (
    INVALID_REQUEST,
    PARSE_ERROR,
    InvalidMessage,
    MessageTooLarge,
    ParseError,
    ProtocolError,
    SendTimeout,
)
from .exports import import_on_first_use
from .framing import (
    LineFramer,
    Oversized,
)
from .jsonrpc import (
    JSONObject,
    Kind,
    RequestId,
    decode,
    encode,
    is_request_id,
    kind,
    validate,
)
from .listener import (
    CredentialsRefused,
    HandshakeError,
    Incoming,
    IncomingHandler,
    MessageListener,
    StreamIncoming,
    StreamListener,
    serve_listeners,
)
from .lock import (
    HandoffLock,
)
from .options import (
    AccessDenied,
    ConnectError,
    ConnectOptions,
    HttpOptions,
    ListenError,
    ListenOptions,
    TcpKeepalive,
)
from .serve import (
    connect,
    open_listeners,
    serve,
)
from .stream import (
    DEFAULT_MAX_MESSAGE_BYTES,
    StreamChannel,
)
from .unwrap import (
    single_exception,
)

if TYPE_CHECKING:
    from .auth import (
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
    from .mounts import MountAddress
    from .oauth import OAuthSettings, Principal

# Public names imported on first use, and the module of each.
DEFERRED = {
    "MountAddress": "mounts",
    "OAuthSettings": "oauth",
    "Principal": "oauth",
    **dict.fromkeys(
        [
            "AUTHENTICATE_METHOD",
            "UNAUTHORIZED",
            "CredentialError",
            "TokenSet",
            "authenticate_message",
            "client_token_from_env",
            "client_token_from_file",
            "tokens_from_credential",
            "tokens_from_env",
            "tokens_from_file",
        ],
        "auth",
    ),
}

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
    "CredentialsRefused",
    "Cutoff",
    "ExchangeHandler",
    "HandoffLock",
    "HandshakeError",
    "HttpOptions",
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
    "MountAddress",
    "OAuthSettings",
    "Oversized",
    "ParseError",
    "PeerInfo",
    "Principal",
    "ProtocolError",
    "RequestId",
    "SendTimeout",
    "StreamChannel",
    "StreamIncoming",
    "StreamListener",
    "TcpKeepalive",
    "TokenSet",
    "address_schemes",
    "authenticate_message",
    "cancelled_when",
    "client_token_from_env",
    "client_token_from_file",
    "connect",
    "decode",
    "encode",
    "is_request_id",
    "kind",
    "open_listeners",
    "parse_address",
    "receive_batch",
    "register_address_kind",
    "serve",
    "serve_listeners",
    "single_exception",
    "tokens_from_credential",
    "tokens_from_env",
    "tokens_from_file",
    "validate",
]


__getattr__ = import_on_first_use(__name__, DEFERRED, globals())
