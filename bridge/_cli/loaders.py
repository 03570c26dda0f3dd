"""Small value loaders shared by the command line and the configuration file.

Bearer tokens from files, environment variables and systemd credentials; an OAuth
protected-resource metadata document; user and group ids from names. Each raises
:class:`ConfigError` naming the option or field (``flag``, ``field``) it was given for, so the
command line and the file report the same problem in their own words.
"""

from __future__ import annotations

import grp
import json
import pwd
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from .._errors import ConfigError

if TYPE_CHECKING:
    from channels import TokenSet


def load_tokens(
    files: Sequence[str], variables: Sequence[str], credentials: Sequence[str]
) -> TokenSet | None:
    """Every token from these files, environment variables and systemd credentials, or ``None``.

    Raises:
        ConfigError: a source cannot be used (the message names it, never a token).
    """
    if not (files or variables or credentials):
        return None
    # Here, not at the top: a daemon without tokens has no use for channels._core.auth.
    from channels import CredentialError, tokens_from_credential, tokens_from_env, tokens_from_file

    loaders = (
        [partial(tokens_from_file, path) for path in files]
        + [partial(tokens_from_env, name) for name in variables]
        + [partial(tokens_from_credential, name) for name in credentials]
    )
    tokens: TokenSet | None = None
    for load in loaders:
        try:
            loaded = load()
        except CredentialError as exc:
            raise ConfigError(f"bearer token: {exc}") from None
        tokens = loaded if tokens is None else tokens | loaded
    return tokens


def load_resource_metadata(path: str | None, field: str) -> dict[str, Any] | None:
    """Read an OAuth protected-resource metadata document (a JSON object), or ``None``.

    Raises:
        ConfigError: the file cannot be read or is not a JSON object, naming ``field``.
    """
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as file:
            document = json.load(file)
    except OSError as exc:
        raise ConfigError(f"{field} {path!r}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ConfigError(f"{field} {path!r}: not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise ConfigError(
            f"{field} {path!r}: expected a JSON object such as "
            '{"authorization_servers": ["https://auth.example"]}'
        )
    return document


def resolve_group(text: str, *, flag: str = "--socket-group") -> int:
    """A group id from a name or a number.

    Raises:
        ConfigError: no such group, naming ``flag`` (an option, or a configuration field).
    """
    if text.isascii() and text.isdigit():
        return int(text)
    try:
        return grp.getgrnam(text).gr_gid
    except KeyError:
        raise ConfigError(f"{flag}: no group named {text!r}") from None


def resolve_user(text: str, *, flag: str = "--allow-uid") -> int:
    """A user id from a name or a number.

    Raises:
        ConfigError: no such user, naming ``flag`` (an option, or a configuration field).
    """
    if text.isascii() and text.isdigit():
        return int(text)
    try:
        return pwd.getpwnam(text).pw_uid
    except KeyError:
        raise ConfigError(f"{flag}: no user named {text!r}") from None
