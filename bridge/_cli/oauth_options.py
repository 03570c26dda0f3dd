"""``--oauth-issuer`` and its options, on the command line and in the file, to :class:`OAuthSettings`.

The same rules for both (docs/security.md, "OAuth"), each error naming the option or field and
the fix: issuers and the introspection endpoint are ``https://`` (``http://`` only on a loopback
host, for local setups and tests); audiences are absolute URIs without a fragment (RFC 8707 §2);
scopes are RFC 6749 scope tokens; introspection needs the bridge's client credentials, from a
file readable by its owner only, as token files are. The audience default (the endpoint's own
URI) is the listener's (:func:`channels.resolve_audience`); it is checked here too, so that
``check-config`` reports a wildcard bind without ``oauth_audience``.
"""

from __future__ import annotations

import argparse
import ipaddress
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from channels import Address, ListenError

from .._errors import ConfigError

if TYPE_CHECKING:
    from channels import OAuthSettings  # loads on first use: only when OAuth is configured

    from .schema import ListenerEntry, SharedListenerEntry

# RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ), printable ASCII but space, " and \.
SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
LOOPBACK_HOST_NAMES = frozenset({"localhost"})
# The option (command line) each setting has; the configuration file's key is its name.
FLAGS = {
    "oauth_issuer": "--oauth-issuer",
    "oauth_audience": "--oauth-audience",
    "oauth_scope": "--oauth-scope",
    "oauth_introspection": "--oauth-introspection",
    "oauth_client_file": "--oauth-client-file",
}
# Names an option or field in messages: FLAGS' values on the command line, "servers.x.listeners[0].KEY"
# in a file.
Naming = Callable[[str], str]


def add_oauth(group: argparse._ArgumentGroup) -> None:
    """The OAuth options (docs/security.md, "OAuth")."""
    group.add_argument(
        "--oauth-issuer",
        action="append",
        default=[],
        metavar="URL",
        help="HTTP and WebSocket listeners accept OAuth access tokens from this authorization "
        "server (its issuer URL, https://; http:// only on loopback); repeatable",
    )
    group.add_argument(
        "--oauth-audience",
        action="append",
        default=[],
        metavar="URI",
        help="the audience tokens must be issued for (repeatable; default: the endpoint's own "
        "URI, e.g. http://127.0.0.1:7302/mcp; required on a 0.0.0.0 or :: bind)",
    )
    group.add_argument(
        "--oauth-scope",
        action="append",
        default=[],
        metavar="SCOPE",
        help="a scope every request's token must carry, else 403 (repeatable)",
    )
    group.add_argument(
        "--oauth-introspection",
        metavar="URL",
        help="validate opaque tokens at this RFC 7662 introspection endpoint (needs --oauth-client-file)",
    )
    group.add_argument(
        "--oauth-client-file",
        metavar="FILE",
        help="the bridge's client id and secret at the introspection endpoint: two lines "
        "(the file must not be readable by others)",
    )


def flag_name(key: str) -> str:
    """How the command line names setting ``key`` (``oauth_issuer`` → ``--oauth-issuer``)."""
    return FLAGS[key]


def build_oauth(
    *,
    issuers: Sequence[str],
    audiences: Sequence[str],
    scopes: Sequence[str],
    introspection: str | None,
    client_file: str | None,
    name: Naming,
) -> OAuthSettings | None:
    """The settings these values describe, or ``None`` if no issuer is given and nothing else is.

    Raises:
        ConfigError: a bad value, or one without the others it needs, naming it with ``name``.
    """
    if not issuers:
        given = [
            key
            for key, value in (
                ("oauth_audience", audiences),
                ("oauth_scope", scopes),
                ("oauth_introspection", introspection),
                ("oauth_client_file", client_file),
            )
            if value
        ]
        if given:
            raise ConfigError(
                f"{name(given[0])} applies to OAuth access tokens: add {name('oauth_issuer')} URL "
                "(the authorization server whose tokens are accepted)"
            )
        return None
    for issuer in issuers:
        _check_url(issuer, name("oauth_issuer"), "the authorization server's issuer URL")
    for audience in audiences:
        parts = urlsplit(audience)
        if not parts.scheme or not parts.netloc or parts.fragment or "#" in audience:
            raise ConfigError(
                f"{name('oauth_audience')} {audience!r}: expected an absolute URI without a fragment "
                "(RFC 8707), such as https://mcp.example.com/mcp"
            )
    for scope in scopes:
        if not SCOPE_TOKEN.fullmatch(scope):
            raise ConfigError(
                f"{name('oauth_scope')} {scope!r}: expected one scope (printable ASCII, no space, "
                "quote or backslash), such as mcp:tools; repeat the option for several"
            )
    client_id = client_secret = None
    if introspection is not None:
        _check_url(introspection, name("oauth_introspection"), "the introspection endpoint")
        if client_file is None:
            raise ConfigError(
                f"{name('oauth_introspection')} needs the bridge's client credentials: add "
                f"{name('oauth_client_file')} FILE (client id and secret on two lines, mode 0600)"
            )
        client_id, client_secret = read_client_file(client_file, name("oauth_client_file"))
    elif client_file is not None:
        raise ConfigError(
            f"{name('oauth_client_file')} is for the introspection endpoint: add "
            f"{name('oauth_introspection')} URL, or remove it"
        )
    from channels import OAuthSettings

    return OAuthSettings(
        issuers=tuple(issuers),
        audiences=tuple(audiences),
        scopes=tuple(scopes),
        introspection=introspection,
        client_id=client_id,
        client_secret=client_secret,
    )


