"""OAuth access tokens on the HTTP listener, against a real authorization server (oidc-provider).

A daemon in this process serves the example server over ``http://127.0.0.1:0/mcp`` with
``ListenOptions.oauth`` naming the provider of :mod:`oidc`; the client is :mod:`rawhttp`, so each
status, challenge and body is checked as sent. Bad tokens are crafted with the issuer's real
private key (expired, wrong audience...), or forged (``alg: none``, HS256 with the public key).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
from oidc import AuthorizationServer, authorization_server, make_key

from bridge import Daemon
from channels import ListenOptions, OAuthSettings, TokenSet

from conftest import call, example_server, running_bridge
from rawhttp import RawHttp, post

TIMEOUT = 30  # the provider's start (~0.3 s) and a few dozen requests
SCOPE = "mcp:tools"
STATIC = "static-token-for-the-oauth-tests-9f3k"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


@attrs.define
class Bridge:
    port: int
    daemon: Daemon

    @property
    def audience(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def metadata_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/.well-known/oauth-protected-resource/mcp"


@asynccontextmanager
async def oauth_bridge(issuer: AuthorizationServer, **settings: Any) -> AsyncIterator[Bridge]:
    oauth = OAuthSettings(issuers=[issuer.issuer], **settings)
    tokens = TokenSet.of([(STATIC, "static test token")])
    async with running_bridge(
        example_server(), ["http://127.0.0.1:0/mcp"], listen_options=ListenOptions(oauth=oauth, tokens=tokens)
    ) as daemon:
        port = int(daemon.addresses[0].rsplit(":", 1)[1].split("/")[0])
        yield Bridge(port, daemon)


def bearer(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


def b64(data: bytes | dict[str, Any]) -> str:
    raw = json.dumps(data).encode() if isinstance(data, dict) else data
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def forged(issuer: AuthorizationServer, audience: str, alg: str) -> str:
    """A token signed with ``alg: none``, or HS256 keyed with the issuer's public key (PEM)."""
    now = int(time.time())
    claims = {"iss": issuer.issuer, "sub": "mallory", "aud": audience, "scope": SCOPE, "exp": now + 600}
    head = b64({"alg": alg, "typ": "at+jwt", "kid": issuer.signing_key.kid})
    signing_input = f"{head}.{b64(claims)}"
    if alg == "none":
        return signing_input + "."
    public_pem = issuer.signing_key.as_pem(private=False)
    return f"{signing_input}.{b64(hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest())}"


def tampered(token: str) -> str:
    """``token`` with its payload changed (another subject), its signature kept."""
    head, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["sub"] = "someone-else"
    return f"{head}.{b64(claims)}.{signature}"


async def bad_tokens(issuer: AuthorizationServer, audience: str) -> dict[str, str | None]:
    now = int(time.time())
    good = await issuer.token(audience, [SCOPE])
    stranger = make_key("RS256", kid="never-published")
    return {
        "missing": None,
        "malformed": "abc.def.ghi",
        "expired": issuer.craft(audience, [SCOPE], claims={"iat": now - 7200, "exp": now - 3600}),
        "not-yet-valid": issuer.craft(audience, [SCOPE], claims={"nbf": now + 3600}),
        "wrong-audience": await issuer.token("https://other.example/mcp", [SCOPE]),
        "wrong-issuer": issuer.craft(audience, [SCOPE], claims={"iss": "https://evil.example"}),
        "alg-none": forged(issuer, audience, "none"),
        "hs256-public-key": forged(issuer, audience, "HS256"),
        "unknown-kid": issuer.craft(audience, [SCOPE], key=stranger),
        "tampered": tampered(good),
        "oversized": "a" * 9000,
        "insufficient-scope": await issuer.token(audience, ["mcp:other"]),
    }


# What each kind gets: status, the challenge's error, the outcome in data.reason and the log.
EXPECTED = {
    "missing": (401, None, "missing"),
    "malformed": (401, "invalid_token", "malformed"),
    "expired": (401, "invalid_token", "expired"),
    "not-yet-valid": (401, "invalid_token", "not-yet-valid"),
    "wrong-audience": (401, "invalid_token", "wrong-audience"),
    "wrong-issuer": (401, "invalid_token", "wrong-issuer"),
    "alg-none": (401, "invalid_token", "bad-algorithm"),
    "hs256-public-key": (401, "invalid_token", "bad-algorithm"),
    "unknown-kid": (401, "invalid_token", "unknown-key"),
    "tampered": (401, "invalid_token", "bad-signature"),
    "oversized": (401, "invalid_token", "oversized"),
    "insufficient-scope": (403, "insufficient_scope", "insufficient-scope"),
}


async def test_a_token_from_the_issuer_opens_a_session_and_calls_a_tool_as_its_principal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as issuer, oauth_bridge(issuer, scopes=[SCOPE]) as bridge:
            token = await issuer.token(bridge.audience, [SCOPE])
            opened = await post(bridge.port, INITIALIZE, bearer(token))
            assert opened.status == 200, opened
            session = [("mcp-session-id", opened.header("mcp-session-id") or ""), *bearer(token)]
            session.append(("mcp-protocol-version", "2025-06-18"))
            notified = await post(
                bridge.port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session
            )
            assert notified.status == 202
            reply = (await post(bridge.port, call(2, "echo", text="hi"), session)).messages()[0]
            assert reply["result"]["content"][0]["text"] == "hi"
    assert f"oauth sub={issuer.jwt_client.client_id} client={issuer.jwt_client.client_id}" in caplog.text
    assert token not in caplog.text


