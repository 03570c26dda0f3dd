"""The token verifier of one listener: cached keys first, fetching only when it must.

A :class:`TokenVerifier` is created and owned by one HTTP or WebSocket listener and lives as long
as its :meth:`~TokenVerifier.run` task, which owns the HTTP client (discovery, JWKS and
introspection requests) and keeps each issuer's keys fresh in the background. The listener asks
:meth:`~TokenVerifier.verify_now` first, on the request head, with no I/O; when that answers
``None`` (keys not loaded yet, an unknown ``kid``, an opaque token) it awaits
:meth:`~TokenVerifier.verify`, which fetches within bounded timeouts (channels/_oauth/fetch.py) and
never raises for a network error (an unreachable issuer is a 503 verdict).
"""

from __future__ import annotations

import importlib
import logging
import ssl
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import quote_plus

import trio

from .._core.oauth import OAuthSettings
from .discovery import DiscoveryError, jwks_uri, metadata_urls, signing_keys
from .fetch import FetchError, NotFound, get_json, new_client, post_form
from .introspection import AnswerCache, judge
from .keys import FETCH, IssuerKeys
from .token import Opaque, check, read
from .verdict import OUTCOMES, Accepted, Denied, Verdict, invalid, unreachable

if TYPE_CHECKING:
    import httpx2

logger = logging.getLogger("channels.oauth")

# An issuer that stays unreachable is reported once a minute, not on every retry.
WARNING_INTERVAL = 60.0
# Introspection requests in flight at once per listener: a flood of random opaque tokens waits
# here instead of becoming a flood of requests to the authorization server.
INTROSPECTION_CONCURRENCY = 8
# A whole fetch of keys: discovery (up to three documents tried) and the key set.
LOAD_DEADLINE = 15.0
# What the modules here import only where they use it (see the package docstring), imported by
# each TokenVerifier when created: at the listener's start, so that no request waits for it and a
# missing package stops the start rather than failing requests.
DEPENDENCIES = ("httpx2", "joserfc.errors", "joserfc.jwk", "joserfc.jws", "joserfc.jwt")


