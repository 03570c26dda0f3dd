"""docs/deploy/oauth.md, run as written: a stdio server exposed to remote clients with OAuth.

The page's blocks marked ``<!-- walkthrough: NAME -->`` (the bridge's command, its configuration
file, the curl checks) and its troubleshooting table are read from the page itself, so that what
it tells a reader to run and what runs here cannot drift apart. The pieces are real: the
authorization server is oidc-provider (tests/oidc.py), the bridge a ``python -m bridge`` process
started with the page's command (or its configuration file), nginx or Caddy the shipped example
(deploy/) with a test certificate for ``mcp.example.com``, and the clients are curl (the page's
checks, verbatim) and the official MCP Python SDK (examples/oauth_client.py, which the page
includes). Only these are replaced: the issuer URL (the provider's loopback address), the ports
(free ones), the child (tests/sdk_server.py), and the route to ``mcp.example.com:443``,
which the clients are given as DNS would give it (curl's ``--connect-to``, an httpx2 network
backend), so that the public URL stays ``https://mcp.example.com/mcp`` as on the page.

Missing proxies, Node or oidc-provider skip these tests, unless CI is set (then they fail).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import ssl
import sys
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpcore2
import httpx2
import pytest
import trio
from oidc import AuthorizationServer, authorization_server, make_key
from sandboxing import bwrap_or_skip, pid_namespace, wait_for_sandbox_namespace
from test_deploy import PUBLIC_HOST, PublicTls, installed, public_tls, running_proxy

from conftest import REPO, BridgeProcess, bridge_process, poll

__all__ = ["public_tls"]  # the fixture, imported for the tests below


def _example(name: str) -> Any:
    """A module of examples/ (not a package: the page includes the file as it is)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


oauth_client = _example("oauth_client")

PAGE = REPO / "docs" / "deploy" / "oauth.md"
BLOCK = re.compile(r"<!-- walkthrough: ([\w-]+) -->\n```\w*\n(.*?)\n```", re.DOTALL)
# One whole test: the provider, the bridge and its child, a proxy, the clients (6-20 s here, loaded).
TIMEOUT = 60
PROXIES = ["nginx", "caddy"]
# What the page names, and what stands for it here.
DOC_ISSUER = "https://auth.example.com"
DOC_LISTEN = "http://127.0.0.1:8080/mcp"
DOC_ADDRESS = "127.0.0.1:8080"
DOC_ADMIN = "tcp:127.0.0.1:9100"
PUBLIC_URL = f"https://{PUBLIC_HOST}/mcp"
METADATA_URL = f"https://{PUBLIC_HOST}/.well-known/oauth-protected-resource/mcp"
HTTPS_PORT = 443
SCOPE = "mcp:tools"
# The stdio server behind the bridge: one made with the official SDK (tools echo and add).
CHILD = (sys.executable, str(REPO / "tests" / "sdk_server.py"))
TROUBLESHOOTING_ROW = re.compile(r"^\| `([a-z-]+)` \| (\d{3})\b", re.MULTILINE)
POST_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
OAUTH_METRIC = re.compile(
    r'^mcp_bridge_oauth_tokens_total\{[^}]*outcome="([a-z-]+)"[^}]*\} (\S+)$', re.MULTILINE
)
_ADMIN = re.compile(r"admin endpoint on tcp:(\S+)")


def walkthrough(name: str) -> str:
    """The page's code block marked ``<!-- walkthrough: name -->``."""
    blocks = dict(BLOCK.findall(PAGE.read_text()))
    assert name in blocks, f"docs/deploy/oauth.md has no block marked <!-- walkthrough: {name} -->"
    return blocks[name]


def substituted(words: Iterable[str], pairs: dict[str, str]) -> list[str]:
    """``words`` with each key of ``pairs`` (each must be one word of them, once) replaced."""
    words = list(words)
    for old in pairs:
        assert words.count(old) == 1, f"{old!r} occurs {words.count(old)} times in the page's command"
    return [pairs.get(word, word) for word in words]


def documented_command(issuer: str) -> list[str]:
    """The page's ``mcp-bridge`` options, for this machine; the child is :data:`CHILD`."""
    words = shlex.split(walkthrough("bridge-command").replace("\\\n", " "))
    assert words[0] == "mcp-bridge", words
    options = words[1 : words.index("--")]
    pairs = {DOC_LISTEN: "http://127.0.0.1:0/mcp", DOC_ISSUER: issuer, DOC_ADMIN: "tcp:127.0.0.1:0"}
    return [*substituted(options, pairs), "--", *CHILD]


