"""OAuth 2.1 resource-server values: what a listener is told to accept, and who a token names (sans-IO).

:class:`OAuthSettings` is what the operator configures for one HTTP or WebSocket listener
(``--oauth-issuer`` and friends): which authorization servers it trusts, the audience tokens must
be issued for (RFC 8707, the MCP authorization spec), the scopes every request needs, and an
introspection endpoint (RFC 7662) for opaque tokens. The verifier that applies them, with its key
cache and its HTTP client, lives in :mod:`channels._oauth`; this module only holds the values, so
that option records and :class:`~channels.PeerInfo` can name them without importing any I/O.

:class:`Principal` is what an accepted token says about its bearer. It rides on the channel's
:class:`~channels.PeerInfo` (``peer.principal``), so the bridge can log who called and apply
per-tool scopes; the token itself is never kept.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

# Signature algorithms accepted by default: the asymmetric JWS algorithms of RFC 7518 and RFC 8037.
# Never "none", never an HMAC ("HS256"...): a resource server holds no shared secret, and accepting
# HMAC is what lets an attacker sign with the issuer's *public* key (the classic key confusion).
DEFAULT_ALGORITHMS: tuple[str, ...] = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
)  # fmt: skip
# Clock skew allowed on exp, nbf and iat: one minute, the usual default of JWT libraries
# (joserfc's and PyJWT's `leeway` is 0, Spring's and Microsoft's 60 s to 5 min).
DEFAULT_LEEWAY = 60.0


def _tuple(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


@attrs.frozen
class OAuthSettings:
    """How one listener validates OAuth access tokens (docs/security.md, "OAuth").

    Attributes:
        issuers: the authorization servers whose tokens are accepted (their ``issuer`` URLs,
            ``https://``, or ``http://`` on a loopback address only).
        audiences: the ``aud`` values accepted; empty means the endpoint's own canonical URI
            (RFC 8707 §2), which the listener fills in when it starts.
        scopes: scopes every request's token must carry (403 ``insufficient_scope`` otherwise).
        introspection: an RFC 7662 introspection endpoint for opaque tokens, or ``None`` (opaque
            tokens are then refused).
        client_id, client_secret: the bridge's own credentials at the introspection endpoint.
        algorithms: the JWS algorithms accepted (:data:`DEFAULT_ALGORITHMS`).
        leeway: seconds of clock skew allowed on ``exp`` and ``nbf``.
        scopes_supported: every scope the resource knows (its required scopes and those of
            per-tool rules), published in its protected-resource metadata (RFC 9728).
    """

    issuers: tuple[str, ...] = attrs.field(converter=_tuple)
    audiences: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    scopes: tuple[str, ...] = attrs.field(default=(), converter=_tuple)
    introspection: str | None = None
    client_id: str | None = None
    client_secret: str | None = attrs.field(default=None, repr=False)
    algorithms: tuple[str, ...] = attrs.field(default=DEFAULT_ALGORITHMS, converter=_tuple)
    leeway: float = DEFAULT_LEEWAY
    scopes_supported: tuple[str, ...] = attrs.field(default=(), converter=_tuple)


@attrs.frozen
class Principal:
    """Who an accepted OAuth access token names; never the token itself.

    Attributes:
        issuer: the authorization server that issued it (``iss``).
        subject: the resource owner (``sub``), or ``None`` when the token has none (client
            credentials tokens of some servers).
        client_id: the OAuth client that obtained it (``client_id``, ``azp`` or ``cid``).
        scopes: its scopes (``scope``, space-separated, or ``scp``).
        expires_at: its ``exp`` as a Unix time, or ``None``.
    """

    issuer: str
    subject: str | None
    client_id: str | None
    scopes: frozenset[str] = frozenset()
    expires_at: float | None = attrs.field(default=None, eq=False)

    @property
    def label(self) -> str:
        """How logs and :attr:`~channels.PeerInfo.credential` name it: ``oauth sub=… client=…``."""
        return f"oauth sub={self.subject or '-'} client={self.client_id or '-'}"