async def test_each_bad_token_kind_gets_its_status_challenge_reason_and_one_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="channels.http")
    table = []
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as issuer, oauth_bridge(issuer, scopes=[SCOPE]) as bridge:
            assert (
                await post(bridge.port, INITIALIZE, bearer(await issuer.token(bridge.audience, [SCOPE])))
            ).status == 200
            for kind, token in (await bad_tokens(issuer, bridge.audience)).items():
                caplog.clear()
                response = await post(bridge.port, INITIALIZE, bearer(token) if token else [])
                status, error, outcome = EXPECTED[kind]
                challenge = response.header("www-authenticate") or ""
                refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
                table.append((kind, response.status, challenge, refusals))
                assert response.status == status, (kind, response)
                assert challenge.startswith("Bearer "), (kind, challenge)
                assert f'resource_metadata="{bridge.metadata_url}"' in challenge, (kind, challenge)
                assert (f'error="{error}"' in challenge) if error else ("error=" not in challenge), (
                    kind,
                    challenge,
                )
                if error == "insufficient_scope":
                    assert f'scope="{SCOPE}"' in challenge
                body = response.json()
                assert body["error"]["data"]["reason"] == outcome, (kind, body)
                # Refused on its head, its body never read (id null); an unknown kid needs a fetch,
                # finished once the body is in: its id is named.
                assert body["id"] == (1 if kind == "unknown-kid" else None), (kind, body)
                assert len(refusals) == 1 and f"OAuth {outcome}:" in refusals[0], (kind, refusals)
                assert token is None or token[:40] not in caplog.text
            metrics = bridge.daemon.statistics().oauth_tokens
    for row in table:
        print("|", " | ".join(str(cell) for cell in row), "|")
    listener = f"http://127.0.0.1:{bridge.port}/mcp"
    assert metrics[listener, "accepted"] == 1
    assert metrics[listener, "expired"] == 1 and metrics[listener, "missing"] == 1
    assert metrics[listener, "bad-algorithm"] == 2


async def test_the_query_string_never_carries_a_token() -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as issuer, oauth_bridge(issuer) as bridge:
            token = await issuer.token(bridge.audience)
            response = await post(bridge.port, INITIALIZE, path=f"/mcp?access_token={token}")
            assert response.status == 401 and response.json()["error"]["data"]["reason"] == "missing"


async def test_a_static_token_still_works_beside_oauth() -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as issuer, oauth_bridge(issuer, scopes=[SCOPE]) as bridge:
            assert (await post(bridge.port, INITIALIZE, bearer(STATIC))).status == 200


async def test_the_generated_metadata_document_is_served_unauthenticated_at_both_well_known_paths() -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as issuer, oauth_bridge(issuer, scopes=[SCOPE]) as bridge:
            client = await RawHttp.open(bridge.port)
            for path in (
                "/.well-known/oauth-protected-resource",
                "/.well-known/oauth-protected-resource/mcp",
            ):
                response = await client.request("GET", path)
                assert response.status == 200, (path, response)
                assert response.json() == {
                    "resource": bridge.audience,
                    "authorization_servers": [issuer.issuer],
                    "scopes_supported": [SCOPE],
                    "bearer_methods_supported": ["header"],
                }
            await client.aclose()


async def test_a_session_answers_only_the_principal_that_opened_it() -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as issuer, oauth_bridge(issuer) as bridge:
            opener = await issuer.token(bridge.audience, [SCOPE])
            opened = await post(bridge.port, INITIALIZE, bearer(opener))
            session = [
                ("mcp-session-id", opened.header("mcp-session-id") or ""),
                ("mcp-protocol-version", "2025-06-18"),
            ]
            ping = {"jsonrpc": "2.0", "id": 5, "method": "ping"}
            # The same client, but other scopes: another principal, which the session does not know.
            other = await issuer.token(bridge.audience, ["mcp:other"])
            refused = await post(bridge.port, ping, [*session, *bearer(other)])
            assert refused.status == 404 and refused.json()["error"]["data"]["reason"] == "unknown-session"
            assert (await post(bridge.port, ping, [*session, *bearer(STATIC)])).status == 404
            # And a session never stands in for a token: every request is verified.
            assert (await post(bridge.port, ping, session)).status == 401
            again = await issuer.token(bridge.audience, [SCOPE])  # a new token for the same principal
            assert (await post(bridge.port, ping, [*session, *bearer(again)])).status == 200


async def test_a_key_rotation_at_the_issuer_is_followed_on_the_first_unknown_kid() -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as issuer, oauth_bridge(issuer) as bridge:
            assert (
                await post(bridge.port, INITIALIZE, bearer(await issuer.token(bridge.audience)))
            ).status == 200
            await issuer.rotate()
            rotated = await issuer.token(bridge.audience)
            assert (await post(bridge.port, INITIALIZE, bearer(rotated))).status == 200


async def test_an_issuer_down_from_the_start_gets_503_with_retry_after_and_no_hang(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as issuer:
            token = issuer.craft(f"http://127.0.0.1:{0}/mcp")  # any JWT naming the issuer will do
            await issuer.stop()
            async with oauth_bridge(issuer) as bridge:
                response = await post(bridge.port, INITIALIZE, bearer(token))
                assert response.status == 503, response
                assert response.header("retry-after") == "10"
                assert (
                    response.header("www-authenticate") == f'Bearer resource_metadata="{bridge.metadata_url}"'
                )
                body = response.json()
                # Refused on its head when the background fetch failed first, else once its body
                # is in (then naming its id): either way at once, and the same refusal.
                assert body["error"]["data"]["reason"] == "issuer-unreachable" and body["id"] in (None, 1)
    assert "OAuth issuer-unreachable" in caplog.text
    assert "Traceback" not in caplog.text
