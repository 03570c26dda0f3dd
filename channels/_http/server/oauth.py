"""OAuth access tokens on an HTTP listener: checked on the head, finished before routing if must fetch.

One :class:`HttpOAuth` per HTTP address with ``ListenOptions.oauth``, owned by its
:class:`~channels._http.server.service.HttpService`; it owns the address's
:class:`~channels.TokenVerifier`, whose :meth:`run` task the service starts beside its connections
(:meth:`HttpService.start_background`). For each request (docs/security.md, "OAuth"):

1. on its head (:meth:`HttpOAuth.check_head`, synchronously, before any body is read or
   ``100 Continue`` sent): a static bearer token (``--token-file``) that matches wins, with its
   label and no principal; else the verifier decides from its cache (``verify_now``): a refusal is
   answered there, an acceptance gives the :class:`~channels.Principal`, and a token that needs a
   fetch (keys not loaded yet, an unknown ``kid``, an opaque token) is marked :class:`Unverified`;
2. an :class:`Unverified` one is finished in the dispatcher (:meth:`HttpOAuth.finish`, awaiting
   ``verify``, bounded by the verifier's timeouts) before the request is routed anywhere.

Tokens come from the ``Authorization`` header only, never the query string (RFC 9700 §2.5: a
token in a URL ends up in logs and ``Referer`` headers). A refusal is the verifier's status with
its ``WWW-Authenticate`` challenge (naming the protected-resource metadata), a JSON-RPC error body
whose ``data.reason`` is the outcome, ``Retry-After`` on a 503, and one INFO log line naming the
peer and the outcome, never the token.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from http import HTTPStatus
from urllib.parse import urlsplit

import trio

from ..._core.auth import TokenSet, bearer_token
from ..._core.channel import PeerInfo
from ..._core.guard import header_values
from ..._core.jsonrpc import JSONObject, RequestId
from ..._core.oauth import OAuthSettings, Principal
from ..._mcp.admission import parse_body
from ..._mcp.refusal import SERVER_ERROR, HttpRefusal
from ..._oauth import Accepted, Denied, TokenVerifier, challenge, protected_resource_metadata
from .request import BadRequest, Request, Unverified
from .routing import WELL_KNOWN

logger = logging.getLogger("channels.http")

Headers = Sequence[tuple[bytes, bytes]]

# A 503 (the issuer unreachable, no cached key) asks the client to come back after this many
# seconds: the verifier retries a failed fetch after a few seconds at first (channels/_oauth/keys.py).
RETRY_AFTER = b"10"


def metadata_url(resource: str) -> str:
    """Where a client finds the metadata of ``resource``.

    RFC 9728 §3.1: the well-known path inserted between the host and the resource's path.
    """
    parts = urlsplit(resource)
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{parts.path.rstrip('/')}"


def presented_token(headers: Headers) -> str | None:
    """The bearer token of the one ``Authorization`` header, or ``None`` (none, several, another scheme)."""
    values = header_values(headers, b"authorization")
    return bearer_token(values[0]) if len(values) == 1 else None


class HttpOAuth:
    """The OAuth check of one HTTP address (see the module docstring).

    Args:
        settings: the address's settings, its audiences filled in
            (:func:`~channels.resolve_audience`); the first one is the resource identifier.
        tokens: static bearer tokens accepted beside OAuth, or ``None``.
        endpoint_path: the MCP endpoint's path.
    """

    def __init__(self, settings: OAuthSettings, tokens: TokenSet | None, endpoint_path: str) -> None:
        self.settings = settings
        self.tokens = tokens
        self.verifier = TokenVerifier(settings, settings.audiences)
        resource = settings.audiences[0]
        self.metadata_url = metadata_url(resource)
        self.document: JSONObject = protected_resource_metadata(settings, resource)
        # The document is served at the bare well-known path and with the endpoint's path (and
        # the resource's, where a reverse proxy maps another public path onto this endpoint).
        self.metadata_paths = frozenset(
            {WELL_KNOWN, WELL_KNOWN + endpoint_path.rstrip("/"), urlsplit(self.metadata_url).path}
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the verifier (its HTTP client, its key refreshes) until cancelled."""
        await self.verifier.run(task_status=task_status)

    def check_head(
        self, peer: PeerInfo, method: bytes, path: str, headers: Headers, cors: Headers
    ) -> BadRequest | str | Principal | Unverified:
        """The credential of a request's head, or the refusal to answer at once (logged here).

        A static token's label, a principal, or :class:`Unverified` (a fetch is needed).
        """
        token = presented_token(headers)
        if self.tokens is not None and token is not None:
            label = self.tokens.match(token)
            if label is not None:
                return label
        verdict = self.verifier.verify_now(token)
        if verdict is None:
            return Unverified()
        if isinstance(verdict, Accepted):
            return verdict.principal
        refusal = self.refusal(peer, method.decode("latin-1", "replace"), path, verdict)
        return BadRequest(
            refusal.status,
            refusal.message,
            headers=[*refusal.response_headers(), *cors],
            body=refusal.body(),
            logged=True,
        )

    async def finish(self, peer: PeerInfo, request: Request) -> Principal | HttpRefusal:
        """Verify the token the head check could not decide, fetching what it needs (bounded).

        A refusal names the request's id when its body holds one request.
        """
        parsed = parse_body(request.body)
        request_id = parsed.get("id") if isinstance(parsed, dict) else None
        try:
            verdict = await self.verifier.verify(presented_token(request.headers))
        except RuntimeError:  # the verifier's task has ended: the listener is stopping
            return HttpRefusal(
                503, SERVER_ERROR, "Service Unavailable: the server is stopping", "shutting-down", request_id
            )
        if isinstance(verdict, Accepted):
            return verdict.principal
        return self.refusal(peer, request.method, request.path, verdict, request_id)

    def refusal(
        self, peer: PeerInfo, method: str, path: str, denied: Denied, request_id: RequestId | None = None
    ) -> HttpRefusal:
        """The answer to a refused token, logged (one INFO line: peer, outcome, why)."""
        logger.info("%s: %s %s refused: OAuth %s: %s", peer, method, path, denied.outcome, denied.description)
        value = challenge(denied, self.metadata_url, " ".join(self.settings.scopes))
        headers = [(b"www-authenticate", value.encode())]
        if denied.status == 503:
            headers.append((b"retry-after", RETRY_AFTER))
        phrase = HTTPStatus(denied.status).phrase
        return HttpRefusal(
            denied.status,
            SERVER_ERROR,
            f"{phrase}: {denied.description}",
            denied.outcome,
            request_id,
            headers=tuple(headers),
        )
