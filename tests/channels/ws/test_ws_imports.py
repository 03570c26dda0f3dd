"""What the WebSocket room imports: OAuth's machinery only for a listener given OAuth settings, TLS's
only for ``wss://`` (websockets' needless ``importlib.metadata``: tests/bridge/cli/test_lazy_imports.py).

Each check runs in a fresh interpreter (this one has long imported everything) and reads its
``sys.modules``, as tests/bridge/cli/test_cli_imports.py does.
"""

from __future__ import annotations

import trio

from conftest import python_json_lines

TIMEOUT = 30  # seconds: one interpreter start-up and the WebSocket room's imports, on a loaded CI machine


async def lines_of(script: str) -> list[object]:
    with trio.fail_after(TIMEOUT):
        return await python_json_lines(script)


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


# A bridge answering a WebSocket upgrade; then whether the client side of the handshake is loaded.
CLIENT_MODULES = ("channels._ws.dial", "websockets.client", "websockets.uri")
UPGRADED = f"""
import base64, json, os, sys
import trio
from bridge import ChildSpec, ServeConfig, open_bridge

async def main():
    child = ChildSpec(argv=[sys.executable, "-m", "bridge.example_server"])
    config = ServeConfig(listen=["ws://127.0.0.1:0/mcp"], child=child, child_mode="per-connection")
    async with open_bridge(config) as bridge:
        port = int(bridge.addresses[0].rsplit(":", 1)[1].split("/")[0])
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        key = base64.b64encode(os.urandom(16)).decode()
        await stream.send_all(
            f"GET /mcp HTTP/1.1\\r\\nHost: 127.0.0.1:{{port}}\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\n"
            f"Sec-WebSocket-Key: {{key}}\\r\\nSec-WebSocket-Version: 13\\r\\n\\r\\n".encode()
        )
        head = b""
        while b"\\r\\n\\r\\n" not in head:
            head += await stream.receive_some()
        await stream.aclose()
    return head.split(b"\\r\\n")[0].decode()

status = trio.run(main)
print(json.dumps([status, sorted(m for m in {CLIENT_MODULES!r} if m in sys.modules)]))
"""


async def test_a_bridge_answering_websocket_upgrades_loads_no_client_side_of_the_handshake() -> None:
    assert await lines_of(UPGRADED) == [["HTTP/1.1 101 Switching Protocols", []]]
