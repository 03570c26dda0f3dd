"""The public names: every one importable from its package top, listed once, shown under its public name.

As in websockets' ``tests/test_exports.py``: a package's ``__all__`` is exactly the union of its rooms'
own ``__all__``, so a name added to a room is exported, and one removed from the top is noticed here.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from types import ModuleType

import pytest

import bridge
import channels

# The names users import today (0.1.0). Removing one breaks somebody's program: add, never take away.
CHANNELS_NAMES = [
    "AUTHENTICATE_METHOD",
    "AccessDenied",
    "Address",
    "AddressError",
    "CloseReason",
    "ConnectError",
    "ConnectOptions",
    "CredentialError",
    "CredentialsRefused",
    "Cutoff",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "ExchangeHandler",
    "FdAddress",
    "HandoffLock",
    "HandshakeError",
    "HttpAddress",
    "HttpClientChannel",
    "HttpFdAddress",
    "HttpOptions",
    "HttpsAddress",
    "INVALID_REQUEST",
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
    "PARSE_ERROR",
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
    "UNAUTHORIZED",
    "UnixAddress",
    "WebSocketAddress",
    "WebSocketChannel",
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
BRIDGE_NAMES = [
    "BridgeError",
    "CONNECTION_CLOSED",
    "ChildProcess",
    "ChildSpec",
    "ChildStartError",
    "ConfigError",
    "CrashLoop",
    "Daemon",
    "DaemonStatistics",
    "Ending",
    "Limits",
    "REPLY_TOO_LARGE",
    "REQUEST_TIMEOUT",
    "Relay",
    "RestartPolicy",
    "ServeConfig",
    "TOO_MANY_CONNECTIONS",
    "TOO_MANY_REQUESTS",
    "describe_exit",
    "error_response",
    "open_bridge",
    "open_child",
    "stop_budget",
]
PACKAGES = [(channels, CHANNELS_NAMES), (bridge, BRIDGE_NAMES)]


def rooms(package: ModuleType) -> list[ModuleType]:
    """The package's direct children that declare an ``__all__`` of their own."""
    children = []
    for path in sorted(Path(package.__path__[0]).iterdir()):
        # Rooms are private (one underscore): channels.testing is public by its own name, and
        # __main__, __init__ and caches are no rooms.
        private = path.name.startswith("_") and not path.name.startswith("__")
        if not private or not (path.suffix == ".py" or (path / "__init__.py").exists()):
            continue
        module = importlib.import_module(f"{package.__name__}.{path.stem}")
        if hasattr(module, "__all__"):
            children.append(module)
    return children


@pytest.mark.parametrize(("package", "names"), PACKAGES, ids=["channels", "bridge"])
def test_every_public_name_of_the_first_release_is_still_exported(
    package: ModuleType, names: list[str]
) -> None:
    assert sorted(set(names) - set(package.__all__)) == []


@pytest.mark.parametrize(("package", "names"), PACKAGES, ids=["channels", "bridge"])
def test_the_top_level_all_is_exactly_the_union_of_its_rooms_all_with_no_duplicates(
    package: ModuleType, names: list[str]
) -> None:
    from_rooms = [name for room in rooms(package) for name in room.__all__]
    assert len(from_rooms) == len(set(from_rooms)), "a name is exported by two rooms"
    assert len(package.__all__) == len(set(package.__all__))
    assert sorted(package.__all__) == sorted(from_rooms)


@pytest.mark.parametrize(("package", "names"), PACKAGES, ids=["channels", "bridge"])
def test_every_exported_name_is_importable_from_the_package_top(
    package: ModuleType, names: list[str]
) -> None:
    missing = [name for name in package.__all__ if not hasattr(package, name)]
    assert missing == []


@pytest.mark.parametrize(("package", "names"), PACKAGES, ids=["channels", "bridge"])
def test_public_classes_and_functions_show_their_public_module_in_reprs_and_tracebacks(
    package: ModuleType, names: list[str]
) -> None:
    private = [
        f"{name}: {value.__module__}"
        for name in package.__all__
        if (inspect.isclass(value := getattr(package, name)) or inspect.isfunction(value))
        and value.__module__ != package.__name__
    ]
    assert private == []
    assert repr(channels.StreamChannel) == "<class 'channels.StreamChannel'>"
