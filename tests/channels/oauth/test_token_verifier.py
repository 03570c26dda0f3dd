"""The TokenVerifier against a real authorization server (oidc-provider, tests/oidc.py) on loopback.

Discovery, the JWKS, key rotation, introspection and an issuer that goes away are all real: the
provider is a separate Node process, and the verifier reaches it over HTTP with its own client.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
from joserfc import jwt
from joserfc.jwk import RSAKey
from oidc import AuthorizationServer, authorization_server

from channels import Accepted, Denied, OAuthSettings, TokenVerifier
from channels._oauth import fetch

AUDIENCE = "http://127.0.0.1:7302/mcp"
TIMEOUT = 30  # a provider start (~0.3 s), a few token requests and fetches; generous for a loaded CI


@asynccontextmanager
async def running(settings: OAuthSettings) -> AsyncIterator[TokenVerifier]:
    verifier = TokenVerifier(settings, (AUDIENCE,))
    async with trio.open_nursery() as nursery:
        await nursery.start(verifier.run)
        yield verifier
        nursery.cancel_scope.cancel()


def settings_for(server: AuthorizationServer, **overrides: object) -> OAuthSettings:
    values: dict[str, object] = {"issuers": [server.issuer], "scopes": ["mcp:read"]}
    values.update(overrides)
    return OAuthSettings(**values)  # type: ignore[arg-type]


def outcome(verdict: Accepted | Denied | None) -> str | None:
    return None if verdict is None else verdict.outcome


async def test_a_jwt_of_the_real_provider_is_accepted_then_decided_from_cache_without_io() -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as server, running(settings_for(server)) as verifier:
            token = await server.token(AUDIENCE, ["mcp:read"])
            verdict = await verifier.verify(token)
            assert isinstance(verdict, Accepted), verdict
            assert verdict.principal.client_id == server.jwt_client.client_id
            assert verdict.principal.scopes == {"mcp:read"}
            assert verifier.verify_now(token) == verdict
            assert verifier.outcomes["accepted"] == 2


async def test_discovery_falls_back_to_openid_configuration_under_an_issuer_path() -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server(path="/tenant", rfc8414=False) as server:
            async with running(settings_for(server)) as verifier:
                token = await server.token(AUDIENCE, ["mcp:read"])
                assert outcome(await verifier.verify(token)) == "accepted"


async def test_every_bad_token_kind_gets_its_own_refusal_with_the_issuers_real_key() -> None:
    other = RSAKey.generate_key(2048, parameters={"kid": "stranger", "alg": "RS256"}, private=True)
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as server, running(settings_for(server)) as verifier:
            now = int(time.time())
            good = server.craft(AUDIENCE, ["mcp:read"])
            head, _, signature = good.split(".")
            tampered = f"{head}.{server.craft(AUDIENCE, ['mcp:read', 'mcp:admin']).split('.')[1]}.{signature}"
            cases = {
                "accepted": good,
                "expired": server.craft(AUDIENCE, ["mcp:read"], claims={"exp": now - 600}),
                "not-yet-valid": server.craft(AUDIENCE, ["mcp:read"], claims={"nbf": now + 600}),
                "wrong-audience": server.craft("http://127.0.0.1:9/other", ["mcp:read"]),
                "wrong-issuer": server.craft(AUDIENCE, ["mcp:read"], claims={"iss": "https://evil.example"}),
                "bad-signature": tampered,
                "insufficient-scope": server.craft(AUDIENCE, ["mcp:write"]),
                "unknown-key": server.craft(AUDIENCE, ["mcp:read"], key=other),
                "malformed": "not/a+jwt but spaces",
            }
            got = {expected: outcome(await verifier.verify(token)) for expected, token in cases.items()}
            assert got == {expected: expected for expected in cases}
            assert verifier.outcomes["unknown-key"] == 1 and verifier.outcomes["expired"] == 1


async def test_a_rotated_key_is_fetched_on_its_unknown_kid_and_accepted() -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as server, running(settings_for(server)) as verifier:
            assert outcome(await verifier.verify(await server.token(AUDIENCE, ["mcp:read"]))) == "accepted"
            await server.rotate()
            token = await server.token(AUDIENCE, ["mcp:read"])
            assert verifier.verify_now(token) is None  # an unknown kid: needs a refetch
            assert outcome(await verifier.verify(token)) == "accepted"
            # A second unknown kid within the refetch interval is refused without fetching.
            stranger = RSAKey.generate_key(2048, parameters={"kid": "stranger", "alg": "RS256"}, private=True)
            assert (
                outcome(verifier.verify_now(server.craft(AUDIENCE, ["mcp:read"], key=stranger)))
                == "unknown-key"
            )


async def test_with_the_issuer_down_tokens_signed_with_cached_keys_are_still_accepted() -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as server, running(settings_for(server)) as verifier:
            assert outcome(await verifier.verify(await server.token(AUDIENCE, ["mcp:read"]))) == "accepted"
            await server.stop()
            assert outcome(await verifier.verify(server.craft(AUDIENCE, ["mcp:read"]))) == "accepted"


async def test_with_the_issuer_down_and_no_keys_cached_requests_get_503_without_hanging(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as server:
            token = server.craft(AUDIENCE, ["mcp:read"])
            await server.stop()
            async with running(settings_for(server)) as verifier:
                first = await verifier.verify(token)
                assert isinstance(first, Denied) and (first.status, first.outcome) == (
                    503,
                    "issuer-unreachable",
                )
                # During the backoff the next request is refused at once, with no I/O.
                assert outcome(verifier.verify_now(token)) == "issuer-unreachable"
    warnings = [record for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1 and "503" in warnings[0].getMessage()
    assert token not in caplog.text


async def test_an_issuer_that_accepts_but_never_answers_gives_503_within_the_fetch_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fetch, "TIMEOUT", 0.5)  # the real 5 s would make the test slow, not different

    async def silent(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    with trio.fail_after(TIMEOUT):
        async with authorization_server() as server, trio.open_nursery() as nursery:
            listeners = await nursery.start(trio.serve_tcp, silent, 0)
            port = listeners[0].socket.getsockname()[1]
            issuer = f"http://127.0.0.1:{port}"
            token = server.craft(AUDIENCE, ["mcp:read"], claims={"iss": issuer})
            async with running(OAuthSettings(issuers=[issuer])) as verifier:
                verdict = await verifier.verify(token)
            assert isinstance(verdict, Denied) and verdict.status == 503
            nursery.cancel_scope.cancel()


async def test_an_opaque_token_is_accepted_by_introspection_and_then_served_from_the_cache() -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as server:
            client = server.introspection_client
            settings = settings_for(
                server,
                introspection=server.introspection_endpoint,
                client_id=client.client_id,
                client_secret=client.client_secret,
            )
            async with running(settings) as verifier:
                token = await server.token(AUDIENCE, ["mcp:read"], opaque=True)
                assert verifier.verify_now(token) is None  # needs the introspection endpoint
                verdict = await verifier.verify(token)
                assert isinstance(verdict, Accepted), verdict
                assert verdict.principal.client_id == server.opaque_client.client_id
                assert verifier.verify_now(token) == verdict
                elsewhere = await server.token("http://127.0.0.1:9/other", ["mcp:read"], opaque=True)
                assert outcome(await verifier.verify(elsewhere)) == "wrong-audience"
                unknown = await server.token(AUDIENCE, ["mcp:read"], opaque=True)
                await server.revoke(unknown)
                assert outcome(await verifier.verify(unknown)) == "inactive"
                await server.stop()
                down = await verifier.verify("another-opaque-token-0123456789")
                assert isinstance(down, Denied) and (down.status, down.outcome) == (503, "issuer-unreachable")


async def test_an_opaque_token_without_an_introspection_endpoint_is_malformed() -> None:
    verifier = TokenVerifier(OAuthSettings(issuers=["https://as.example"]), (AUDIENCE,))
    assert outcome(verifier.verify_now("opaque-token-0123456789")) == "malformed"


async def test_verify_outside_the_run_task_is_a_programming_error_not_a_verdict() -> None:
    verifier = TokenVerifier(OAuthSettings(issuers=["https://as.example"]), (AUDIENCE,))
    token = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJodHRwczovL2FzLmV4YW1wbGUifQ.c2ln"
    with pytest.raises(RuntimeError, match="run"):
        await verifier.verify(token)


async def serve_documents(documents: dict[str, bytes], task_status: trio.TaskStatus[int]) -> None:
    """A minimal HTTP/1.1 server on loopback answering GET PATH with documents[PATH] (404 else)."""

    async def answer(stream: trio.SocketStream) -> None:
        request = b""
        while b"\r\n\r\n" not in request and (chunk := await stream.receive_some()):
            request += chunk
        path = request.split(b" ")[1].decode() if request.count(b" ") >= 2 else "/"
        body = documents.get(path)
        status = b"200 OK" if body is not None else b"404 Not Found"
        body = body if body is not None else b"{}"
        head = b"HTTP/1.1 %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
        await stream.send_all(head % (status, len(body)) + body)
        await stream.aclose()

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])
    await trio.serve_listeners(answer, listeners)


@pytest.mark.parametrize(
    ("jwks_uri", "jwks", "reason"),
    [
        ("{issuer}/jwks", b'{"keys": [' + b" " * fetch.MAX_BODY_BYTES + b"]}", "larger than"),
        ("http://as.example/jwks", b'{"keys": []}', "not https"),
    ],
    ids=["oversized-key-set", "non-loopback-http-jwks-uri"],
)
async def test_a_key_set_too_large_or_at_an_unsafe_url_is_not_used(
    jwks_uri: str, jwks: bytes, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    documents: dict[str, bytes] = {}
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(serve_documents, documents)
            issuer = f"http://127.0.0.1:{port}"
            metadata = {"issuer": issuer, "jwks_uri": jwks_uri.format(issuer=issuer)}
            documents["/.well-known/oauth-authorization-server"] = json.dumps(metadata).encode()
            documents["/jwks"] = jwks
            token = server_less_token(issuer)
            async with running(OAuthSettings(issuers=[issuer])) as verifier:
                verdict = await verifier.verify(token)
            assert isinstance(verdict, Denied) and verdict.outcome == "issuer-unreachable"
            nursery.cancel_scope.cancel()
    assert reason in caplog.text


async def test_metadata_that_names_another_issuer_is_not_trusted(caplog: pytest.LogCaptureFixture) -> None:
    documents: dict[str, bytes] = {}
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(serve_documents, documents)
            issuer = f"http://127.0.0.1:{port}"
            evil = {"issuer": "https://evil.example", "jwks_uri": f"{issuer}/jwks"}
            for path in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
                documents[path] = json.dumps(evil).encode()
            documents["/jwks"] = json.dumps({"keys": [SIGNER.as_dict(private=False)]}).encode()
            async with running(OAuthSettings(issuers=[issuer])) as verifier:
                verdict = await verifier.verify(server_less_token(issuer))
            assert isinstance(verdict, Denied) and verdict.outcome == "issuer-unreachable"
            nursery.cancel_scope.cancel()
    assert "names another issuer" in caplog.text


SIGNER = RSAKey.generate_key(2048, parameters={"kid": "local", "alg": "RS256"}, private=True)


def server_less_token(issuer: str) -> str:
    now = int(time.time())
    body = {"iss": issuer, "aud": AUDIENCE, "sub": "s", "exp": now + 60, "iat": now}
    return jwt.encode({"alg": "RS256", "kid": "local"}, body, SIGNER)
