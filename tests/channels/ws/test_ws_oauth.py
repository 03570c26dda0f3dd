"""OAuth access tokens on a WebSocket upgrade, against a real authorization server (oidc-provider).

The same verdicts as over HTTP: 401/403/503 with the challenge and a JSON-RPC error body naming
the outcome, before the upgrade; an accepted token puts its principal on the channel's peer.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from oidc import AuthorizationServer, authorization_server

from bridge import Daemon
from channels import AccessDenied, ConnectOptions, ListenOptions, OAuthSettings, connect

from conftest import call, example_server, poll, running_bridge

TIMEOUT = 30
SCOPE = "mcp:tools"


@asynccontextmanager
async def ws_bridge(issuer: AuthorizationServer, **settings: Any) -> AsyncIterator[Daemon]:
    oauth = OAuthSettings(issuers=[issuer.issuer], **settings)
    async with running_bridge(
        example_server(), ["ws://127.0.0.1:0/mcp"], listen_options=ListenOptions(oauth=oauth)
    ) as daemon:
        yield daemon


async def upgrade(
    address: str, token: str | None, *, websocket: bool = True
) -> tuple[int, dict[str, str], Any]:
    """A raw upgrade request: the status, headers (lower-case names) and JSON body of the answer.

    With ``websocket=False``, a plain GET of the endpoint: no upgrade at all.
    """
    host_port = address.split("/")[2]
    host, port = host_port.rsplit(":", 1)
    stream = await trio.open_tcp_stream(host, int(port))
    key = base64.b64encode(os.urandom(16)).decode()
    lines = ["GET /mcp HTTP/1.1", f"Host: {host_port}"]
    if websocket:
        lines += [
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
        ]
    else:
        lines.append("Connection: close")
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode())
    data = b""
    while chunk := await stream.receive_some(65536):
        data += chunk
    await stream.aclose()
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    headers = {
        name.lower(): value.strip() for name, _, value in (line.partition(":") for line in header_lines)
    }
    is_json = headers.get("content-type", "").startswith("application/json")
    return int(status_line.split()[1]), headers, json.loads(body) if body and is_json else body


async def test_a_token_from_the_issuer_upgrades_and_calls_a_tool_as_its_principal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as issuer, ws_bridge(issuer, scopes=[SCOPE]) as daemon:
            address = daemon.addresses[0]
            token = await issuer.token(address, [SCOPE])
            async with connect(address, ConnectOptions(token=token)) as channel:
                await channel.send(call(1, "echo", text="hi"))
                reply = await channel.receive()
                assert reply["result"]["content"][0]["text"] == "hi"
    assert (
        f"auth='oauth sub={issuer.jwt_client.client_id} client={issuer.jwt_client.client_id}'" in caplog.text
    )
    assert token not in caplog.text


async def test_bad_tokens_are_refused_before_the_upgrade_with_the_challenge_and_outcome(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as issuer, ws_bridge(issuer, scopes=[SCOPE]) as daemon:
            address = daemon.addresses[0]
            now = int(time.time())
            cases = {
                "missing": (None, 401, "Bearer"),
                "expired": (
                    issuer.craft(address, [SCOPE], claims={"iat": now - 7200, "exp": now - 3600}),
                    401,
                    'Bearer error="invalid_token", error_description="the access token has expired"',
                ),
                "wrong-audience": (
                    await issuer.token("https://other.example/mcp", [SCOPE]),
                    401,
                    'Bearer error="invalid_token"',
                ),
                "insufficient-scope": (
                    await issuer.token(address, ["mcp:other"]),
                    403,
                    'Bearer error="insufficient_scope", scope="mcp:tools"',
                ),
            }
            for outcome, (token, status, challenge) in cases.items():
                caplog.clear()
                got, headers, body = await upgrade(address, token)
                assert got == status, (outcome, got, headers)
                assert headers["www-authenticate"].startswith(challenge), (outcome, headers)
                assert body["error"]["data"]["reason"] == outcome and body["id"] is None

                def refusals() -> list[str]:
                    return [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]

                await poll(lambda: bool(refusals()))  # logged once the connection is closed
                refusals_seen = refusals()
                assert len(refusals_seen) == 1 and f"OAuth {outcome}:" in refusals_seen[0], refusals_seen
            with pytest.raises(AccessDenied, match="401"):
                async with connect(address, ConnectOptions(token=cases["expired"][0])):
                    pass  # pragma: no cover


def refusal_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if ": refused: " in record.getMessage()]


async def test_an_upgrade_refused_for_its_token_is_one_info_line_and_a_failed_upgrade_stays_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as issuer, ws_bridge(issuer, scopes=[SCOPE]) as daemon:
            address = daemon.addresses[0]
            for token, status in ((None, 401), (await issuer.token(address, ["mcp:other"]), 403)):
                assert (await upgrade(address, token))[0] == status
            await poll(lambda: len(refusal_records(caplog)) == 2)
            # A valid token on a request that is no WebSocket upgrade: a failed handshake.
            status, _, _ = await upgrade(address, await issuer.token(address, [SCOPE]), websocket=False)
            assert status == 426
            await poll(lambda: len(refusal_records(caplog)) == 3)
            assert daemon.statistics().handshakes_failed == 3
    refused = refusal_records(caplog)
    assert [(record.levelno, record.exc_info) for record in refused[:2]] == [(logging.INFO, None)] * 2
    assert "OAuth missing" in refused[0].getMessage()
    assert "OAuth insufficient-scope" in refused[1].getMessage()
    assert (
        refused[2].levelno == logging.WARNING and "not a valid WebSocket upgrade" in refused[2].getMessage()
    )
    assert "Traceback" not in caplog.text


async def test_an_upgrade_while_the_issuer_is_down_gets_503_with_retry_after_and_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with authorization_server() as issuer:
            await issuer.stop()
            async with ws_bridge(issuer) as daemon:
                token = issuer.craft(daemon.addresses[0])
                status, headers, body = await upgrade(daemon.addresses[0], token)
                assert status == 503 and headers["retry-after"] == "10"
                assert body["error"]["data"]["reason"] == "issuer-unreachable"
                await poll(lambda: bool(refusal_records(caplog)))
    # Not the client's doing: the operator must hear of it.
    assert [record.levelno for record in refusal_records(caplog)] == [logging.WARNING]