def documented_config(issuer: str, directory: Path) -> Path:
    """The page's configuration file, for this machine (as :func:`documented_command`)."""
    text = walkthrough("bridge-config")
    for old, new in (
        (f'"{DOC_ADDRESS}"', '"127.0.0.1:0"'),
        (f'"{DOC_ISSUER}"', f'"{issuer}"'),
        ('["npx", "-y", "@modelcontextprotocol/server-everything"]', json.dumps(list(CHILD))),
    ):
        assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in the page's configuration"
        text = text.replace(old, new)
    path = directory / "config.toml"
    path.write_text(text)
    return path


class ToTheProxy(httpcore2.AsyncNetworkBackend):
    """Connections to ``mcp.example.com:443`` go to the proxy on 127.0.0.1, as DNS would send them;
    the rest as asked. TLS still checks the certificate for ``mcp.example.com``."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.backend = httpcore2.TrioBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        **kwargs: Any,
    ) -> httpcore2.AsyncNetworkStream:
        if (host, port) == (PUBLIC_HOST, HTTPS_PORT):
            host, port = "127.0.0.1", self.port
        return await self.backend.connect_tcp(host, port, timeout, local_address, **kwargs)

    async def sleep(self, seconds: float) -> None:
        await self.backend.sleep(seconds)


def transport(proxy_port: int, context: ssl.SSLContext) -> httpx2.AsyncHTTPTransport:
    """An httpx2 transport that trusts ``context``'s CA and reaches the proxy for the public name.

    httpx2 takes no network backend, so its connection pool is replaced by one that has it.
    """
    made = httpx2.AsyncHTTPTransport(verify=context)
    made._pool = httpcore2.AsyncConnectionPool(ssl_context=context, network_backend=ToTheProxy(proxy_port))
    return made


@attrs.frozen
class Walkthrough:
    """Everything of the page running: the issuer, the bridge, the proxy in front of it."""

    issuer: AuthorizationServer
    bridge: BridgeProcess
    proxy_port: int
    admin: str  # host:port of --admin
    tls: PublicTls

    def http(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=transport(self.proxy_port, self.tls.client_context()))

    async def oauth_outcomes(self) -> dict[str, int]:
        """``mcp_bridge_oauth_tokens_total`` by outcome, from the admin endpoint (--admin)."""
        async with httpx2.AsyncClient() as http:
            response = await http.get(f"http://{self.admin}/metrics")
        assert response.status_code == 200, response
        return {outcome: int(float(count)) for outcome, count in OAUTH_METRIC.findall(response.text)}


@asynccontextmanager
async def walkthrough_running(
    kind: str, directory: Path, tls: PublicTls, *, config: bool = False, extra: Iterable[str] = ()
) -> AsyncIterator[Walkthrough]:
    """The page's setup, with ``kind`` (nginx or Caddy) in front; the bridge from its command, or
    from its configuration file (``config``) with ``--admin`` on the command line."""
    installed(kind)
    async with authorization_server() as issuer:
        if config:
            argv = [
                "--config",
                str(documented_config(issuer.issuer, directory)),
                "--admin",
                "tcp:127.0.0.1:0",
            ]
        else:
            argv = documented_command(issuer.issuer)
        argv = [*extra, *argv] if config else [*argv[: argv.index("--")], *extra, *argv[argv.index("--") :]]
        async with bridge_process(*argv) as bridge:
            await poll(lambda: any(_ADMIN.search(line) for line in bridge.stderr_lines))
            admin = next(match.group(1) for line in bridge.stderr_lines if (match := _ADMIN.search(line)))
            upstream = int(bridge.addresses[0].rsplit(":", 1)[1].split("/")[0])
            async with running_proxy(kind, directory, [upstream], tls) as proxy:
                yield Walkthrough(issuer, bridge, proxy.port, admin, tls)


def curl_shim(directory: Path, walk: Walkthrough) -> dict[str, str]:
    """An environment whose ``curl`` reaches the proxy for mcp.example.com and trusts the test CA."""
    ca = directory / "ca.pem"
    walk.tls.ca.cert_pem.write_to_path(str(ca))
    bin_directory = directory / "bin"
    bin_directory.mkdir()
    shim = bin_directory / "curl"
    connect_to = f"{PUBLIC_HOST}:{HTTPS_PORT}:127.0.0.1:{walk.proxy_port}"
    shim.write_text(f'#!/bin/sh\nexec {installed("curl")} --connect-to {connect_to} --cacert {ca} "$@"\n')
    shim.chmod(0o755)
    return {"PATH": f"{bin_directory}:{os.environ['PATH']}", "HOME": str(directory)}


def json_documents(text: str) -> tuple[Any, Any, str]:
    """The two JSON documents at the start of ``text`` (whitespace between), and what follows."""
    decoder = json.JSONDecoder()
    first, end = decoder.raw_decode(text)
    second, end = decoder.raw_decode(text, len(text) - len(text[end:].lstrip()))
    return first, second, text[end:]


# -- the tests ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", PROXIES)
async def test_the_pages_curl_checks_through_the_proxy_get_the_challenge_the_metadata_a_token_and_a_200(
    kind: str, tmp_path: Path, public_tls: PublicTls
) -> None:
    installed("jq")
    with trio.fail_after(TIMEOUT):
        async with walkthrough_running(kind, tmp_path, public_tls) as walk:
            env = curl_shim(tmp_path, walk)
            client = walk.issuer.jwt_client
            env |= {"CLIENT_ID": client.client_id, "CLIENT_SECRET": client.client_secret}
            script = walkthrough("check").replace(DOC_ISSUER, walk.issuer.issuer)
            done = await trio.run_process(
                ["sh", "-eu", "-c", script], env=env, capture_stdout=True, capture_stderr=True, check=False
            )
            output = done.stdout.decode()
            assert done.returncode == 0, f"{output}\n{done.stderr.decode()}"
            head, _, rest = output.partition("\n{")
            # 1. the challenge, naming the metadata at the public https origin
            status_line, challenge = head.splitlines()
            assert status_line.split()[1] == "401", output
            assert challenge.lower() == (
                f'www-authenticate: bearer scope="mcp:tools", resource_metadata="{METADATA_URL}"'
            ), output
            # 2. the metadata document, and 3. the token's claims
            document, claims, last = json_documents("{" + rest)
            assert document == {
                "resource": PUBLIC_URL,
                "authorization_servers": [walk.issuer.issuer],
                "scopes_supported": [SCOPE],
                "bearer_methods_supported": ["header"],
            }
            assert claims == {"iss": walk.issuer.issuer, "aud": PUBLIC_URL, "scope": SCOPE}
            # 4. with the token, the request passes
            assert last.strip() == "200", output
            # The metadata at the bare well-known path too (RFC 9728 §3.1 puts it after the
            # resource's path; clients that look at the bare path first find it as well).
            async with walk.http() as http:
                bare = await http.get(f"https://{PUBLIC_HOST}/.well-known/oauth-protected-resource")
            assert bare.status_code == 200, (bare, bare.text)
            assert bare.json() == document
            counted = await walk.oauth_outcomes()
            assert (counted["missing"], counted["accepted"]) == (1, 1), counted
            refusals = [line for line in walk.bridge.stderr_lines if "refused: OAuth" in line]
            assert len(refusals) == 1 and "OAuth missing" in refusals[0], walk.bridge.log()


@pytest.mark.parametrize("kind", PROXIES)
async def test_the_sdk_client_example_discovers_the_issuer_from_the_401_through_the_proxy_and_calls_a_tool(
    kind: str, tmp_path: Path, public_tls: PublicTls
) -> None:
    with trio.fail_after(TIMEOUT):
        async with walkthrough_running(kind, tmp_path, public_tls) as walk:
            client = walk.issuer.jwt_client
            texts = await oauth_client.call_tool(
                PUBLIC_URL,
                walk.issuer.issuer,
                client.client_id,
                client.client_secret,
                "echo",
                {"text": "through the proxy"},
                transport=transport(walk.proxy_port, public_tls.client_context()),
            )
            assert texts == ["through the proxy"]
            assert (await walk.oauth_outcomes())["accepted"] >= 1  # the SDK may send several requests


async def test_the_pages_configuration_file_behind_nginx_serves_the_same_walkthrough(
    tmp_path: Path, public_tls: PublicTls
) -> None:
    with trio.fail_after(TIMEOUT):
        async with walkthrough_running("nginx", tmp_path, public_tls, config=True) as walk:
            async with walk.http() as http:
                refused = await http.post(PUBLIC_URL, json=INITIALIZE, headers=POST_HEADERS)
            assert refused.status_code == 401
            assert refused.headers["www-authenticate"] == (
                f'Bearer scope="mcp:tools", resource_metadata="{METADATA_URL}"'
            )
            client = walk.issuer.jwt_client
            texts = await oauth_client.call_tool(
                PUBLIC_URL,
                walk.issuer.issuer,
                client.client_id,
                client.client_secret,
                "add",
                {"a": 2, "b": 3},
                transport=transport(walk.proxy_port, public_tls.client_context()),
            )
            assert texts == ["5"]


async def test_with_the_sandbox_added_as_the_page_says_the_sdk_client_still_calls_a_tool_through_nginx(
    tmp_path: Path, public_tls: PublicTls
) -> None:
    bwrap_or_skip()
    # The sandbox is looked for after the call, in a child still running then: with `--child
    # auto` (the page's) that is the shared child only if the era probe got its answer within 5 s
    # (--probe-timeout, PROBE_TIMEOUT in bridge/_daemon/config.py); on a loaded machine tests/sdk_server.py starts
    # slower than that, the verdict is legacy, the call's own child is stopped once it is done,
    # and the search found nothing until the test's deadline. One child kept started ahead
    # (--prespawn 1, sandboxed as every child) is there after the call whatever the verdict.
    with trio.fail_after(TIMEOUT):
        async with walkthrough_running(
            "nginx", tmp_path, public_tls, extra=["--sandbox", "--prespawn", "1"]
        ) as walk:
            client = walk.issuer.jwt_client
            texts = await oauth_client.call_tool(
                PUBLIC_URL,
                walk.issuer.issuer,
                client.client_id,
                client.client_secret,
                "echo",
                {"text": "sandboxed"},
                transport=transport(walk.proxy_port, public_tls.client_context()),
            )
            assert texts == ["sandboxed"]
            # The children run in a sandbox: a PID namespace of their own under the bridge.
            assert await wait_for_sandbox_namespace(walk.bridge.process.pid) != pid_namespace(os.getpid())


def troubleshooting_rows() -> dict[str, int]:
    """The page's troubleshooting table: the status each outcome (its first column) gets."""
    section = PAGE.read_text().split("## Troubleshooting", 1)[1].split("\n## ", 1)[0]
    return {outcome: int(status) for outcome, status in TROUBLESHOOTING_ROW.findall(section)}


