"""What the WebSocket room imports: OAuth's machinery only for a listener given OAuth settings, TLS's
only for ``wss://`` (websockets' needless ``importlib.metadata``: tests/bridge/cli/test_lazy_imports.py).

Each check runs in a fresh interpreter (this one has long imported everything) and reads its
``sys.modules``, as tests/bridge/cli/test_cli_imports.py does.
"""

from __future__ import annotations

import json

import trio

from conftest import python_output

TIMEOUT = 30  # seconds: one interpreter start-up and the WebSocket room's imports, on a loaded CI machine


async def lines_of(script: str) -> list[object]:
    with trio.fail_after(TIMEOUT):
        output = await python_output(script)
    return [json.loads(line) for line in output.splitlines()]


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
