"""Reading and checking one JWT access token against an issuer's keys (sans-IO).

Two steps, so that the verifier can decide what to fetch in between. :func:`read` looks at the
token without trusting it: size, syntax, the JWS header's ``alg`` and ``kid``, and the unverified
``iss`` that picks which configured issuer's keys to use (a token naming any other issuer is
refused before anything is fetched). :func:`check` then verifies the signature with joserfc under
the one algorithm the header names (joserfc binds each algorithm to its key type, so an HS256
token "signed" with an RSA public key never verifies), and the claims: ``iss``, ``aud``, ``exp``,
``nbf`` with the settings' leeway, then the required scopes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

from .._core.oauth import OAuthSettings, Principal
from .verdict import Accepted, Denied, Verdict, insufficient, invalid, missing

if TYPE_CHECKING:
    from joserfc.jwk import Key

# Tokens longer than this are refused before any parsing. Access tokens of the big providers are
# 1-2 KiB (Entra ID's with group claims reach ~4 KiB); 8 KiB is also the usual limit on one
# request header line (nginx's large_client_header_buffers, Apache's LimitRequestFieldSize).
MAX_TOKEN_BYTES = 8 * 1024

# RFC 6750 §2.1 b64token: what a bearer token may contain.
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
# The JWS compact serialization: three base64url segments (RFC 7515 §7.1).
_JWS_COMPACT = re.compile(r"[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*")


@attrs.frozen
class Opaque:
    """A well-formed bearer token that is not a JWS: only introspection (RFC 7662) can tell."""

    token: str = attrs.field(repr=False)


@attrs.frozen
class Unverified:
    """A JWS whose header and claims were read but not yet trusted.

    Attributes:
        token: the compact serialization, kept to verify the signature.
        alg: the header's algorithm, already in the allowlist.
        kid: the header's key id, or ``None``.
        issuer: the unverified ``iss``, one of the configured issuers.
    """

    token: str = attrs.field(repr=False)
    alg: str
    kid: str | None
    issuer: str


def _is_forbidden(alg: str) -> bool:
    # `none` is no signature; an HMAC needs a shared secret, which a resource server never has.
    return alg.lower() == "none" or alg.upper().startswith("HS")


def read(token: str | None, settings: OAuthSettings) -> Unverified | Opaque | Denied:
    """Classify a presented token without trusting any of it.

    Returns:
        :class:`Unverified` for a JWS of a configured issuer under an allowed algorithm,
        :class:`Opaque` for a token that is no JWS, or the :class:`Denied` verdict.
    """
    if token is None or not token:
        return missing()
    if len(token.encode()) > MAX_TOKEN_BYTES:
        return invalid("oversized", f"the access token is longer than {MAX_TOKEN_BYTES} bytes")
    if not _B64TOKEN.fullmatch(token):
        return invalid("malformed", "the access token has characters a bearer token cannot have")
    if token.count(".") != 2:
        return Opaque(token)
    if not _JWS_COMPACT.fullmatch(token):
        return invalid("malformed", "the access token is not a valid JWS compact serialization")
    from joserfc import jws  # (imported here: see the package docstring)
    from joserfc.errors import JoseError

    try:
        compact = jws.extract_compact(token.encode())
        header = compact.headers()
        claims = json.loads(compact.payload)
    except (JoseError, ValueError):
        return invalid("malformed", "the access token's header or payload is not valid base64url JSON")
    if not isinstance(claims, dict):
        return invalid("malformed", "the access token's payload is not a JSON object")
    alg = header.get("alg")
    if not isinstance(alg, str):
        return invalid("malformed", "the access token's header has no algorithm")
    if _is_forbidden(alg) or alg not in settings.algorithms:
        return invalid("bad-algorithm", "the access token's signing algorithm is not accepted")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        return invalid("malformed", "the access token's key id is not a string")
    issuer = claims.get("iss")
    if not isinstance(issuer, str) or issuer not in settings.issuers:
        return invalid("wrong-issuer", "the access token was not issued by a configured issuer")
    return Unverified(token, alg, kid, issuer)


def check(
    unverified: Unverified,
    keys: Sequence[Key],
    settings: OAuthSettings,
    audiences: Sequence[str],
    now: float,
) -> Verdict:
    """Verify the signature with one of ``keys``, then the claims and the required scopes.

    Args:
        unverified: what :func:`read` gave.
        keys: the issuer's keys that may have signed it (those with the header's ``kid``, or all
            of them when it names none).
        settings: the listener's settings (algorithms, leeway, issuers, required scopes).
        audiences: the accepted ``aud`` values; the token's must include one of them.
        now: the current Unix time.
    """
    from joserfc import jws  # (imported here: see the package docstring)
    from joserfc.errors import BadSignatureError, InvalidKeyTypeError, JoseError, UnsupportedAlgorithmError

    payload = None
    mismatched = 0
    for key in keys:
        if key.alg is not None and key.alg != unverified.alg:
            mismatched += 1  # the key is published for another algorithm (RFC 7517 §4.4)
            continue
        try:
            payload = jws.deserialize_compact(unverified.token, key, algorithms=[unverified.alg]).payload
            break
        except (InvalidKeyTypeError, UnsupportedAlgorithmError):
            mismatched += 1  # e.g. ES256 header, RSA key: the key-type binding refuses it
        except BadSignatureError:
            continue
        except (JoseError, ValueError):
            return invalid("malformed", "the access token's JWS header is not acceptable")
    if payload is None:
        if keys and mismatched == len(keys):
            return invalid("bad-algorithm", "no key of the issuer fits the access token's algorithm")
        return invalid("bad-signature", "the access token's signature does not verify")
    claims: dict[str, Any] = json.loads(payload)
    denied = _check_claims(claims, settings, audiences, now)
    if denied is not None:
        return denied
    scopes = scopes_of(claims)
    if scopes is None:
        return invalid("malformed", "the access token's scope claim is neither a string nor a list")
    if not set(settings.scopes) <= scopes:
        return insufficient(settings.scopes)
    return accept(claims, scopes)


def _check_claims(
    claims: dict[str, Any], settings: OAuthSettings, audiences: Sequence[str], now: float
) -> Denied | None:
    from joserfc.errors import ClaimError, ExpiredTokenError, MissingClaimError
    from joserfc.jwt import JWTClaimsRegistry

    registry = JWTClaimsRegistry(
        now=int(now),
        leeway=int(settings.leeway),
        iss={"essential": True, "values": list(settings.issuers)},
        aud={"essential": True, "values": list(audiences)},
        exp={"essential": True},  # RFC 9068 §2.2: an access token without exp never ends
    )
    try:
        registry.validate(claims)
    except ExpiredTokenError:
        return invalid("expired", "the access token has expired")
    except MissingClaimError as error:
        missing_claims = error.claim.split(",")
        if "aud" in missing_claims:
            return invalid("wrong-audience", "the access token names no audience")
        return invalid("malformed", f"the access token lacks the claim(s) {error.claim}")
    except ClaimError as error:
        outcome, description = _CLAIM_OUTCOMES.get(error.claim, ("malformed", ""))
        return invalid(outcome, description or f"the access token's {error.claim!r} claim is not valid")
    return None


_CLAIM_OUTCOMES = {
    "aud": ("wrong-audience", "the access token was not issued for this resource"),
    "iss": ("wrong-issuer", "the access token was not issued by a configured issuer"),
    "nbf": ("not-yet-valid", "the access token is not valid yet"),
    "iat": ("not-yet-valid", "the access token was issued in the future"),
}


def scopes_of(claims: dict[str, Any]) -> frozenset[str] | None:
    """The token's scopes: ``scope`` (RFC 9068, space-separated) or ``scp`` (a list, or a string)."""
    value = claims.get("scope", claims.get("scp", ""))
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return frozenset(value)
    return None


def accept(claims: dict[str, Any], scopes: frozenset[str]) -> Accepted:
    """The verdict on a valid token: its principal, from ``iss``, ``sub``, the client and ``exp``."""
    client = next(
        (claims[name] for name in ("client_id", "azp", "cid") if isinstance(claims.get(name), str)), None
    )
    subject = claims.get("sub")
    exp = claims.get("exp")
    return Accepted(
        Principal(
            issuer=str(claims.get("iss", "")),
            subject=subject if isinstance(subject, str) else None,
            client_id=client,
            scopes=scopes,
            expires_at=float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None,
        )
    )
