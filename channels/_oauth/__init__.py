"""OAuth 2.1 resource server: validating access tokens (JWT, or opaque by RFC 7662 introspection).

The sans-IO modules: ``verdict`` holds the verdicts (:class:`Accepted`, :class:`Denied`), the
``WWW-Authenticate`` challenge and the RFC 9728 protected-resource metadata; ``token`` reads a JWT
without trusting it, then checks its signature and claims (joserfc); ``discovery`` says where an
issuer's metadata lives and which URLs may be fetched; ``keys`` is one issuer's key cache and its
fetch schedule; ``introspection`` judges and caches RFC 7662 answers. With I/O: ``fetch`` (bounded
HTTP requests, httpx2) and ``verifier``, the :class:`TokenVerifier` a listener owns.

joserfc and httpx2 (with cryptography and its cffi backend, anyio, httpcore2, truststore: about
150 modules, 12 MiB and 0.1 s) are imported inside the functions that use them, types under
``TYPE_CHECKING``: ``import channels`` must not load them, since OAuth is off unless a listener
asks for it. A :class:`TokenVerifier` imports them when it is created (``verifier.DEPENDENCIES``),
its ``run`` task the rest when it makes its HTTP client: both at the listener's start, before any
request. tests/channels/oauth/test_oauth_imports.py holds them to it.

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
