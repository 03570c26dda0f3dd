"""What the verifier decides about one access token, and how HTTP says it (sans-IO).

:class:`Accepted` carries the :class:`~channels.Principal` a valid token names; :class:`Denied`
carries the HTTP status, the RFC 6750 error code, one sentence for the log and the client (never
any token content) and the outcome label the metrics count it under. :func:`challenge` writes the
``WWW-Authenticate`` value of a refusal (RFC 6750 §3, RFC 9728 §5.1), and
:func:`protected_resource_metadata` the RFC 9728 document a client discovers the issuers from.
"""

from __future__ import annotations

import re
from typing import TypeAlias

import attrs

from .._core.jsonrpc import JSONObject
from .._core.oauth import OAuthSettings, Principal

# The outcome labels, one per way a token ends (the metrics' `outcome` label, docs/security.md).
OUTCOMES: tuple[str, ...] = (
    "accepted",
    "missing",  # no Authorization header, or no bearer token in it
    "malformed",  # not a token we can read: bad syntax, bad JSON, a claim of the wrong type
    "oversized",  # longer than MAX_TOKEN_BYTES: refused before parsing
    "expired",
    "not-yet-valid",
    "wrong-audience",
    "wrong-issuer",
    "bad-signature",
    "unknown-key",  # a `kid` the issuer does not publish, even after a refetch
    "bad-algorithm",  # `none`, an HMAC, or an algorithm outside settings.algorithms
    "inactive",  # introspection said active=false
    "insufficient-scope",
    "issuer-unreachable",
)


@attrs.frozen
class Accepted:
    """A valid token with the required scopes; ``principal`` is who it names."""

    principal: Principal

    @property
    def outcome(self) -> str:
        """Always ``"accepted"`` (so any verdict has an ``outcome``)."""
        return "accepted"


@attrs.frozen
class Denied:
    """A refused token: what to answer and what to log.

    Attributes:
        status: 401 (no token, or an invalid one), 403 (valid without the required scopes) or 503
            (the issuer is unreachable and no cached key can decide).
        error: the RFC 6750 error code: ``None`` when no token was sent (and for 503),
            ``"invalid_token"``, or ``"insufficient_scope"``.
        description: one sentence for the log line and ``error_description``; never token content.
        outcome: the metrics label (one of :data:`OUTCOMES`).
        scope: for 403, the space-separated scopes the resource requires.
    """

    status: int
    error: str | None
    description: str
    outcome: str
    scope: str | None = None


Verdict: TypeAlias = Accepted | Denied


def missing() -> Denied:
    """The verdict on a request that sent no bearer token (401 without an error code, RFC 6750 §3.1)."""
    return Denied(401, None, "no access token was sent", "missing")


def invalid(outcome: str, description: str) -> Denied:
    """A 401 ``invalid_token`` verdict."""
    return Denied(401, "invalid_token", description, outcome)


def unreachable(description: str) -> Denied:
    """A 503 verdict: the issuer (or introspection endpoint) cannot be reached and nothing cached decides."""
    return Denied(503, None, description, "issuer-unreachable")


def insufficient(required: tuple[str, ...]) -> Denied:
    """A 403 ``insufficient_scope`` verdict naming every scope the resource requires (RFC 6750 §3.1)."""
    scope = " ".join(required)
    description = f"the access token lacks a required scope ({scope})"
    return Denied(403, "insufficient_scope", description, "insufficient-scope", scope)


# RFC 6750 §3: error_description and scope use only %x20-21 / %x23-5B / %x5D-7E (no `"`, no `\`).
_NOT_RFC6750 = re.compile(r"[^\x20\x21\x23-\x5b\x5d-\x7e]")


def _quoted(value: str) -> str:
    """An RFC 9110 §5.6.4 quoted-string: quotes and backslashes escaped, controls dropped."""
    value = re.sub(r"[\x00-\x1f\x7f]", "", value)
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def challenge(denied: Denied, resource_metadata_url: str | None, required_scope: str = "") -> str:
    """The ``WWW-Authenticate`` value for a refusal.

    - 401 without a token (and 503): ``Bearer resource_metadata="URL"``
    - 401 with a bad token: ``Bearer error="invalid_token", error_description="...",
      resource_metadata="URL"``
    - 403: ``Bearer error="insufficient_scope", scope="a b", resource_metadata="URL"``

    A 401 also names ``scope="..."``, the scopes every request needs, when there are any: the
    MCP authorization spec asks servers to, so that a client asks for them in its first token.

    Args:
        denied: the verdict.
        resource_metadata_url: where the protected-resource metadata is served (RFC 9728 §5.1),
            or ``None`` to leave the parameter out (then a bare ``Bearer`` for a missing token).
        required_scope: the listener's required scopes, space-separated (``""`` for none).
    """
    params = []
    if denied.error is not None:
        params.append(f"error={_quoted(denied.error)}")
        if denied.error == "insufficient_scope":
            params.append(f"scope={_quoted(_NOT_RFC6750.sub('', denied.scope or ''))}")
        else:
            params.append(f"error_description={_quoted(_NOT_RFC6750.sub('?', denied.description))}")
    if denied.status == 401 and required_scope:
        params.append(f"scope={_quoted(_NOT_RFC6750.sub('', required_scope))}")
    if resource_metadata_url is not None:
        params.append(f"resource_metadata={_quoted(resource_metadata_url)}")
    return "Bearer " + ", ".join(params) if params else "Bearer"


def protected_resource_metadata(settings: OAuthSettings, resource: str) -> JSONObject:
    """The RFC 9728 protected-resource metadata document of a listener.

    Args:
        settings: the listener's OAuth settings: ``authorization_servers`` are its issuers,
            ``scopes_supported`` its ``scopes_supported`` or else its required scopes (left out
            when both are empty: an empty list would claim the resource knows no scope).
        resource: the resource identifier, the listener's first audience (RFC 9728 §2).
    """
    document: JSONObject = {"resource": resource, "authorization_servers": list(settings.issuers)}
    scopes = settings.scopes_supported or settings.scopes
    if scopes:
        document["scopes_supported"] = list(scopes)
    document["bearer_methods_supported"] = ["header"]  # never the query string or a form body
    return document
