"""The token verifier of one listener: cached keys first, fetching only when it must.

A :class:`TokenVerifier` is created and owned by one HTTP or WebSocket listener and lives as long
as its :meth:`~TokenVerifier.run` task, which owns the HTTP client (discovery, JWKS and
introspection requests) and keeps each issuer's keys fresh in the background. The listener asks
:meth:`~TokenVerifier.verify_now` first, on the request head, with no I/O; when that answers
``None`` (keys not loaded yet, an unknown ``kid``, an opaque token) it awaits
:meth:`~TokenVerifier.verify`, which fetches within bounded timeouts and never raises for a
network error (an unreachable issuer is a 503 verdict).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping

import trio

from .._core.oauth import OAuthSettings
from .verdict import OUTCOMES, Accepted, Denied


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
        self.settings = settings
        self.audiences = tuple(audiences)
        self._counts = dict.fromkeys(OUTCOMES, 0)

    @property
    def outcomes(self) -> Mapping[str, int]:
        """How many tokens ended in each outcome (every label of :data:`OUTCOMES`, zeros included)."""
        return self._counts

    def verify_now(self, token: str | None) -> Accepted | Denied | None:
        """Decide from what is cached, with no I/O; ``None`` when deciding needs a fetch.

        Args:
            token: the bearer token from the ``Authorization`` header, or ``None`` if none was sent.
        """
        raise NotImplementedError

    async def verify(self, token: str | None) -> Accepted | Denied:
        """Decide, fetching metadata, keys or an introspection result if needed (bounded in time).

        Never raises for network errors: an issuer that cannot be reached gives a 503 verdict.
        """
        raise NotImplementedError

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own the HTTP client and keep each issuer's metadata and keys fresh until cancelled.

        Reports started at once (an issuer that is down is not fatal: its requests get 503 until
        its keys are fetched); closes the HTTP client when cancelled.
        """
        raise NotImplementedError
