"""Call a tool through a bridge that takes OAuth access tokens, as a machine client would.

The official MCP Python SDK's client-credentials flow does the whole discovery: its first request
gets ``401`` with ``WWW-Authenticate: Bearer resource_metadata="..."``; it reads that protected-
resource metadata (RFC 9728) for the authorization server and the scopes, the server's metadata
(RFC 8414 or OpenID discovery) for its token endpoint, asks that for a token for the MCP URL
(``resource=``, RFC 8707) with the client's id and secret, and sends the request again with it.
``issuer`` pins the authorization server the credentials are sent to: the flow stops if the
metadata points anywhere else. See docs/deploy/oauth.md.

    MCP_URL=https://mcp.example.com/mcp OAUTH_ISSUER=https://auth.example.com \\
    OAUTH_CLIENT_ID=mcp-app OAUTH_CLIENT_SECRET=... python3 examples/oauth_client.py echo '{"text": "hi"}'
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import httpx2
import trio
from mcp import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp.types import TextContent

# The SDK's own defaults for MCP over HTTP: 30 s to connect or write, 300 s between reads of an
# event stream (a long tool call sends keep-alives only).
TIMEOUT = httpx2.Timeout(30, read=300)


class MemoryTokenStorage:
    """Where the SDK keeps the token between requests: memory, for one run (a long-lived client
    would keep it until it expires, and the SDK asks for a new one on the next 401)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


async def call_tool(
    url: str,
    issuer: str,
    client_id: str,
    client_secret: str,
    tool: str,
    arguments: dict[str, Any],
    *,
    transport: httpx2.AsyncBaseTransport | None = None,
) -> list[str]:
    """The text blocks of ``tool``'s result, called at ``url`` with a token from ``issuer``.

    ``transport`` is httpx2's (default: the system's resolver and CA store); the tests give one
    that trusts their own CA.
    """
    auth = ClientCredentialsOAuthProvider(
        server_url=url,
        storage=MemoryTokenStorage(),
        client_id=client_id,
        client_secret=client_secret,
        issuer=issuer,
    )
    async with (
        httpx2.AsyncClient(auth=auth, timeout=TIMEOUT, transport=transport) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {result.content}")
    return [block.text for block in result.content if isinstance(block, TextContent)]


def main() -> None:
    tool, arguments = sys.argv[1], json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    texts = trio.run(
        call_tool,
        os.environ["MCP_URL"],
        os.environ["OAUTH_ISSUER"],
        os.environ["OAUTH_CLIENT_ID"],
        os.environ["OAUTH_CLIENT_SECRET"],
        tool,
        arguments,
    )
    print("\n".join(texts))


if __name__ == "__main__":
    main()
