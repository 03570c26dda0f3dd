"""Reading and checking JWT access tokens, the key schedule, discovery URLs and introspection answers (sans-IO).

Keys are made at test time with joserfc; every bad token kind of issue 16 gets its own verdict.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import ECKey, Key, RSAKey

from channels import Accepted, Denied, OAuthSettings
from channels._oauth.discovery import DiscoveryError, check_url, jwks_uri, metadata_urls, signing_keys
from channels._oauth.introspection import CACHE_ENTRIES, AnswerCache, judge
from channels._oauth.keys import FETCH, REFETCH_INTERVAL, IssuerKeys
from channels._oauth.token import MAX_TOKEN_BYTES, Opaque, Unverified, check, read

ISSUER = "https://as.example"
AUDIENCE = "https://mcp.example/mcp"
SETTINGS = OAuthSettings(issuers=[ISSUER], scopes=["mcp:read"])
RSA = RSAKey.generate_key(2048, parameters={"kid": "rsa-1"}, private=True)
EC = ECKey.generate_key("P-256", parameters={"kid": "ec-1"}, private=True)


def public(key: Key) -> Key:
    return type(key).import_key(key.as_dict(private=False))


def claims(**overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    base = {
        "iss": ISSUER,
        "sub": "alice",
        "aud": AUDIENCE,
        "client_id": "app",
        "scope": "mcp:read mcp:write",
        "iat": now,
        "exp": now + 300,
    }
    base.update(overrides)
    return {name: value for name, value in base.items() if value is not None}


def sign(body: dict[str, Any], key: Key = RSA, alg: str = "RS256", **header: Any) -> str:
    return jwt.encode({"alg": alg, "kid": key.kid, **header}, body, key, algorithms=[alg])


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def handmade(header: dict[str, Any], body: dict[str, Any], secret: bytes | None) -> str:
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(body).encode())}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest() if secret else b""
    return f"{signing_input}.{b64(signature)}"


def verdict(token: str, keys: tuple[Key, ...] = (public(RSA),), settings: OAuthSettings = SETTINGS) -> Any:
    parsed = read(token, settings)
    if not isinstance(parsed, Unverified):
        return parsed
    return check(parsed, keys, settings, (AUDIENCE,), time.time())


def outcome(token: str, **kwargs: Any) -> str:
    result = verdict(token, **kwargs)
    assert isinstance(result, Denied | Accepted), result
    return result.outcome


def test_a_valid_token_is_accepted_with_its_subject_client_scopes_and_expiry() -> None:
    body = claims()
    result = verdict(sign(body))
    assert isinstance(result, Accepted)
    principal = result.principal
    assert (principal.issuer, principal.subject, principal.client_id) == (ISSUER, "alice", "app")
    assert principal.scopes == {"mcp:read", "mcp:write"} and principal.expires_at == body["exp"]


def test_an_ec_token_and_a_token_without_kid_are_accepted_by_the_key_that_fits() -> None:
    assert outcome(sign(claims(), EC, "ES256"), keys=(public(RSA), public(EC))) == "accepted"
    token = jwt.encode({"alg": "RS256"}, claims(), RSA)
    assert outcome(token, keys=(public(EC), public(RSA))) == "accepted"


def test_scp_lists_and_azp_are_read_as_scopes_and_client() -> None:
    result = verdict(sign(claims(scope=None, client_id=None, scp=["mcp:read"], azp="spa")))
    assert isinstance(result, Accepted)
    assert result.principal.scopes == {"mcp:read"} and result.principal.client_id == "spa"


def test_no_token_is_missing_and_a_401_without_error() -> None:
    result = read(None, SETTINGS)
    assert isinstance(result, Denied) and (result.status, result.error, result.outcome) == (
        401,
        None,
        "missing",
    )


def test_an_oversized_token_is_refused_before_parsing() -> None:
    assert outcome("a" * (MAX_TOKEN_BYTES + 1)) == "oversized"


@pytest.mark.parametrize("token", ["not a token", "a.b!.c", "eyJhbGciOiJSUzI1NiJ9.@@@.x", "e30.e30.x=y"])
def test_a_malformed_token_is_refused_as_malformed(token: str) -> None:
    result = read(token, SETTINGS)
    assert isinstance(result, Denied)
    assert (result.status, result.error, result.outcome) == (401, "invalid_token", "malformed")


def test_a_token_whose_segments_are_not_json_is_malformed() -> None:
    header = b64(b'{"alg":"RS256"}')
    assert outcome(f"{b64(b'{')}.{b64(b'[]')}.abc") == "malformed"
    assert outcome(f"{header}.{b64(b'[1]')}.abc") == "malformed"


def test_a_token_without_three_segments_is_opaque_for_introspection() -> None:
    assert isinstance(read("opaque-token-1234567890", SETTINGS), Opaque)


def test_an_expired_token_is_refused_as_expired_even_within_a_smaller_leeway() -> None:
    assert outcome(sign(claims(exp=int(time.time()) - 120))) == "expired"
    assert outcome(sign(claims(exp=int(time.time()) - 30))) == "accepted"  # 60 s leeway


def test_a_token_that_is_not_yet_valid_is_refused() -> None:
    assert outcome(sign(claims(nbf=int(time.time()) + 600))) == "not-yet-valid"


def test_a_token_for_another_audience_or_none_is_refused_as_wrong_audience() -> None:
    assert outcome(sign(claims(aud="https://other.example/mcp"))) == "wrong-audience"
    assert outcome(sign(claims(aud=None))) == "wrong-audience"
    assert outcome(sign(claims(aud=["https://other.example", AUDIENCE]))) == "accepted"


def test_a_token_of_another_issuer_is_refused_before_any_key_is_needed() -> None:
    assert outcome(sign(claims(iss="https://evil.example"))) == "wrong-issuer"
    assert outcome(sign(claims(iss=None))) == "wrong-issuer"


def test_alg_none_is_refused_as_bad_algorithm() -> None:
    token = handmade({"alg": "none"}, claims(), None)
    assert outcome(token) == "bad-algorithm"
    allowed = OAuthSettings(issuers=[ISSUER], algorithms=["none", "RS256"])
    assert outcome(token, settings=allowed) == "bad-algorithm"  # never, even if listed


def test_hs256_signed_with_the_issuers_public_key_is_refused() -> None:
    pem = public(RSA).as_pem()
    token = handmade({"alg": "HS256", "kid": "rsa-1"}, claims(), pem)
    assert outcome(token) == "bad-algorithm"
    allowed = OAuthSettings(issuers=[ISSUER], algorithms=["HS256", "RS256"])
    assert outcome(token, settings=allowed) == "bad-algorithm"


def test_an_algorithm_outside_the_allowlist_is_refused() -> None:
    narrow = OAuthSettings(issuers=[ISSUER], algorithms=["ES256"])
    assert outcome(sign(claims()), settings=narrow) == "bad-algorithm"


def test_a_key_of_another_type_than_the_algorithm_is_never_used() -> None:
    # An ES256 header with only an RSA key published: the key-type binding refuses it.
    assert outcome(sign(claims(), EC, "ES256", kid="rsa-1")) == "bad-algorithm"


def test_a_tampered_payload_is_refused_as_bad_signature() -> None:
    header, _, signature = sign(claims()).split(".")
    forged = b64(json.dumps(claims(scope="mcp:read mcp:admin")).encode())
    assert outcome(f"{header}.{forged}.{signature}") == "bad-signature"


def test_a_token_signed_by_another_key_is_refused_as_bad_signature() -> None:
    other = RSAKey.generate_key(2048, parameters={"kid": "rsa-1"}, private=True)
    assert outcome(sign(claims(), other)) == "bad-signature"


def test_a_token_without_the_required_scope_is_a_403_naming_the_required_scopes() -> None:
    result = verdict(sign(claims(scope="mcp:write")))
    assert isinstance(result, Denied)
    assert (result.status, result.error, result.scope) == (403, "insufficient_scope", "mcp:read")


def test_a_token_without_exp_is_refused() -> None:
    assert outcome(sign(claims(exp=None))) == "malformed"


def test_descriptions_never_contain_token_content() -> None:
    body = claims(sub="secret-subject", aud="secret-audience")
    token = sign(body)
    result = verdict(token)
    assert (
        isinstance(result, Denied) and "secret" not in result.description and token not in result.description
    )


# The key schedule (channels/_oauth/keys.py), with explicit clock values.


def test_keys_never_loaded_are_fetched_then_refused_with_503_during_the_backoff() -> None:
    state = IssuerKeys(ISSUER)
    assert state.lookup("RS256", "rsa-1", now=0.0) == FETCH
    backoff = state.failed(now=0.0)
    refused = state.lookup("RS256", "rsa-1", now=backoff / 2)
    assert isinstance(refused, Denied) and (refused.status, refused.outcome) == (503, "issuer-unreachable")
    assert state.lookup("RS256", "rsa-1", now=backoff) == FETCH
    assert state.failed(now=backoff) == 2 * backoff  # doubling


def test_an_unknown_kid_is_refetched_at_most_once_per_interval() -> None:
    state = IssuerKeys(ISSUER)
    state.loaded((public(RSA),), "https://as.example/jwks", now=0.0)
    assert state.lookup("RS256", "rsa-1", now=1.0) == (state.keys[0],)
    assert state.lookup("RS256", "new", now=1.0) == FETCH
    state.fetching(kid_miss=True, now=1.0)
    state.loaded((public(RSA),), "https://as.example/jwks", now=2.0)
    unknown = state.lookup("RS256", "other", now=2.0 + REFETCH_INTERVAL / 2)
    assert isinstance(unknown, Denied) and unknown.outcome == "unknown-key"
    assert state.lookup("RS256", "other", now=1.0 + REFETCH_INTERVAL) == FETCH


def test_a_failed_refetch_keeps_the_old_keys() -> None:
    state = IssuerKeys(ISSUER)
    state.loaded((public(RSA),), "https://as.example/jwks", now=0.0)
    state.fetching(kid_miss=True, now=5.0)
    state.failed(now=5.0)
    assert state.lookup("RS256", "rsa-1", now=6.0) == (state.keys[0],)


# Discovery (channels/_oauth/discovery.py).


def test_discovery_tries_rfc8414_before_openid_connect_with_the_path_placed_as_each_says() -> None:
    assert metadata_urls("https://as.example") == [
        "https://as.example/.well-known/oauth-authorization-server",
        "https://as.example/.well-known/openid-configuration",
    ]
    assert metadata_urls("https://as.example/tenant/1") == [
        "https://as.example/.well-known/oauth-authorization-server/tenant/1",
        "https://as.example/.well-known/openid-configuration/tenant/1",
        "https://as.example/tenant/1/.well-known/openid-configuration",
    ]


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://as.example/jwks", True),
        ("http://127.0.0.1:8080/jwks", True),
        ("http://[::1]/jwks", True),
        ("http://localhost/jwks", True),
        ("http://as.example/jwks", False),
        ("ftp://as.example/jwks", False),
        ("file:///etc/passwd", False),
    ],
)
def test_only_https_or_loopback_http_urls_are_fetched(url: str, allowed: bool) -> None:
    if allowed:
        assert check_url(url, "key set") == url
    else:
        with pytest.raises(DiscoveryError, match="not https"):
            check_url(url, "key set")


def test_metadata_naming_another_issuer_is_refused() -> None:
    with pytest.raises(DiscoveryError, match="another issuer"):
        jwks_uri({"issuer": "https://evil.example", "jwks_uri": "https://evil.example/jwks"}, ISSUER)
    assert (
        jwks_uri({"issuer": ISSUER, "jwks_uri": "https://as.example/jwks"}, ISSUER)
        == "https://as.example/jwks"
    )


def test_a_key_set_keeps_only_public_signing_keys() -> None:
    document = {
        "keys": [
            RSA.as_dict(private=False),
            {**EC.as_dict(private=False), "use": "enc"},
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
            RSA.as_dict(private=True),
            {"kty": "RSA", "kid": "broken"},
        ]
    }
    assert [key.kid for key in signing_keys(document, ISSUER)] == ["rsa-1"]


# Introspection answers (channels/_oauth/introspection.py).


def introspected(**overrides: Any) -> dict[str, Any]:
    return {"active": True, **claims(**overrides)}


def test_an_active_introspection_answer_for_this_audience_is_accepted() -> None:
    result = judge(introspected(), SETTINGS, (AUDIENCE,), time.time())
    assert isinstance(result, Accepted) and result.principal.subject == "alice"


@pytest.mark.parametrize(
    ("answer", "expected"),
    [  # made when the test runs: an answer made at collection expires in a long test session
        (lambda: {"active": False}, "inactive"),
        (lambda: introspected(aud=None), "wrong-audience"),  # absent aud: secure by default
        (lambda: introspected(aud="https://other.example"), "wrong-audience"),
        (lambda: introspected(iss="https://evil.example"), "wrong-issuer"),
        (lambda: introspected(exp=int(time.time()) - 600), "expired"),
        (lambda: introspected(scope="other"), "insufficient-scope"),
        (lambda: [], "malformed"),
    ],
    ids=["inactive", "no-aud", "other-aud", "other-iss", "expired", "scope", "malformed"],
)
def test_introspection_answers_are_refused_for_each_reason(answer: Callable[[], Any], expected: str) -> None:
    result = judge(answer(), SETTINGS, (AUDIENCE,), time.time())
    assert isinstance(result, Denied) and result.outcome == expected


def test_the_answer_cache_keeps_positive_answers_a_minute_negative_ones_briefly_and_is_bounded() -> None:
    cache = AnswerCache()
    accepted = judge(introspected(exp=None), SETTINGS, (AUDIENCE,), 0.0)
    inactive = judge({"active": False}, SETTINGS, (AUDIENCE,), 0.0)
    cache.put("good-token", accepted, now=0.0)
    cache.put("bad-token", inactive, now=0.0)
    assert cache.get("good-token", now=59.0) == accepted and cache.get("bad-token", now=9.0) == inactive
    assert cache.get("bad-token", now=10.0) is None and cache.get("good-token", now=60.0) is None
    assert all(b"token" not in key for key in cache.entries)  # digests only
    for number in range(CACHE_ENTRIES + 5):
        cache.put(f"token-{number}", inactive, now=0.0)
    assert len(cache.entries) == CACHE_ENTRIES
