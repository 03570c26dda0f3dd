"""One issuer's key cache and when it may be fetched again (sans-IO).

:class:`IssuerKeys` holds the keys last fetched from an issuer and decides, from them and the
clock (``now`` is any monotonic clock: the verifier passes trio's), whether a token can be checked
now, needs a fetch, or must be refused:

- keys never loaded: fetch, unless the last attempt failed less than a backoff ago (then 503);
- a ``kid`` the cached set lacks: refetch, at most once per :data:`REFETCH_INTERVAL` (an attacker
  sending random ``kid`` values must not make the bridge hammer the issuer); else ``unknown-key``;
- a failed fetch keeps the old keys, so a briefly unreachable issuer changes nothing for tokens
  signed with keys already known.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from .verdict import Denied, invalid, unreachable

if TYPE_CHECKING:
    from joserfc.jwk import Key

# An unknown kid triggers at most one refetch per issuer per minute: the figure of the MCP SDKs'
# and Spring Security's JWKS caches (and oidc-provider's own clients).
REFETCH_INTERVAL = 60.0
# After a failed first load, requests are refused with 503 (without waiting) for a backoff that
# doubles from 1 s up to a minute; the verifier's background task retries on the same schedule.
BACKOFF_MIN = 1.0
BACKOFF_MAX = 60.0
# Even with no unknown kid, keys are refreshed this often in the background: rotations where the
# old key is withdrawn early, and revoked keys, are noticed within the hour.
REFRESH_INTERVAL = 3600.0

FETCH = "fetch"


@attrs.define
class IssuerKeys:
    """The cached signing keys of one issuer, and the fetch schedule.

    Attributes:
        issuer: the configured issuer URL.
        keys: the signing keys last fetched (kept when a later fetch fails).
        jwks_uri: from its metadata, once discovered.
        loaded_at: when keys were last fetched successfully, or ``None`` if never.
        refetched_at: when an unknown ``kid`` last caused a fetch.
        failures: fetches failed in a row.
        retry_at: no fetch before this time (after a failure).
    """

    issuer: str
    keys: tuple[Key, ...] = ()
    jwks_uri: str | None = None
    loaded_at: float | None = None
    refetched_at: float | None = None
    failures: int = 0
    retry_at: float = float("-inf")

    def lookup(self, alg: str, kid: str | None, now: float) -> tuple[Key, ...] | str | Denied:
        """The keys that may have signed a token (``alg``, ``kid``), :data:`FETCH`, or a refusal."""
        if self.loaded_at is None:
            if now < self.retry_at:
                return unreachable(f"the issuer {self.issuer} is unreachable and none of its keys is cached")
            return FETCH
        if kid is None:
            return self.keys
        found = tuple(key for key in self.keys if key.kid == kid)
        if found:
            return found
        if (
            self.refetched_at is None or now - self.refetched_at >= REFETCH_INTERVAL
        ) and now >= self.retry_at:
            return FETCH
        return invalid("unknown-key", "the access token names a key its issuer does not publish")

    def fetching(self, kid_miss: bool, now: float) -> None:
        """Note that a fetch starts now (``kid_miss``: because of an unknown ``kid``)."""
        if kid_miss:
            self.refetched_at = now

    def loaded(self, keys: tuple[Key, ...], jwks_uri: str, now: float) -> None:
        """Note a successful fetch of the issuer's keys."""
        self.keys, self.jwks_uri, self.loaded_at = keys, jwks_uri, now
        self.failures, self.retry_at = 0, float("-inf")

    def failed(self, now: float) -> float:
        """Note a failed fetch; returns the backoff before the next attempt (old keys are kept)."""
        self.failures += 1
        backoff: float = min(BACKOFF_MAX, BACKOFF_MIN * 2.0 ** min(self.failures - 1, 16))
        self.retry_at = now + backoff
        return backoff

    def next_refresh(self, now: float) -> float:
        """Seconds until the background task should fetch again."""
        if self.loaded_at is None or self.failures:
            return max(0.0, self.retry_at - now)
        return max(0.0, self.loaded_at + REFRESH_INTERVAL - now)
