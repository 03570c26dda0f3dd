"""OAuth 2.1 resource server: validating access tokens (JWT, or opaque by RFC 7662 introspection).

The sans-IO modules: ``verdict`` holds the verdicts (:class:`Accepted`, :class:`Denied`), the
``WWW-Authenticate`` challenge and the RFC 9728 protected-resource metadata; ``token`` reads a JWT
without trusting it, then checks its signature and claims (joserfc); ``discovery`` says where an
issuer's metadata lives and which URLs may be fetched; ``keys`` is one issuer's key cache and its
fetch schedule; ``introspection`` judges and caches RFC 7662 answers. With I/O: ``fetch`` (bounded
HTTP requests, httpx2) and ``verifier``, the :class:`TokenVerifier` a listener owns.

Import rule: ``channels._core`` only (plus third-party packages: joserfc, httpx2); used by
``channels._http`` and ``channels._ws``.
"""

from .verdict import (
    Accepted,
    Denied,
    challenge,
    protected_resource_metadata,
)
from .verifier import (
    TokenVerifier,
)

__all__ = [
    "Accepted",
    "Denied",
    "TokenVerifier",
    "challenge",
    "protected_resource_metadata",
]
