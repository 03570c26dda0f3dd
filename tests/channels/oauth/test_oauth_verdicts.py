"""The WWW-Authenticate challenges and the protected-resource metadata (channels/_oauth/verdict.py)."""

from __future__ import annotations

from channels import Denied, OAuthSettings, challenge, protected_resource_metadata
from channels._oauth.verdict import OUTCOMES, insufficient, invalid, missing, unreachable

URL = "https://mcp.example/.well-known/oauth-protected-resource/mcp"


def test_a_request_without_a_token_is_challenged_with_the_metadata_url_and_no_error() -> None:
    assert challenge(missing(), URL) == f'Bearer resource_metadata="{URL}"'
    assert missing().status == 401 and missing().error is None and missing().outcome == "missing"


def test_a_bad_token_is_challenged_with_invalid_token_and_a_description() -> None:
    denied = invalid("expired", "the access token has expired")
    assert challenge(denied, URL) == (
        f'Bearer error="invalid_token", error_description="the access token has expired", resource_metadata="{URL}"'
    )


def test_a_token_without_the_required_scopes_is_challenged_with_insufficient_scope_and_the_scopes() -> None:
    denied = insufficient(("mcp:read", "mcp:write"))
    assert (denied.status, denied.outcome, denied.scope) == (403, "insufficient-scope", "mcp:read mcp:write")
    assert challenge(denied, URL) == (
        f'Bearer error="insufficient_scope", scope="mcp:read mcp:write", resource_metadata="{URL}"'
    )


def test_a_401_names_the_scopes_every_request_needs_so_the_client_asks_for_them_first() -> None:
    assert challenge(missing(), URL, "mcp:tools mcp:read") == (
        f'Bearer scope="mcp:tools mcp:read", resource_metadata="{URL}"'
    )
    expired = invalid("expired", "the access token has expired")
    assert 'scope="mcp:tools"' in challenge(expired, URL, "mcp:tools")
    assert "scope" not in challenge(unreachable("down"), URL, "mcp:tools")


def test_an_unreachable_issuer_is_a_503_challenged_like_a_missing_token() -> None:
    denied = unreachable("the issuer is down")
    assert (denied.status, denied.error, denied.outcome) == (503, None, "issuer-unreachable")
    assert challenge(denied, URL) == f'Bearer resource_metadata="{URL}"'


def test_quotes_and_backslashes_never_break_out_of_a_quoted_parameter() -> None:
    denied = Denied(401, "invalid_token", 'say "hi" \\ bye', "malformed")
    value = challenge(denied, 'https://x.example/a"b')
    # RFC 6750 forbids " and \ in error_description: replaced; the URL is a quoted-pair escape.
    assert (
        value
        == 'Bearer error="invalid_token", error_description="say ?hi? ? bye", resource_metadata="https://x.example/a\\"b"'
    )


def test_without_a_metadata_url_the_challenge_is_a_bare_bearer() -> None:
    assert challenge(missing(), None) == "Bearer"


def test_every_outcome_label_is_distinct_and_accepted_comes_first() -> None:
    assert len(set(OUTCOMES)) == len(OUTCOMES) == 14 and OUTCOMES[0] == "accepted"


def test_the_metadata_names_the_resource_the_issuers_the_scopes_and_header_bearer_only() -> None:
    settings = OAuthSettings(issuers=["https://as.example"], scopes=["mcp:read"])
    assert protected_resource_metadata(settings, "https://mcp.example/mcp") == {
        "resource": "https://mcp.example/mcp",
        "authorization_servers": ["https://as.example"],
        "scopes_supported": ["mcp:read"],
        "bearer_methods_supported": ["header"],
    }


def test_the_metadata_prefers_scopes_supported_and_leaves_out_an_empty_list() -> None:
    wide = OAuthSettings(issuers=["https://as.example"], scopes=["a"], scopes_supported=["a", "b"])
    assert protected_resource_metadata(wide, "r")["scopes_supported"] == ["a", "b"]
    assert "scopes_supported" not in protected_resource_metadata(OAuthSettings(issuers=[]), "r")
