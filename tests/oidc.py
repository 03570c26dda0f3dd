"""A real OAuth 2.0 authorization server for the OAuth tests: oidc-provider, on loopback.

``async with authorization_server() as issuer:`` starts ``tests/oidc_provider.mjs`` (oidc-provider
under the Node 22 of ``tests/conformance/.node``, both installed by ``tests/conformance/install.sh``)
as a real process on 127.0.0.1 and a free port, and kills it on exit. It serves RFC 8414 and OpenID
discovery, a JWKS, a token endpoint (client credentials, RFC 8707 resource indicators), RFC 7662
introspection and RFC 7009 revocation. The test process makes the signing keys (joserfc), so a test
can also sign crafted tokens (expired, wrong audience, future ``nbf``...) with the issuer's real key.

Three clients are registered (:class:`Client`): ``jwt_client`` gets JWT access tokens (RFC 9068
``at+jwt``, signed with the first key of the set), ``opaque_client`` opaque ones, to be introspected,
and ``introspection_client`` is the bridge's own, for its ``--oauth-client-file``. Any scope a token
request asks for is granted, for whichever resource (audience) it names.

Without Node or oidc-provider the test is skipped, except in CI (``CI`` set), where it fails: an
OAuth test that silently did not run is not a pass.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx2
import pytest
import trio
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet, RSAKey

from conftest import REPO

NODE = REPO / "tests" / "conformance" / ".node" / "node" / "node_modules" / ".bin" / "node"
PROVIDER_PACKAGE = REPO / "tests" / "conformance" / ".node" / "oidc" / "node_modules" / "oidc-provider"
SCRIPT = REPO / "tests" / "oidc_provider.mjs"
START_TIMEOUT = 20  # READY comes ~0.3 s after the start here; much more on a loaded CI machine
REPLY_TIMEOUT = 10  # a stdin command (keys, stop, start) or an HTTP exchange with the provider
EXIT_TIMEOUT = 5  # the provider exits at the end of its stdin; SIGKILL after this
TOKEN_TTL = 600  # seconds: oidc-provider's default for client credentials tokens
RSA_BITS = 2048  # the RS256 minimum of RFC 7518 §3.3; ~40 ms to make in Python


@attrs.frozen
class Client:
    """An OAuth client registered at the provider (client_secret_basic, client_credentials)."""

    client_id: str
    client_secret: str = attrs.field(repr=False)

    @property
    def auth(self) -> tuple[str, str]:
        """HTTP Basic credentials for the token, introspection and revocation endpoints."""
        return (self.client_id, self.client_secret)


def make_key(alg: str = "RS256", kid: str | None = None) -> RSAKey | ECKey:
    """A new private signing key for ``alg`` (RS256, PS256 or ES256), with ``kid``, ``alg`` and ``use``."""
    parameters: Any = {"kid": kid or f"key-{uuid.uuid4().hex[:8]}", "alg": alg, "use": "sig"}
    if alg == "ES256":
        return ECKey.generate_key("P-256", parameters=parameters)
    if alg in ("RS256", "PS256"):
        return RSAKey.generate_key(RSA_BITS, parameters=parameters)
    raise ValueError(f"make_key: no key type for {alg}")


def require_provider() -> None:
    """Skip (fail under CI) unless Node 22 and oidc-provider are installed."""
    missing = [str(path.relative_to(REPO)) for path in (NODE, PROVIDER_PACKAGE) if not path.exists()]
    if missing:
        reason = f"oidc-provider is not installed (run tests/conformance/install.sh); missing: {', '.join(missing)}"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI is set: .ci/run must install it)")
        pytest.skip(reason)


@attrs.define
class AuthorizationServer:
    """A running oidc-provider; see the module docstring. Made by :func:`authorization_server`.

    Attributes:
        issuer: its issuer URL, ``http://127.0.0.1:<port><path>``.
        port: its port, the same after :meth:`stop` and :meth:`start`.
        keys: its private signing keys, the signing one first (``keys.keys[0]``).
        jwt_client, opaque_client: clients getting JWT / opaque access tokens.
        introspection_client: the resource server's (the bridge's) credentials.
    """

    issuer: str
    port: int
    keys: KeySet
    jwt_client: Client
    opaque_client: Client
    introspection_client: Client
    _process: trio.Process
    _jwks_file: Path
    _stderr: Path
    _stdout: bytearray = attrs.field(factory=bytearray)

    @property
    def signing_key(self) -> RSAKey | ECKey:
        """The key the provider signs JWT access tokens with now."""
        key = self.keys.keys[0]
        assert isinstance(key, RSAKey | ECKey)
        return key

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/token"

    @property
    def introspection_endpoint(self) -> str:
        return f"{self.issuer}/token/introspection"

    @property
    def revocation_endpoint(self) -> str:
        return f"{self.issuer}/token/revocation"

    @property
    def jwks_uri(self) -> str:
        return f"{self.issuer}/jwks"

    def private_jwks(self) -> dict[str, Any]:
        """The private JWK set, as the provider reads it."""
        return {"keys": [key.as_dict(private=True) for key in self.keys.keys]}

    def stderr(self) -> str:
        """What the provider wrote to stderr so far (for assertion messages)."""
        return self._stderr.read_text(errors="replace")

    async def token_response(
        self, resource: str | None, scopes: Iterable[str] = (), *, client: Client | None = None
    ) -> httpx2.Response:
        """POST /token (client credentials, ``resource`` per RFC 8707); the response, whatever its status."""
        form = {"grant_type": "client_credentials"}
        if resource is not None:
            form["resource"] = resource
        if scope := " ".join(scopes):
            form["scope"] = scope
        return await self._post(self.token_endpoint, form, client or self.jwt_client)

    async def token(
        self, resource: str, scopes: Iterable[str] = (), *, opaque: bool = False, client: Client | None = None
    ) -> str:
        """A fresh access token for ``resource`` (its ``aud``) with ``scopes``: a JWT, or an
        opaque one (``opaque=True``, to be introspected). ``client`` overrides the choice."""
        chosen = client or (self.opaque_client if opaque else self.jwt_client)
        response = await self.token_response(resource, scopes, client=chosen)
        assert response.status_code == 200, f"token request: {response.status_code} {response.text}"
        token = response.json()["access_token"]
        assert isinstance(token, str)
        return token

    async def introspect(self, token: str, *, client: Client | None = None) -> dict[str, Any]:
        """RFC 7662 introspection, as ``introspection_client`` unless told otherwise."""
        form = {"token": token, "token_type_hint": "access_token"}
        response = await self._post(self.introspection_endpoint, form, client or self.introspection_client)
        assert response.status_code == 200, f"introspection: {response.status_code} {response.text}"
        result = response.json()
        assert isinstance(result, dict)
        return result

    async def revoke(self, token: str, *, client: Client | None = None) -> None:
        """RFC 7009 revocation: introspection says ``active: false`` afterwards."""
        form = {"token": token, "token_type_hint": "access_token"}
        response = await self._post(self.revocation_endpoint, form, client or self.opaque_client)
        assert response.status_code == 200, f"revocation: {response.status_code} {response.text}"

    def craft(
        self,
        audience: str,
        scopes: Iterable[str] = (),
        *,
        claims: Mapping[str, Any] | None = None,
        header: Mapping[str, Any] | None = None,
        key: RSAKey | ECKey | None = None,
        expires_in: int = TOKEN_TTL,
    ) -> str:
        """A JWT signed with the issuer's current key (or ``key``), like the provider's own: ``iss``,
        ``sub``, ``client_id``, ``aud``, ``scope``, ``iat``, ``exp``, ``jti``, header ``typ: at+jwt``
        with its ``alg`` and ``kid``. ``claims`` and ``header`` override members; a ``None`` value
        removes one. For expired, not-yet-valid, wrong-audience, wrong-issuer... tokens."""
        key = key or self.signing_key
        now = int(time.time())
        body: dict[str, Any] = {
            "iss": self.issuer,
            "sub": self.jwt_client.client_id,
            "client_id": self.jwt_client.client_id,
            "aud": audience,
            "scope": " ".join(scopes),
            "iat": now,
            "exp": now + expires_in,
            "jti": uuid.uuid4().hex,
        }
        head: dict[str, Any] = {"typ": "at+jwt", "alg": key.alg, "kid": key.kid}
        body.update(claims or {})
        head.update(header or {})
        body = {name: value for name, value in body.items() if value is not None}
        head = {name: value for name, value in head.items() if value is not None}
        return jwt.encode(head, body, key, algorithms=[head["alg"]])

    async def rotate(self, *, keep_old: bool = True, alg: str | None = None) -> RSAKey | ECKey:
        """Sign with a new key from now on; the old ones stay published unless ``keep_old`` is false.
        Returns the new key. Opaque tokens issued before stay active."""
        new = make_key(alg or self.signing_key.alg or "RS256")
        kept = list(self.keys.keys) if keep_old else []
        self.keys = KeySet([new, *kept])
        _write_private(self._jwks_file, self.private_jwks())
        reply = await self._command("keys")
        assert reply.split()[:2] == ["KEYS", new.kid], reply
        return new

    async def stop(self) -> None:
        """Close the listening socket and every connection: the issuer is down (connection refused)."""
        assert await self._command("stop") == "STOPPED"

    async def start(self) -> None:
        """Listen again on the same port, after :meth:`stop`."""
        assert await self._command("start") == f"READY {self.port}"

    async def _post(self, url: str, form: dict[str, str], client: Client) -> httpx2.Response:
        with trio.fail_after(REPLY_TIMEOUT):
            async with httpx2.AsyncClient() as http:
                return await http.post(url, data=form, auth=client.auth)

    async def _command(self, command: str) -> str:
        assert self._process.stdin is not None
        with trio.fail_after(REPLY_TIMEOUT):
            await self._process.stdin.send_all(f"{command}\n".encode())
            return await self._line()

    async def _line(self) -> str:
        assert self._process.stdout is not None
        while b"\n" not in self._stdout:
            chunk = await self._process.stdout.receive_some()
            if not chunk:
                raise AssertionError(f"oidc-provider exited:\n{self.stderr()}")
            self._stdout += chunk
        line, _, rest = bytes(self._stdout).partition(b"\n")
        self._stdout[:] = rest
        return line.decode()


def _write_private(path: Path, document: Any) -> None:
    """Write a file only its owner can read (it holds private keys or client secrets)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        json.dump(document, file)


