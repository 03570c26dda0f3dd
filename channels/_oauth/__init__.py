"""OAuth 2.1 resource server: validating access tokens (JWT, or opaque by RFC 7662 introspection).

``verdict`` (sans-IO) holds the verdicts (:class:`Accepted`, :class:`Denied`), the
``WWW-Authenticate`` challenge and the RFC 9728 protected-resource metadata; ``verifier`` the
:class:`TokenVerifier` a listener owns, which decides from cached keys and fetches discovery
documents, key sets and introspection results when it must.

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