async def test_behind_nginx_each_refusal_gets_the_status_the_pages_troubleshooting_table_gives_and_one_log_line(
    tmp_path: Path, public_tls: PublicTls
) -> None:
    rows = troubleshooting_rows()
    static = "walkthrough-static-token-Vq8Lr3Xk2Pz7Wm"
    token_file = tmp_path / "tokens"
    token_file.write_text(static + "\n")
    token_file.chmod(0o600)
    with trio.fail_after(TIMEOUT):
        async with walkthrough_running(
            "nginx", tmp_path, public_tls, extra=["--token-file", str(token_file)]
        ) as walk:
            issuer = walk.issuer
            elsewhere = make_key(kid=issuer.signing_key.kid)  # the issuer's kid, not its key
            cases = {
                "missing": None,
                "wrong-audience": await issuer.token("https://other.example.com/mcp", [SCOPE]),
                "insufficient-scope": await issuer.token(PUBLIC_URL, ["profile"]),
                "expired": issuer.craft(PUBLIC_URL, [SCOPE], expires_in=-3600),
                "wrong-issuer": issuer.craft(
                    PUBLIC_URL, [SCOPE], claims={"iss": "https://elsewhere.example.com"}
                ),
                "bad-signature": issuer.craft(PUBLIC_URL, [SCOPE], key=elsewhere),
                "malformed": "not-a-jwt-and-no-introspection",
            }
            async with walk.http() as http:
                for outcome, token in cases.items():
                    headers = dict(POST_HEADERS) | ({"authorization": f"Bearer {token}"} if token else {})
                    before = len(refusal_lines(walk))
                    answer = await http.post(PUBLIC_URL, json=INITIALIZE, headers=headers)
                    assert outcome in rows, f"the troubleshooting table has no row for {outcome}"
                    assert answer.status_code == rows[outcome], (outcome, answer, answer.text)
                    assert answer.json()["error"]["data"]["reason"] == outcome
                    challenge = answer.headers["www-authenticate"]
                    assert (
                        challenge.startswith("Bearer ") and f'resource_metadata="{METADATA_URL}"' in challenge
                    )
                    await poll(lambda: len(refusal_lines(walk)) > before)  # noqa: B023
                    (logged,) = refusal_lines(walk)[before:]
                    assert f"refused: OAuth {outcome}:" in logged
                    assert not token or token not in walk.bridge.log()
                # A static token (--token-file) beside OAuth: accepted, and not an OAuth outcome.
                answer = await http.post(
                    PUBLIC_URL,
                    json=INITIALIZE,
                    headers=dict(POST_HEADERS) | {"authorization": f"Bearer {static}"},
                )
                assert answer.status_code == 200, answer.text
            counted = await walk.oauth_outcomes()
            assert {outcome: counted[outcome] for outcome in cases} == dict.fromkeys(cases, 1)
            assert counted["accepted"] == 0  # static tokens are not OAuth tokens
            # One line per refusal: the stream is in order, so once the static token's line is
            # in, every line the refusals caused is too.
            await poll(lambda: any("auth='token file" in line for line in walk.bridge.stderr_lines))
            http_lines = [line for line in walk.bridge.stderr_lines if " channels.http: " in line]
            assert len(http_lines) == len(cases), "\n".join(http_lines)


def refusal_lines(walk: Walkthrough) -> list[str]:
    return [line for line in walk.bridge.stderr_lines if "refused: OAuth" in line]