class TokenVerifier:
    """Validates OAuth access tokens for one listener (docs/security.md, "OAuth").

    Args:
        settings: the listener's OAuth settings.
        audiences: the ``aud`` values accepted: ``settings.audiences``, or the endpoint's own
            canonical URI when those are empty (the listener decides; never the request's Host).
        ssl_context: the TLS context for ``https://`` issuers, or ``None`` for the system's
            trusted CAs.
    """

    def __init__(
        self,
        settings: OAuthSettings,
        audiences: tuple[str, ...],
        *,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        for name in DEPENDENCIES:
            importlib.import_module(name)
        self.settings = settings
        self.audiences = tuple(audiences)
        self._ssl_context = ssl_context
        self._counts = dict.fromkeys(OUTCOMES, 0)
        self._issuers = {issuer: IssuerKeys(issuer) for issuer in settings.issuers}
        self._locks = {issuer: trio.Lock() for issuer in settings.issuers}
        self._answers = AnswerCache()
        self._introspecting = trio.CapacityLimiter(INTROSPECTION_CONCURRENCY)
        self._client: httpx2.AsyncClient | None = None
        self._warned_at: dict[str, float] = {}

    def __repr__(self) -> str:
        return f"<TokenVerifier issuers={list(self.settings.issuers)} audiences={list(self.audiences)}>"

    @property
    def outcomes(self) -> Mapping[str, int]:
        """How many tokens ended in each outcome (every label of :data:`OUTCOMES`, zeros included)."""
        return self._counts

    def verify_now(self, token: str | None) -> Accepted | Denied | None:
        """Decide from what is cached, with no I/O; ``None`` when deciding needs a fetch.

        Args:
            token: the bearer token from the ``Authorization`` header, or ``None`` if none was sent.
        """
        verdict = self._decide(token)
        if verdict is not None:
            self._counts[verdict.outcome] += 1
        return verdict

    async def verify(self, token: str | None) -> Accepted | Denied:
        """Decide, fetching metadata, keys or an introspection result if needed (bounded in time).

        Never raises for network errors: an issuer that cannot be reached gives a 503 verdict.

        Raises:
            RuntimeError: :meth:`run` is not running (a programming error: no HTTP client).
        """
        verdict = self._decide(token)
        if verdict is None:
            assert token is not None  # a missing token is always decided at once
            verdict = await self._fetch_and_decide(token)
        self._counts[verdict.outcome] += 1
        return verdict

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the HTTP client and keep each issuer's metadata and keys fresh until cancelled.

        Reports started at once (an issuer that is down is not fatal: its requests get 503 until
        its keys are fetched); closes the HTTP client when cancelled.
        """
        client = new_client(self._ssl_context if self._ssl_context is not None else True)
        self._client = client
        try:
            async with trio.open_nursery() as nursery:
                for issuer in self._issuers:
                    nursery.start_soon(self._keep_fresh, issuer)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._client = None
            with trio.move_on_after(1, shield=True):  # closing sockets takes no network round trip
                await client.aclose()

    def _decide(self, token: str | None) -> Verdict | None:
        parsed = read(token, self.settings)
        if isinstance(parsed, Denied):
            return parsed
        if isinstance(parsed, Opaque):
            if self.settings.introspection is None:
                return invalid(
                    "malformed", "the access token is no JWT, and no introspection endpoint is set"
                )
            return self._answers.get(parsed.token, time.time())
        keys = self._issuers[parsed.issuer].lookup(parsed.alg, parsed.kid, trio.current_time())
        if isinstance(keys, str):  # FETCH
            return None
        if isinstance(keys, Denied):
            return keys
        return check(parsed, keys, self.settings, self.audiences, time.time())

    def _http(self) -> httpx2.AsyncClient:
        if self._client is None:
            raise RuntimeError(
                "TokenVerifier.verify needs its run() task (start it in the listener's nursery)"
            )
        return self._client

    async def _fetch_and_decide(self, token: str) -> Verdict:
        parsed = read(token, self.settings)
        if isinstance(parsed, Denied):
            return parsed
        if isinstance(parsed, Opaque):
            return await self._introspect(parsed.token)
        state = self._issuers[parsed.issuer]
        self._http()
        async with self._locks[parsed.issuer]:
            keys = state.lookup(parsed.alg, parsed.kid, trio.current_time())
            if keys == FETCH:  # (another task may have fetched while this one waited)
                await self._load(state, kid_miss=state.loaded_at is not None)
                keys = state.lookup(parsed.alg, parsed.kid, trio.current_time())
        if isinstance(keys, str):  # loaded just now, and the kid is still unknown
            return invalid("unknown-key", "the access token names a key its issuer does not publish")
        if isinstance(keys, Denied):
            return keys
        return check(parsed, keys, self.settings, self.audiences, time.time())

    async def _load(self, state: IssuerKeys, *, kid_miss: bool) -> None:
        """Fetch the issuer's keys (discovery first, unless for a kid miss); the caller holds its lock."""
        client = self._http()
        state.fetching(kid_miss, trio.current_time())
        uri, keys = None, None
        with trio.move_on_after(LOAD_DEADLINE):
            try:
                uri = (
                    state.jwks_uri
                    if kid_miss and state.jwks_uri
                    else await self._discover(client, state.issuer)
                )
                keys = signing_keys(await get_json(client, uri, f"key set of {state.issuer}"), state.issuer)
            except (FetchError, DiscoveryError) as error:
                self._failed(state, str(error))
                return
        if uri is None or keys is None:
            self._failed(state, f"fetching the keys of {state.issuer} took longer than {LOAD_DEADLINE:g} s")
            return
        if state.loaded_at is None or state.failures:
            logger.info("oauth: %d signing key(s) of %s loaded", len(keys), state.issuer)
        state.loaded(keys, uri, trio.current_time())

    async def _discover(self, client: httpx2.AsyncClient, issuer: str) -> str:
        """The issuer's ``jwks_uri``, from the first discovery document that is the issuer's own."""
        error: Exception = NotFound(f"no metadata found for {issuer}")
        for url in metadata_urls(issuer):
            try:
                return jwks_uri(await get_json(client, url, f"metadata of {issuer}"), issuer)
            except (NotFound, DiscoveryError) as reason:  # try the next well-known location
                if not isinstance(error, DiscoveryError) or isinstance(reason, DiscoveryError):
                    error = reason  # (a document found but unusable says more than a later 404)
        raise error

    def _failed(self, state: IssuerKeys, reason: str) -> None:
        now = trio.current_time()
        backoff = state.failed(now)
        if now - self._warned_at.get(state.issuer, float("-inf")) >= WARNING_INTERVAL:
            self._warned_at[state.issuer] = now
            consequence = (
                "tokens signed with its cached keys are still accepted"
                if state.loaded_at is not None
                else "requests get 503 until its keys are fetched"
            )
            logger.warning("oauth: %s; %s; retrying in %g s", reason, consequence, backoff)

    async def _keep_fresh(self, issuer: str) -> None:
        """Load the issuer's keys at start, retry with backoff, refresh them every hour."""
        state = self._issuers[issuer]
        while True:
            await trio.sleep(state.next_refresh(trio.current_time()))
            async with self._locks[issuer]:
                if state.next_refresh(trio.current_time()) <= 0:
                    await self._load(state, kid_miss=False)

    async def _introspect(self, token: str) -> Verdict:
        client, endpoint = self._http(), self.settings.introspection
        assert endpoint is not None
        async with self._introspecting:
            cached = self._answers.get(token, time.time())  # (another task may have asked meanwhile)
            if cached is not None:
                return cached
            auth = None
            if self.settings.client_id is not None:
                # RFC 6749 §2.3.1: client id and secret are form-encoded before Basic encoding.
                auth = (quote_plus(self.settings.client_id), quote_plus(self.settings.client_secret or ""))
            form = {"token": token, "token_type_hint": "access_token"}
            try:
                answer = await post_form(client, endpoint, form, auth, "introspection endpoint")
            except FetchError as error:
                now = trio.current_time()
                if now - self._warned_at.get(endpoint, float("-inf")) >= WARNING_INTERVAL:
                    self._warned_at[endpoint] = now
                    logger.warning("oauth: %s; opaque tokens get 503 meanwhile", error)
                return unreachable("the introspection endpoint cannot be reached")
            verdict = judge(answer, self.settings, self.audiences, time.time())
            self._answers.put(token, verdict, time.time())
            return verdict
