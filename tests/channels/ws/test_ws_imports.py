"""What the WebSocket room imports: websockets' needless ``importlib.metadata`` import is deferred, and
OAuth's machinery loads only for a listener given OAuth settings, TLS's only for ``wss://``.

Each check runs in a fresh interpreter (this one has long imported everything) and reads its
``sys.modules``, as tests/bridge/cli/test_cli_imports.py does.
"""

from __future__ import annotations

import json

import trio

from conftest import python_output

TIMEOUT = 30  # seconds: one interpreter start-up and the WebSocket room's imports, on a loaded CI machine

# What importlib.metadata's code brings in that nothing else of the WebSocket room needs.
METADATA_ONLY = ("zipfile", "csv", "importlib.metadata._meta", "importlib.metadata._adapters")

DEFERRED = f"""
import json, sys
import channels._ws
print(json.dumps(sorted(m for m in {METADATA_ONLY!r} if m in sys.modules)))
import importlib.metadata
import websockets
from importlib.metadata import version
print(json.dumps([importlib.metadata.version("websockets"), version("trio"), websockets.__version__]))
print(json.dumps(sorted(m for m in {METADATA_ONLY!r} if m in sys.modules)))
print(json.dumps([importlib.metadata is sys.modules["importlib.metadata"], hasattr(importlib.metadata, "__getattr__")]))
"""

ALREADY_IMPORTED = """
import json, sys
import importlib.metadata
before = sys.modules["importlib.metadata"]
import channels._ws
print(json.dumps([sys.modules["importlib.metadata"] is before, importlib.metadata.version("websockets")]))
"""


async def lines_of(script: str) -> list[object]:
    with trio.fail_after(TIMEOUT):
        output = await python_output(script)
    return [json.loads(line) for line in output.splitlines()]


async def test_importing_the_websocket_room_runs_no_importlib_metadata_until_it_is_used() -> None:
    before, versions, after, module = await lines_of(DEFERRED)
    assert before == []
    websockets_version, trio_version, declared = versions
    assert websockets_version == declared
    assert trio_version == trio.__version__
    assert after == ["csv", "importlib.metadata._adapters", "importlib.metadata._meta", "zipfile"]
    assert module == [True, False]  # the whole module, in the object first registered


async def test_an_importlib_metadata_imported_before_the_websocket_room_is_left_as_it_is() -> None:
    [[same, websockets_version]] = await lines_of(ALREADY_IMPORTED)
    assert same is True
    assert websockets_version


# A ws:// listener without OAuth settings, opened and closed; then which OAuth and TLS modules are loaded.
OAUTH_MODULES = ("channels._oauth", "channels._core.oauth", "channels._ws.oauth")
TLS_MODULES = ("channels._core.tlscontext", "channels._core.tlsstream", "channels._sockets.tls")
LISTENING = f"""
import json, sys
import trio
from channels import ListenOptions, WebSocketAddress

async def main():
    for listener in await WebSocketAddress.parse("ws://127.0.0.1:0/mcp").listen(ListenOptions()):
        await listener.aclose()

trio.run(main)
print(json.dumps(sorted(m for m in {OAUTH_MODULES + TLS_MODULES!r} if m in sys.modules)))
"""


async def test_a_ws_listener_without_oauth_loads_no_oauth_or_tls_module() -> None:
    assert await lines_of(LISTENING) == [[]]
