"""Outgoing HTTP for the verifier: GET a JSON document, POST an introspection form; bounded.

Every request goes through one ``httpx2.AsyncClient`` (owned by
:meth:`~channels._oauth.TokenVerifier.run`), under :data:`TIMEOUT` for connecting and for each
read and :data:`DEADLINE` for the whole exchange, reads at most :data:`MAX_BODY_BYTES`, follows no
redirect, and only to ``https://`` URLs or ``http://`` on loopback (checked before each request).
Failures are :class:`FetchError`, whose message is one sentence for the log (never a secret).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import trio

from .discovery import DiscoveryError, check_url

if TYPE_CHECKING:
    import httpx2

# Connect, read, write and pool timeouts of each request: an issuer that does not answer within
# 5 s is down for our purpose (the MCP SDK uses 5 s for its own discovery requests too).
TIMEOUT = 5.0
# The whole exchange, a slow trickle of bytes included.
DEADLINE = 10.0
# Metadata documents and key sets are a few KiB; Entra ID's JWKS is ~20 KiB. 1 MiB is ample.
MAX_BODY_BYTES = 1024 * 1024


class FetchError(Exception):
    """A request that gave no usable document: unreachable, timed out, a bad status, too big, not JSON."""


class NotFound(FetchError):
    """The server answered, but with a 4xx status: the next discovery URL may still work."""


def new_client(verify: Any = True) -> httpx2.AsyncClient:
    """The client a verifier owns (``verify``: an ``ssl.SSLContext``, or ``True`` for the system CAs)."""
    import httpx2  # (imported here: see the package docstring)

    return httpx2.AsyncClient(
        timeout=httpx2.Timeout(TIMEOUT),
        follow_redirects=False,  # a redirect could lead to a non-https or attacker-chosen URL
        trust_env=False,  # no proxy or CA bundle from the environment: what is configured is what is used
        verify=verify,
        headers={"accept": "application/json"},
    )


async def get_json(client: httpx2.AsyncClient, url: str, what: str) -> Any:
    """GET ``url`` and decode its JSON body (``what`` names the document in errors)."""
    return await _request(client, "GET", url, what)


async def post_form(
    client: httpx2.AsyncClient, url: str, form: dict[str, str], auth: tuple[str, str] | None, what: str
) -> Any:
    """POST a form (with HTTP Basic ``auth``) and decode the JSON answer."""
    return await _request(client, "POST", url, what, data=form, auth=auth)


async def _request(client: httpx2.AsyncClient, method: str, url: str, what: str, **kwargs: Any) -> Any:
    import httpx2  # (already imported by new_client, which made the client)

    try:
        check_url(url, what)
    except DiscoveryError as error:
        raise FetchError(str(error)) from None
    body = bytearray()
    with trio.move_on_after(DEADLINE) as scope:
        try:
            async with client.stream(method, url, **kwargs) as response:
                status = response.status_code
                if status == 200:
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > MAX_BODY_BYTES:
                            raise FetchError(f"the {what} at {url} is larger than {MAX_BODY_BYTES} bytes")
        except httpx2.HTTPError as error:
            reason = type(error).__name__
            raise FetchError(f"the {what} at {url} could not be fetched ({reason})") from None
    if scope.cancelled_caught:
        raise FetchError(f"the {what} at {url} took longer than {DEADLINE:g} s")
    if 400 <= status < 500:
        raise NotFound(f"the {what} at {url} answered HTTP {status}")
    if status != 200:
        raise FetchError(f"the {what} at {url} answered HTTP {status}")
    try:
        return json.loads(body)
    except ValueError:
        raise FetchError(f"the {what} at {url} is not JSON") from None
