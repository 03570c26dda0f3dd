"""The OAuth tests' authorization server (tests/oidc.py, oidc-provider) issues what they rely on.

The verifier's tests take its tokens, metadata and keys as the truth: a JWT for the resource asked
for with the scopes asked for, opaque tokens that introspection reports, discovery documents at the
places RFC 8414 and OpenID Connect name, key rotation with the old key still published, and an
issuer that can go down and come back on its port. Each is checked here against the provider's
published documents, independently of channels/_oauth.
"""

from __future__ import annotations

import time
from typing import Any

import httpx2
import pytest
import trio
from joserfc import jwt
from joserfc.jwk import KeySet
from oidc import AuthorizationServer, authorization_server

TIMEOUT = 30  # seconds: a provider start (~0.3 s idle, a few s on a loaded machine) and a few requests
RESOURCE = "http://127.0.0.1:8080/mcp"  # the bridge's audience in these tests


async def get_json(url: str) -> Any:
    async with httpx2.AsyncClient() as http:
        response = await http.get(url)
    assert response.status_code == 200, f"GET {url}: {response.status_code} {response.text}"
    return response.json()


async def published_keys(server: AuthorizationServer) -> KeySet:
    """The public keys at the provider's jwks_uri, as a resource server would fetch them."""
    document = await get_json(server.jwks_uri)
    assert all("d" not in key for key in document["keys"])  # public halves only
    return KeySet.import_key_set(document)


async def test_a_jwt_access_token_names_the_resource_as_audience_and_carries_the_scopes_asked_for() -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as server:
            token = await server.token(RESOURCE, ["mcp:tools", "mcp:admin"])
            decoded = jwt.decode(token, await published_keys(server), algorithms=["RS256"])
            other = jwt.decode(await server.token("https://elsewhere.example/mcp"), server.keys)
    assert decoded.header["typ"] == "at+jwt"
    assert decoded.header["kid"] == server.signing_key.kid
    claims = decoded.claims
    assert claims["iss"] == server.issuer
    assert claims["aud"] == RESOURCE
    assert claims["scope"] == "mcp:tools mcp:admin"
    assert claims["client_id"] == server.jwt_client.client_id
    assert claims["iat"] <= time.time() + 5 < claims["exp"]
    assert other.claims["aud"] == "https://elsewhere.example/mcp"  # any resource: wrong-audience tokens
    assert "scope" not in other.claims


async def test_an_opaque_token_is_active_at_introspection_with_its_audience_and_scope_until_revoked() -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as server:
            token = await server.token(RESOURCE, ["mcp:tools"], opaque=True)
            active = await server.introspect(token)
            await server.revoke(token)
            revoked = await server.introspect(token)
            unknown = await server.introspect("not-a-token-it-issued")
    assert token.count(".") == 0  # not a JWS: a verifier must introspect it
    assert active["active"] is True
    assert active["aud"] == RESOURCE
    assert active["scope"] == "mcp:tools"
    assert active["iss"] == server.issuer
    assert active["client_id"] == server.opaque_client.client_id
    assert active["exp"] > time.time()
    assert revoked == {"active": False}
    assert unknown == {"active": False}


async def test_introspection_needs_the_resource_servers_client_secret() -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as server:
            token = await server.token(RESOURCE, opaque=True)
            async with httpx2.AsyncClient() as http:
                response = await http.post(
                    server.introspection_endpoint,
                    data={"token": token},
                    auth=(server.introspection_client.client_id, "wrong secret"),
                )
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"


@pytest.mark.parametrize("path", ["", "/tenant"])
async def test_discovery_is_served_where_rfc_8414_and_openid_connect_put_it(path: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server(path=path) as server:
            origin = f"http://127.0.0.1:{server.port}"
            rfc8414 = await get_json(f"{origin}/.well-known/oauth-authorization-server{path}")
            openid = await get_json(f"{server.issuer}/.well-known/openid-configuration")
            await get_json(openid["jwks_uri"])
            token = await server.token(RESOURCE)  # the endpoints work under the path too
            async with httpx2.AsyncClient() as http:
                appended = await http.get(f"{server.issuer}/.well-known/oauth-authorization-server")
    assert server.issuer == origin + path
    assert rfc8414 == openid
    assert appended.status_code == (404 if path else 200)  # RFC 8414 §3: before the path, never after
    assert openid["issuer"] == server.issuer
    assert openid["token_endpoint"] == server.token_endpoint
    assert openid["introspection_endpoint"] == server.introspection_endpoint
    assert openid["jwks_uri"] == server.jwks_uri
    assert "client_credentials" in openid["grant_types_supported"]
    assert jwt.decode(token, server.keys).claims["iss"] == server.issuer


async def test_without_rfc_8414_only_the_openid_document_is_served() -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server(rfc8414=False) as server:
            openid = await get_json(f"{server.issuer}/.well-known/openid-configuration")
            async with httpx2.AsyncClient() as http:
                response = await http.get(f"{server.issuer}/.well-known/oauth-authorization-server")
    assert openid["issuer"] == server.issuer
    assert response.status_code == 404


async def test_after_a_rotation_tokens_are_signed_with_the_new_key_and_the_old_one_stays_published() -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as server:
            old = server.signing_key
            opaque = await server.token(RESOURCE, opaque=True)
            new = await server.rotate()
            token = await server.token(RESOURCE)
            published = await published_keys(server)
            still_active = await server.introspect(opaque)
            await server.rotate(keep_old=False)
            after_retirement = [key.kid for key in (await published_keys(server)).keys]
    assert jwt.decode(token, published).header["kid"] == new.kid != old.kid
    assert [key.kid for key in published.keys] == [new.kid, old.kid]
    assert still_active["active"] is True  # opaque tokens outlive a rotation
    assert after_retirement == [server.signing_key.kid]


async def test_a_stopped_issuer_refuses_connections_and_serves_again_on_its_port_after_start() -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as server:
            token = await server.token(RESOURCE)
            await server.stop()
            with pytest.raises(httpx2.ConnectError):
                await get_json(server.jwks_uri)
            await server.start()
            keys = await published_keys(server)
    assert jwt.decode(token, keys).claims["aud"] == RESOURCE


async def test_a_crafted_token_is_signed_with_the_issuers_real_key_and_carries_the_claims_it_was_given() -> (
    None
):
    with trio.fail_after(TIMEOUT):
        async with authorization_server(alg="ES256") as server:
            issued = jwt.decode(await server.token(RESOURCE, ["mcp:tools"]), server.keys).claims
            crafted = server.craft(RESOURCE, ["mcp:tools"], claims={"exp": 1000, "nbf": None})
            keys = await published_keys(server)
    decoded = jwt.decode(crafted, keys, algorithms=["ES256"])
    assert decoded.header == {"typ": "at+jwt", "alg": "ES256", "kid": server.signing_key.kid}
    assert decoded.claims["exp"] == 1000  # expired: the verifier, not the signature, must refuse it
    assert set(decoded.claims) == set(issued)  # the same members as the provider's own tokens
