"""The WebSocket and HTTP address kinds are known before their rooms load (channels/_core/address.py),
and the socket kinds but ``unix:`` before their modules load.

``import channels`` loads neither websockets nor h11 nor httptools; their schemes are listed at once,
and parsing one of their addresses imports the room that defines it. Each check runs in a fresh
interpreter, since this one has long imported every room.
"""

from __future__ import annotations

import trio

from conftest import python_json_lines

TIMEOUT = 30  # seconds: one interpreter start-up, on a loaded CI machine

SCRIPT = """
import json, sys
import channels
ROOMS = ("channels._ws", "channels._http", "websockets", "h11", "httptools")
def loaded():
    return sorted(room for room in ROOMS if room in sys.modules)
print(json.dumps([channels.address_schemes(), loaded()]))
channels.parse_address("unix:/tmp/x.sock")
print(json.dumps(loaded()))
address = channels.parse_address("ws://127.0.0.1:7300/")
print(json.dumps([type(address).__name__, type(address).__module__, loaded()]))
address = channels.parse_address("http://127.0.0.1:7300/mcp")
print(json.dumps([type(address).__name__, loaded()]))
"""


async def test_deferred_schemes_are_listed_at_once_and_parsing_one_imports_its_room() -> None:
    with trio.fail_after(TIMEOUT):
        first, after_unix, after_ws, after_http = await python_json_lines(SCRIPT)
    schemes, loaded = first
    assert {"ws", "wss", "http", "https", "http+fd", "unix", "tcp"} <= set(schemes)
    assert loaded == []
    assert after_unix == []
    assert after_ws == ["WebSocketAddress", "channels", ["channels._ws", "websockets"]]
    assert after_http[0] == "HttpAddress"
    assert {"channels._http", "httptools"} <= set(after_http[1])
    assert "h11" not in after_http[1]  # only the HTTP client uses it, loaded on first use


CLAIM_SCRIPT = """
import json
import channels
from channels._core.address import Address, register_address_kind

@register_address_kind
class MyWs(Address):
    scheme = "ws"
    @classmethod
    def parse(cls, text):
        return cls()
    def connect(self, options):
        raise NotImplementedError
    def listen(self, options):
        raise NotImplementedError

channels.WebSocketChannel  # loads the WebSocket room, which registers its own ws kind
print(json.dumps(type(channels.parse_address("ws://127.0.0.1:7300/")).__name__))
"""


async def test_a_kind_registered_for_a_deferred_scheme_is_kept_when_its_room_loads_later() -> None:
    with trio.fail_after(TIMEOUT):
        assert await python_json_lines(CLAIM_SCRIPT) == ["MyWs"]


SOCKETS_SCRIPT = """
import json, sys
import channels
MODULES = ("activation", "endpoint", "stdio", "tcp", "tls")
def loaded():
    return sorted(name for name in MODULES if "channels._sockets." + name in sys.modules)
print(json.dumps([channels.address_schemes(), loaded()]))
tcp = channels.parse_address("tcp:127.0.0.1:7300")
print(json.dumps([type(tcp).__name__, type(tcp).__module__, loaded()]))
print(json.dumps([channels.TlsAddress.__name__, channels.TlsAddress.__module__, loaded()]))
print(json.dumps([type(channels.parse_address("fd:mcp")).__name__, loaded()]))
"""


async def test_the_socket_kinds_but_unix_are_listed_at_once_and_load_on_first_use() -> None:
    with trio.fail_after(TIMEOUT):
        first, after_tcp, after_tls, after_fd = await python_json_lines(SOCKETS_SCRIPT)
    schemes, loaded = first
    assert {"unix", "tcp", "tls", "stdio", "fd"} <= set(schemes)
    assert loaded == []
    assert after_tcp == ["TcpAddress", "channels", ["tcp"]]
    assert after_tls == ["TlsAddress", "channels", ["tcp", "tls"]]
    assert after_fd[0] == "FdAddress"
    assert "activation" in after_fd[1]
