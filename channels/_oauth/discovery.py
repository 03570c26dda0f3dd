"""Where an issuer's metadata lives, what a usable document says, and which URLs may be fetched (sans-IO).

Discovery follows RFC 8414 first (``/.well-known/oauth-authorization-server`` inserted before the
issuer's path), then OpenID Connect Discovery (``/.well-known/openid-configuration``, inserted as
RFC 8414 §5 allows, then appended to the issuer as OIDC Discovery §4 says), the order the MCP
authorization spec gives clients. A document counts only if its ``issuer`` is exactly the
configured one (RFC 8414 §3.3: otherwise an attacker's metadata could name its own keys).
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from joserfc.jwk import Key


class DiscoveryError(Exception):
    """A metadata or key-set document that cannot be used; the message says why in one sentence."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, without brackets) is this machine."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: str, what: str) -> str:
    """``url`` if it may be fetched: ``https://``, or ``http://`` on a loopback host only.

    Raises:
        DiscoveryError: it may not (the message names ``what`` it is).
    """
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return url
    if parts.scheme == "http" and parts.hostname and is_loopback(parts.hostname):
        return url
    raise DiscoveryError(f"the {what} {url!r} is not https:// (http:// is allowed on loopback hosts only)")


def metadata_urls(issuer: str) -> list[str]:
    """The discovery documents to try for ``issuer``, in order (no duplicates)."""
    parts = urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    urls = [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}/.well-known/openid-configuration{path}",
        f"{origin}{path}/.well-known/openid-configuration",
    ]
    return list(dict.fromkeys(urls))


def jwks_uri(document: Any, issuer: str) -> str:
    """The ``jwks_uri`` of an issuer's metadata document, after checking it is that issuer's.

    Raises:
        DiscoveryError: not a JSON object, another ``issuer``, or no usable ``jwks_uri``.
    """
    if not isinstance(document, dict):
        raise DiscoveryError(f"the metadata of {issuer} is not a JSON object")
    if document.get("issuer") != issuer:
        raise DiscoveryError(f"the metadata found for {issuer} names another issuer")
    uri = document.get("jwks_uri")
    if not isinstance(uri, str):
        raise DiscoveryError(f"the metadata of {issuer} has no jwks_uri")
    return check_url(uri, f"jwks_uri of {issuer}")


def signing_keys(document: Any, issuer: str) -> tuple[Key, ...]:
    """The public signing keys in a JWK Set document (RFC 7517 §5).

    Keys joserfc cannot read, keys for encryption (``use: enc``), symmetric keys and private ones
    are left out: a resource server verifies with public keys only.

    Raises:
        DiscoveryError: not a JWK Set.
    """
    from joserfc.errors import JoseError  # (imported here: see the package docstring)
    from joserfc.jwk import KeySet

    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise DiscoveryError(f"the key set of {issuer} is not a JWK Set")
    keys = []
    for entry in document["keys"]:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig" or entry.get("kty") == "oct":
            continue
        if "d" in entry:
            continue  # a private key published by mistake: refuse to trust anything signed with it
        try:
            keys.extend(KeySet.import_key_set({"keys": [entry]}).keys)
        except (JoseError, ValueError, TypeError):
            continue
    return tuple(keys)
