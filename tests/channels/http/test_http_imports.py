"""What the HTTP room imports: its client (and h11, which only the client uses) loads on first use, and
OAuth's verifier only for a listener given OAuth settings, TLS's modules only for ``https://``, and
``decimal`` only to compare a numeric argument with its header.

Each check runs in a fresh interpreter (this one has long imported everything) and reads its
``sys.modules``, as tests/bridge/cli/test_cli_imports.py does.
"""

from __future__ import annotations

import trio

from conftest import python_json_lines

TIMEOUT = 30  # seconds: one interpreter start-up and the HTTP room's imports, on a loaded CI machine

# What only an HTTP client needs.
CLIENT_ONLY = ("h11", "channels._http.client", "channels._mcp.client")

# OAuth's verifier and the HTTP listener's check of access tokens.
OAUTH_ONLY = ("channels._oauth", "channels._http.server.oauth")

# What only https:// needs.
TLS_ONLY = ("channels._core.tlscontext", "channels._core.tlsstream")

# What only a 2026-07-28 request mirroring a numeric argument in a header needs (channels/_mcp/modern.py).
NUMERIC_HEADERS_ONLY = ("decimal",)

# An HTTP listener opened and closed, the modules loaded; then the client's public name.
LISTENING = f"""
import json, sys
import trio
from channels import HttpAddress, ListenOptions

def loaded():
    return sorted(w for w in {CLIENT_ONLY + OAUTH_ONLY + TLS_ONLY + NUMERIC_HEADERS_ONLY!r} if any(m == w or m.startswith(w + ".") for m in sys.modules))

async def main():
    for listener in await HttpAddress.parse("http://127.0.0.1:0/mcp").listen(ListenOptions()):
        await listener.aclose()

trio.run(main)
print(json.dumps(loaded()))
from channels import HttpClientChannel
print(json.dumps([HttpClientChannel.__name__, loaded()]))
"""


async def test_an_http_listener_loads_no_client_or_oauth_module_until_one_is_asked_for() -> None:
    with trio.fail_after(TIMEOUT):
        serving, (name, after) = await python_json_lines(LISTENING)
    assert serving == []
    assert name == "HttpClientChannel"
    assert set(after) >= {"channels._http.client", "channels._mcp.client", "h11"}
