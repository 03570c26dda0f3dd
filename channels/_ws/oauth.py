"""OAuth access tokens on a WebSocket upgrade: the same checks as an HTTP request's.

One :class:`WsOAuth` per WebSocket listener with ``ListenOptions.oauth``, owned by it: the listener
runs its :class:`~channels.TokenVerifier` in its serve nursery (:meth:`WsOAuth.run`). The upgrade
(:func:`~channels._ws.upgrade.accept_upgrade`) asks :meth:`WsOAuth.check` once Host and Origin
passed: a static bearer token that matches wins (its label, no principal); else the verifier
decides, from its cache or, if it must, by fetching (bounded by its timeouts, and by the handshake
timeout around the whole upgrade). A refusal is answered as over HTTP (docs/security.md, "OAuth"):
the verifier's status, its ``WWW-Authenticate`` challenge, ``Retry-After`` on 503, and a JSON-RPC
error body whose ``data.reason`` is the outcome. A WebSocket listener serves no metadata document,
so its challenge names none (an HTTP listener's does).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from http import HTTPStatus

import attrs
import trio

from .._core.auth import TokenSet, bearer_token
from .._core.guard import header_values
from .._core.oauth import OAuthSettings, Principal
from .._oauth import Accepted, Denied, TokenVerifier, challenge

Headers = Sequence[tuple[bytes, bytes]]

# As an HTTP listener's 503 (channels/_http/server/oauth.py): come back after this many seconds.
RETRY_AFTER = "10"


@attrs.frozen
class WsRefusal:
    """How an upgrade is refused for its token: status, headers and JSON-RPC error body."""

    denied: Denied
    required_scope: str = ""

    @property
    def status(self) -> int:
        return self.denied.status

    @property
    def message(self) -> str:
        return f"{HTTPStatus(self.denied.status).phrase}: {self.denied.description}"

    def headers(self) -> list[tuple[str, str]]:
        value = challenge(self.denied, None, self.required_scope)
        headers = [("Content-Type", "application/json"), ("WWW-Authenticate", value)]
        if self.denied.status == 503:
            headers.append(("Retry-After", RETRY_AFTER))
        return headers

    def body(self) -> str:
        error = {"code": -32000, "message": self.message, "data": {"reason": self.denied.outcome}}
        return json.dumps({"jsonrpc": "2.0", "id": None, "error": error})

    def log_text(self) -> str:
        """The reason, for the log line of the refused upgrade (never token content)."""
        return f"OAuth {self.denied.outcome}: {self.denied.description}"


class WsOAuth:
    """The OAuth check of one WebSocket listener (see the module docstring).

    Args:
        settings: its settings, audiences filled in (:func:`~channels.resolve_audience`).
        tokens: static bearer tokens accepted beside OAuth, or ``None``.
    """

    def __init__(self, settings: OAuthSettings, tokens: TokenSet | None) -> None:
        self.tokens = tokens
        self.verifier = TokenVerifier(settings, settings.audiences)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the verifier (its HTTP client, its key refreshes) until cancelled."""
        await self.verifier.run(task_status=task_status)

    @staticmethod
    def sort(outcome: str | Principal | WsRefusal) -> tuple[WsRefusal | None, str | Principal | None]:
        """:meth:`check`'s outcome as (refusal, credential), one of them ``None``.

        The upgrade calls it: it does not import this module's classes unless OAuth is used.
        """
        if isinstance(outcome, WsRefusal):
            return outcome, None
        return None, outcome

    async def check(self, headers: Headers) -> str | Principal | WsRefusal:
        """The upgrade's credential (a static token's label, or a principal), or its refusal."""
        values = header_values(headers, b"authorization")
        token = bearer_token(values[0]) if len(values) == 1 else None
        if self.tokens is not None and token is not None:
            label = self.tokens.match(token)
            if label is not None:
                return label
        verdict = self.verifier.verify_now(token)
        if verdict is None:
            try:
                verdict = await self.verifier.verify(token)
            except RuntimeError:  # the verifier's task has ended: the listener is stopping
                return WsRefusal(Denied(503, None, "the server is stopping", "shutting-down"))
        if isinstance(verdict, Accepted):
            return verdict.principal
        return WsRefusal(verdict, " ".join(self.verifier.settings.scopes))
