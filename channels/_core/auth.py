"""Bearer tokens: loading them safely and checking them in constant time (sans-IO).

A :class:`TokenSet` holds every token a listener accepts (several at once, so a token can be
rotated without downtime: add the new one, move clients, remove the old one). Tokens are kept only
as SHA-256 digests and compared with :func:`hmac.compare_digest` against every entry, so neither
the comparison time nor an early exit tells a guesser how much of a token was right, or which one.
Nothing here ever puts a token in an exception message or a log line.

How a client presents its token depends on the channel:

* WebSocket (and, later, HTTP): the ``Authorization: Bearer TOKEN`` header of the upgrade request.
* Newline channels (``tcp:``, ``tls:``): the first line of the connection is the notification
  ``{"jsonrpc": "2.0", "method": "bridge/authenticate", "params": {"token": "TOKEN"}}``
  (:func:`authenticate_message`). Nothing before it reaches the server; on success the bridge says
  nothing and the connection goes on as usual; on failure it answers with :data:`UNAUTHORIZED`
  and closes.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import stat
from collections.abc import Iterable, Mapping

import attrs

from .jsonrpc import JSONObject

AUTHENTICATE_METHOD = "bridge/authenticate"
"""The method of the first-message notification that carries a token on newline channels."""

UNAUTHORIZED = -31004
"""JSON-RPC error code for a connection that did not authenticate (outside the reserved range,
like the bridge's other codes; HTTP and WebSocket answer 401 instead)."""

# RFC 6750 §2.1 b64token: the characters a bearer token may use in an Authorization header.
TOKEN_SYNTAX = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
# 16 characters of a random token are 96 bits or more: below that a token can be guessed online.
# `python -c "import secrets; print(secrets.token_urlsafe(32))"` gives 43 characters.
MIN_TOKEN_LENGTH = 16
TOKEN_HINT = "generate one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"


class CredentialError(ValueError):
    """A token source that cannot be used; the message names the source and the fix.

    It never includes the token itself.
    """


def _digest(token: str | bytes) -> bytes:
    return hashlib.sha256(token.encode() if isinstance(token, str) else token).digest()


@attrs.frozen(repr=False)
class TokenSet:
    """The bearer tokens a listener accepts, as digests, each with a label for logs.

    Build one with :meth:`of` or the ``tokens_from_*`` functions; ``a | b`` accepts the tokens of
    both, and ``len()`` counts them. Its ``repr`` shows only the count.

    Attributes:
        labels: where each token came from (``"file /etc/mcp/token line 2"``), in order; logs say
            which one a client used, so an operator can tell when an old token has gone unused.
    """

    _digests: tuple[bytes, ...]
    labels: tuple[str, ...]

    def __repr__(self) -> str:
        return f"TokenSet({len(self.labels)} tokens)"

    def __len__(self) -> int:
        return len(self.labels)

    @classmethod
    def of(cls, tokens: Iterable[tuple[str, str]]) -> TokenSet:
        """A set from ``(token, label)`` pairs.

        Args:
            tokens: each token with the label logs will name it by (never the token itself).

        Raises:
            CredentialError: a token is malformed or too short (named by its label).
        """
        digests, labels = [], []
        for token, label in tokens:
            _check_token(token, label)  # (again, for callers that did not read a file)
            digests.append(_digest(token))
            labels.append(label)
        return cls(tuple(digests), tuple(labels))

    def __or__(self, other: TokenSet) -> TokenSet:
        return TokenSet(self._digests + other._digests, self.labels + other.labels)

    def match(self, candidate: str | bytes | None) -> str | None:
        """The label of the token ``candidate`` equals, or ``None``.

        Every stored digest is compared, whatever matches, so the time taken does not depend on
        which token (if any) was presented.

        Args:
            candidate: the token a client presented, or ``None`` if it presented none (which
                matches nothing).
        """
        if candidate is None:
            return None
        presented = _digest(candidate)
        matched = None
        for digest, label in zip(self._digests, self.labels, strict=True):
            if hmac.compare_digest(digest, presented) and matched is None:
                matched = label
        return matched


def _check_token(token: str, label: str) -> None:
    if not TOKEN_SYNTAX.fullmatch(token):
        raise CredentialError(
            f"{label}: not a valid bearer token (RFC 6750 characters: letters, "
            f"digits and -._~+/ only); {TOKEN_HINT}"
        )
    if len(token) < MIN_TOKEN_LENGTH:
        raise CredentialError(f"{label}: token is shorter than {MIN_TOKEN_LENGTH} characters; {TOKEN_HINT}")


def read_private_lines(path: str, what: str) -> list[tuple[int, str]]:
    """The lines of ``path`` that hold something, stripped, with their numbers (from 1).

    Blank lines and ``#`` comments are skipped. The file holds secrets (tokens, a client secret),
    so it must not be readable by other users, like ssh's rule for private keys. Messages name it
    as ``{what} {path}`` and never show what it holds.

    Raises:
        CredentialError: it cannot be read, is readable by other users, or is not UTF-8 text.
    """
    try:
        with open(path, "rb") as file:
            mode = os.fstat(file.fileno()).st_mode
            data = file.read()
    except OSError as exc:
        raise CredentialError(f"{what} {path}: {exc.strerror}") from None
    if mode & stat.S_IROTH:
        raise CredentialError(f"{what} {path} is readable by other users; run: chmod o-rwx {path}")
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise CredentialError(f"{what} {path}: not UTF-8 text") from None
    return [
        (number, line.strip())
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]


def _read_file(path: str) -> list[tuple[str, str]]:
    """``(token, label)`` for each token line of ``path`` (see :func:`tokens_from_file`)."""
    tokens = [
        (line, f"token file {path} line {number}") for number, line in read_private_lines(path, "token file")
    ]
    if not tokens:
        raise CredentialError(f"token file {path} holds no token; {TOKEN_HINT}")
    for token, label in tokens:
        _check_token(token, label)
    return tokens


def _read_env(name: str, environ: Mapping[str, str] | None) -> list[tuple[str, str]]:
    value = (os.environ if environ is None else environ).get(name)
    if value is None:
        raise CredentialError(f"environment variable {name} is not set")
    tokens = [
        (token, f"environment variable {name} token {number}")
        for number, token in enumerate(value.split(), start=1)
    ]
    if not tokens:
        raise CredentialError(f"environment variable {name} is empty; {TOKEN_HINT}")
    for token, label in tokens:
        _check_token(token, label)
    return tokens


def tokens_from_file(path: str) -> TokenSet:
    """Every token in ``path``: one per line; blank lines and ``#`` comments are skipped.

    The file must not be readable by other users (like ssh's rule for private keys); a systemd
    credential (``$CREDENTIALS_DIRECTORY/NAME``) already is private.

    Raises:
        CredentialError: unreadable, readable by others, empty, or a malformed token.
    """
    return TokenSet.of(_read_file(path))


def tokens_from_env(name: str, environ: Mapping[str, str] | None = None) -> TokenSet:
    """The tokens in environment variable ``name`` (several may be separated by whitespace).

    Raises:
        CredentialError: unset, empty or malformed.
    """
    return TokenSet.of(_read_env(name, environ))


def tokens_from_credential(name: str, environ: Mapping[str, str] | None = None) -> TokenSet:
    """The tokens in systemd credential ``name`` (``LoadCredential=`` in the unit).

    Raises:
        CredentialError: no ``$CREDENTIALS_DIRECTORY`` (not started by systemd with credentials),
            or the file's errors.
    """
    directory = (os.environ if environ is None else environ).get("CREDENTIALS_DIRECTORY")
    if not directory:
        raise CredentialError(
            f"credential {name}: $CREDENTIALS_DIRECTORY is not set; add "
            f"LoadCredential={name}:/path/to/token to the service unit"
        )
    if "/" in name or name in ("", ".", ".."):
        raise CredentialError(f"credential {name!r}: expected a bare credential name")
    return tokens_from_file(os.path.join(directory, name))


def client_token_from_file(path: str) -> str:
    """The token a client presents, from the first token line of ``path`` (``connect``'s side).

    Raises:
        CredentialError: as :func:`tokens_from_file`.
    """
    return _read_file(path)[0][0]


def client_token_from_env(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The token a client presents, from environment variable ``name``.

    Raises:
        CredentialError: as :func:`tokens_from_env`, or it holds more than one token.
    """
    tokens = _read_env(name, environ)
    if len(tokens) > 1:
        raise CredentialError(
            f"environment variable {name} holds {len(tokens)} tokens; a client presents one"
        )
    return tokens[0][0]


def token_of_message(message: JSONObject) -> str | None:
    """The token in a ``bridge/authenticate`` notification, or ``None`` if it is not one."""
    if message.get("method") != AUTHENTICATE_METHOD or "id" in message:
        return None
    params = message.get("params")
    token = params.get("token") if isinstance(params, dict) else None
    return token if isinstance(token, str) else None


def authenticate_message(token: str) -> JSONObject:
    """The first message a client sends on a newline channel that requires a token.

    :func:`~channels.connect` sends it itself on ``tcp:`` and ``tls:`` when
    ``ConnectOptions.token`` is set; this is for clients that build their own connection.
    """
    return {"jsonrpc": "2.0", "method": AUTHENTICATE_METHOD, "params": {"token": token}}


def bearer_token(value: bytes) -> str | None:
    """The token in an ``Authorization`` header value (``Bearer TOKEN``), or ``None``."""
    scheme, _, token = value.decode("latin-1").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None