@asynccontextmanager
async def authorization_server(
    *, path: str = "", alg: str = "RS256", token_ttl: int = TOKEN_TTL, rfc8414: bool = True
) -> AsyncIterator[AuthorizationServer]:
    """Run oidc-provider on 127.0.0.1 for the block; see the module docstring.

    Args:
        path: the issuer's path (``"/tenant"`` gives ``http://127.0.0.1:<port>/tenant``), to test
            where discovery puts ``/.well-known/...``: RFC 8414's document is then served only at
            ``/.well-known/oauth-authorization-server/tenant`` (§3), OpenID's at
            ``/tenant/.well-known/openid-configuration``.
        alg: the signing algorithm (RS256, PS256 or ES256) of the first key.
        token_ttl: lifetime of the access tokens it issues, seconds.
        rfc8414: also serve ``/.well-known/oauth-authorization-server`` (else only the OpenID
            document, which a verifier falls back to).
    """
    require_provider()
    folder = Path(tempfile.mkdtemp(prefix="oidc-"))
    clients = [
        Client("mcp-app", uuid.uuid4().hex),
        Client("mcp-app-opaque", uuid.uuid4().hex),
        Client("mcp-bridge", uuid.uuid4().hex),
    ]
    formats = ["jwt", "opaque", "opaque"]
    keys = KeySet([make_key(alg)])
    _write_private(folder / "jwks.json", {"keys": [key.as_dict(private=True) for key in keys.keys]})
    _write_private(
        folder / "clients.json",
        [
            {"client_id": c.client_id, "client_secret": c.client_secret, "access_token_format": f}
            for c, f in zip(clients, formats, strict=True)
        ],
    )
    argv = [
        str(NODE),
        str(SCRIPT),
        "--jwks",
        str(folder / "jwks.json"),
        "--clients",
        str(folder / "clients.json"),
    ]
    argv += ["--ttl", str(token_ttl), "--path", path]
    if not rfc8414:
        argv.append("--no-rfc8414")
    stderr_path = folder / "stderr.txt"
    with stderr_path.open("wb") as stderr:
        process = await trio.lowlevel.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, start_new_session=True
        )
    try:
        server = AuthorizationServer(
            issuer="",
            port=0,
            keys=keys,
            jwt_client=clients[0],
            opaque_client=clients[1],
            introspection_client=clients[2],
            process=process,
            jwks_file=folder / "jwks.json",
            stderr=stderr_path,
        )
        with trio.fail_after(START_TIMEOUT):
            ready = await server._line()
        assert ready.startswith("READY "), f"{ready}\n{server.stderr()}"
        server.port = int(ready.split()[1])
        server.issuer = f"http://127.0.0.1:{server.port}{path.rstrip('/')}"
        yield server
    finally:
        with trio.CancelScope(shield=True):
            if process.stdin is not None:
                await process.stdin.aclose()  # the provider exits at the end of its stdin
            with trio.move_on_after(EXIT_TIMEOUT):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            shutil.rmtree(folder, ignore_errors=True)