def _check_url(url: str, where: str, what: str) -> None:
    """``url`` must be ``https://HOST...``, or ``http://`` with a loopback host.

    Raises:
        ConfigError: naming ``where``.
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("https", "http") or not parts.hostname:
        raise ConfigError(
            f"{where} {url!r}: expected {what} as https://HOST/..., e.g. https://auth.example.com"
        )
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ConfigError(f"{where} {url!r}: {what} takes no query, fragment or credentials")
    if parts.scheme == "http" and not _loopback_host(parts.hostname):
        raise ConfigError(
            f"{where} {url!r}: http:// is accepted only on a loopback host (127.0.0.1, ::1, "
            "localhost); use https://, which keeps keys and tokens from being read or changed on the way"
        )


def _loopback_host(host: str) -> bool:
    if host.lower() in LOOPBACK_HOST_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def oauth_keys(entry: ListenerEntry | SharedListenerEntry, where: str) -> OAuthSettings | None:
    """The ``oauth_*`` keys of the configuration file's listener table ``where``, or ``None``.

    A server's own listener and a shared one take the same keys, read as the command line's options.

    Raises:
        ConfigError: as :func:`build_oauth`, naming the key (``{where}.oauth_issuer``...).
    """
    return build_oauth(
        issuers=entry.oauth_issuer,
        audiences=entry.oauth_audience,
        scopes=entry.oauth_scope,
        introspection=entry.oauth_introspection,
        client_file=entry.oauth_client_file,
        name=lambda key: f"{where}.{key}",
    )


def read_client_file(path: str, where: str) -> tuple[str, str]:
    """The client id and secret in ``path``: the first two lines (blank and ``#`` lines skipped).

    The file must not be readable by other users, as token files.

    Raises:
        ConfigError: unreadable, readable by others, or not two lines; never showing the secret.
    """
    from channels import CredentialError
    from channels._core.auth import read_private_lines  # the token files' rule, for the client file

    try:
        lines = [line for _, line in read_private_lines(path, where)]
    except CredentialError as exc:
        raise ConfigError(str(exc)) from None
    if len(lines) != 2:
        raise ConfigError(
            f"{where} {path}: expected two lines, the client id then the client secret; found {len(lines)}"
        )
    return lines[0], lines[1]


def check_audience(settings: OAuthSettings | None, address: Address, where: str) -> None:
    """The listener at ``address`` can fill in its default audience (see :func:`channels.resolve_audience`).

    Raises:
        ConfigError: a wildcard bind without an audience, naming ``where`` and the fix.
    """
    if settings is None or settings.audiences:
        return
    endpoint = getattr(address, "endpoint", None)
    if endpoint is None:
        if address.scheme == "http+fd":
            raise ConfigError(
                f"{where}: OAuth on a socket-activated listener needs its public URI as the token "
                "audience: pass --oauth-audience (oauth_audience in a configuration file), for "
                "example --oauth-audience https://mcp.example.com/mcp"
            )
        return
    from channels import resolve_audience  # only an address with an endpoint (WebSocket, HTTP) gets here

    try:
        resolve_audience(settings, endpoint, address)
    except ListenError as exc:
        raise ConfigError(f"{where}: {exc}") from None
