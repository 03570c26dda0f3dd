"""OAuth end to end: the bridge process, a real authorization server and the official SDK client.

    SDK Client + ClientCredentialsOAuthProvider --401--> mcp-bridge --oauth-issuer ... -- child
        --> RFC 9728 metadata (from the challenge) --> RFC 8414 metadata --> token (resource=...)
        --> the call again, with the token

Nothing is written against the bridge: the client's OAuth flow is the SDK's own, the authorization
server is oidc-provider (:mod:`oidc`), the bridge is ``python -m bridge`` with its command-line
options. The child records its environment and every line it reads, so the test can check that
the client's token never reaches it; the tap (``--tap``) must name the caller, never the token.
"""

from __future__ import annotations

import base64
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import trio
from mcp.client import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp.types import TextContent
from oidc import authorization_server

from conftest import REPO, bridge_process, poll
from rawhttp import post

TIMEOUT = 60  # the provider, the bridge and its child start; a discovery and a few calls
SCOPE = "mcp:tools"
EXAMPLE = str(REPO / "bridge" / "example_server")


class MemoryStorage:
    """The SDK's ``TokenStorage``, in memory: the test reads the token the flow obtained."""

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


def recording_child(folder: Path) -> list[str]:
    """The example server, after writing its environment and with every line it reads copied."""
    script = f'env > "{folder}/env.txt"; tee "{folder}/stdin.txt" | exec "{sys.executable}" "{EXAMPLE}"'
    return ["sh", "-c", script]


async def test_the_sdks_client_credentials_flow_discovers_the_issuer_from_the_401_and_calls_a_tool(
    tmp_path: Path,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as issuer:
            argv = [
                "--listen",
                "http://127.0.0.1:0/mcp",
                "--oauth-issuer",
                issuer.issuer,
                "--oauth-scope",
                SCOPE,
                "--tap",
                str(tmp_path / "tap.jsonl"),
            ]
            async with bridge_process(*argv, "--", *recording_child(tmp_path)) as bridge:
                url = bridge.addresses[0]
                storage = MemoryStorage()
                provider = ClientCredentialsOAuthProvider(
                    server_url=url,
                    storage=storage,
                    client_id=issuer.jwt_client.client_id,
                    client_secret=issuer.jwt_client.client_secret,
                    scope=SCOPE,
                    issuer=issuer.issuer,
                )
                async with (
                    httpx2.AsyncClient(auth=provider) as http,
                    Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
                ):
                    result = await client.call_tool("echo", {"text": "through OAuth"})
                    assert [b.text for b in result.content if isinstance(b, TextContent)] == ["through OAuth"]
                assert storage.tokens is not None
                token = storage.tokens.access_token
                subject = issuer.jwt_client.client_id
                await poll(lambda: any(f"oauth sub={subject}" in line for line in bridge.stderr_lines))
    # The token was issued for the bridge's own URI, which the metadata named as the resource.
    claims = issuer_claims(token)
    assert claims["aud"] == url and SCOPE in claims["scope"].split()
    # The access log names the principal, never the token; the child never saw the token.
    log = bridge.log()
    assert "refused: OAuth missing" in log  # the flow began with the 401 challenge
    assert f"auth='oauth sub={subject} client={subject}'" in log
    assert token not in log
    # So does the tap: the call's records name the principal, and no record holds the token.
    tapped = [json.loads(line) for line in (tmp_path / "tap.jsonl").read_text().splitlines()]
    calls = [record for record in tapped if record["message"].get("method") == "tools/call"]
    assert calls and all(f"auth='oauth sub={subject} client={subject}'" in call["client"] for call in calls)
    assert token not in (tmp_path / "tap.jsonl").read_text()
    for recorded in ("env.txt", "stdin.txt"):
        text = (tmp_path / recorded).read_text()
        assert token not in text and token.split(".")[2] not in text and "Bearer" not in text, recorded


def issuer_claims(token: str) -> dict[str, Any]:
    """The (already verified) claims of a JWT access token."""
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))  # type: ignore[no-any-return]


async def test_the_bridge_process_refuses_bad_tokens_with_their_status_challenge_and_log_line() -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as issuer:
            argv = [
                "--listen",
                "http://127.0.0.1:0/mcp",
                "--oauth-issuer",
                issuer.issuer,
                "--oauth-scope",
                SCOPE,
            ]
            async with bridge_process(*argv, "--", sys.executable, EXAMPLE) as bridge:
                url = bridge.addresses[0]
                port = int(url.rsplit(":", 1)[1].split("/")[0])
                now = int(time.time())
                cases = [
                    ("missing", None, 401),
                    (
                        "expired",
                        issuer.craft(url, [SCOPE], claims={"iat": now - 7200, "exp": now - 3600}),
                        401,
                    ),
                    ("wrong-audience", await issuer.token("https://other.example/mcp", [SCOPE]), 401),
                    ("insufficient-scope", await issuer.token(url, ["mcp:other"]), 403),
                ]
                initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
                for outcome, token, status in cases:
                    headers = [("authorization", f"Bearer {token}")] if token else []
                    response = await post(port, initialize, headers)
                    assert response.status == status, (outcome, response)
                    challenge = response.header("www-authenticate") or ""
                    assert (
                        f'resource_metadata="{url.replace("/mcp", "")}/.well-known/oauth-protected-resource/mcp"'
                        in challenge
                    )
                    assert response.json()["error"]["data"]["reason"] == outcome

                    def logged(outcome: str = outcome) -> bool:
                        return any(f"refused: OAuth {outcome}:" in line for line in bridge.stderr_lines)

                    await poll(logged)
                assert "Traceback" not in bridge.log()
