"""Judging an RFC 7662 introspection response, and remembering the answer for a while (sans-IO).

An opaque token (no JWS) means nothing to the bridge: it asks the introspection endpoint, which
answers ``active`` and the token's claims. The answer is accepted only if ``active`` is true,
``aud`` contains one of the listener's audiences (an answer *without* ``aud`` is refused: secure by
default, since a token minted for another resource would otherwise pass; RFC 8707 and the MCP spec
require the audience check), ``iss`` if present is a configured issuer, and ``exp`` is not past.
Answers are cached by the SHA-256 of the token, never the token itself.
"""

from __future__ import annotations

import hashlib
from typing import Any

import attrs

from .._core.oauth import OAuthSettings
from .token import accept, scopes_of
from .verdict import Denied, Verdict, insufficient, invalid

# A positive answer is trusted for at most a minute (or until the token's exp): a revoked token
# stops working within that time. RFC 7662 §4 leaves the trade-off to the resource server.
INTROSPECTION_CACHE = 60.0
# A negative answer (inactive, wrong audience...) is remembered briefly, so a client retrying a bad
# token in a loop does not turn each request into a call to the authorization server.
NEGATIVE_CACHE = 10.0
# At most this many answers are remembered (oldest dropped first): random tokens cannot grow the
# cache without bound. About 100 bytes each.
CACHE_ENTRIES = 10_000


def judge(answer: Any, settings: OAuthSettings, audiences: tuple[str, ...], now: float) -> Verdict:
    """The verdict on an introspection answer (``answer``: the decoded JSON body)."""
    if not isinstance(answer, dict):
        return invalid("malformed", "the introspection answer is not a JSON object")
    if answer.get("active") is not True:
        return invalid("inactive", "the access token is not active (introspection)")
    issuer = answer.get("iss")
    if issuer is not None and issuer not in settings.issuers:
        return invalid("wrong-issuer", "the access token was not issued by a configured issuer")
    aud = answer.get("aud")
    aud_values = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    if not any(value in audiences for value in aud_values):
        return invalid("wrong-audience", "the access token was not issued for this resource")
    exp = answer.get("exp")
    if exp is not None:
        if not isinstance(exp, int | float) or isinstance(exp, bool):
            return invalid("malformed", "the introspection answer's exp is not a number")
        if exp <= now - settings.leeway:
            return invalid("expired", "the access token has expired")
    nbf = answer.get("nbf")
    if isinstance(nbf, int | float) and not isinstance(nbf, bool) and nbf > now + settings.leeway:
        return invalid("not-yet-valid", "the access token is not valid yet")
    scopes = scopes_of(answer)
    if scopes is None:
        return invalid("malformed", "the introspection answer's scope is neither a string nor a list")
    if not set(settings.scopes) <= scopes:
        return insufficient(settings.scopes)
    if not isinstance(issuer, str):  # RFC 7662 makes iss optional: name the endpoint's issuer
        issuer = settings.issuers[0] if settings.issuers else settings.introspection
    return accept({**answer, "iss": issuer}, scopes)


def digest(token: str) -> bytes:
    """The cache key of a token: its SHA-256, so the cache never holds a usable token."""
    return hashlib.sha256(token.encode()).digest()


@attrs.define
class AnswerCache:
    """Introspection verdicts by token digest, each until a deadline (Unix time)."""

    entries: dict[bytes, tuple[float, Verdict]] = attrs.field(factory=dict)

    def get(self, token: str, now: float) -> Verdict | None:
        """The cached verdict for ``token``, or ``None`` (never seen, or its time is up)."""
        key = digest(token)
        found = self.entries.get(key)
        if found is None:
            return None
        until, verdict = found
        if now >= until:
            del self.entries[key]
            return None
        return verdict

    def put(self, token: str, verdict: Verdict, now: float) -> None:
        """Remember ``verdict`` for ``token``: positive ones until the token's exp or a minute."""
        if isinstance(verdict, Denied):
            if verdict.status == 503:
                return  # an outage is not an answer about this token
            until = now + NEGATIVE_CACHE
        else:
            expires = verdict.principal.expires_at
            until = now + INTROSPECTION_CACHE if expires is None else min(expires, now + INTROSPECTION_CACHE)
        while len(self.entries) >= CACHE_ENTRIES:
            del self.entries[next(iter(self.entries))]
        self.entries[digest(token)] = (until, verdict)
