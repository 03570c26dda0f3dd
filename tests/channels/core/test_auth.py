"""Bearer tokens on every network channel (docs/design.md §5.7): loaded safely, compared in constant
time, never logged; a connection that fails authentication never reaches a child.

WebSocket's header-borne tokens are tested in test_websocket.py; here: the token sources, the
first-message scheme of newline channels (tcp:, tls:), the loopback rule, and ``connect``.
"""

from __future__ import annotations

import hmac
import logging
from pathlib import Path

import pytest
import trio
from commands import connect

from channels import (
    UNAUTHORIZED,
    ConnectOptions,
    CredentialError,
    ListenError,
    ListenOptions,
    TcpAddress,
    TokenSet,
    WebSocketAddress,
    authenticate_message,
    client_token_from_env,
    client_token_from_file,
    parse_address,
    tokens_from_credential,
    tokens_from_env,
    tokens_from_file,
)

from conftest import LineClient, call, example_server, poll, request, result_text, running_bridge

TIMEOUT = 20
TOKEN = "s3cret-token-0123456789abcdef"
OLD_TOKEN = "old-token-fedcba9876543210"
EXIT_OK, EXIT_NOPERM = 0, 77


def token_file(directory: Path, *lines: str, mode: int = 0o600) -> str:
    path = directory / "tokens"
    path.write_text("".join(f"{line}\n" for line in lines))
    path.chmod(mode)
    return str(path)


# -- token sources (sans-IO) ------------------------------------------------------------------------


def test_a_token_set_matches_only_its_tokens_and_says_which_one() -> None:
    tokens = TokenSet.of([(OLD_TOKEN, "old"), (TOKEN, "new")])
    assert tokens.match(TOKEN) == "new"
    assert tokens.match(OLD_TOKEN) == "old"
    assert tokens.match(TOKEN + "x") is None
    assert tokens.match(TOKEN[:-1]) is None
    assert tokens.match("") is None and tokens.match(None) is None


def test_every_token_is_compared_in_constant_time_whichever_matches(monkeypatch) -> None:
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    tokens = TokenSet.of([(TOKEN, "first"), (OLD_TOKEN, "second"), ("x" * 20, "third")])
    for candidate in (TOKEN, "y" * 40, "short"):
        compared.clear()
        tokens.match(candidate)
        # All three, and always fixed-length digests: no early exit, no length leak.
        assert len(compared) == 3
        assert {len(a) for a, _ in compared} == {len(b) for _, b in compared} == {32}


def test_tokens_never_appear_in_reprs() -> None:
    tokens = TokenSet.of([(TOKEN, "label")])
    assert TOKEN not in repr(tokens)
    assert TOKEN not in repr(ConnectOptions(token=TOKEN))
    assert TOKEN not in repr(ListenOptions(tokens=tokens))


def test_a_token_file_may_hold_several_tokens_and_comments_for_rotation(tmp_path: Path) -> None:
    path = token_file(tmp_path, "# rotated 2026-11", OLD_TOKEN, "", f"  {TOKEN}  ")
    tokens = tokens_from_file(path)
    assert tokens.match(OLD_TOKEN) == f"token file {path} line 2"
    assert tokens.match(TOKEN) == f"token file {path} line 4"
    assert client_token_from_file(path) == OLD_TOKEN


def test_a_token_file_readable_by_other_users_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = token_file(tmp_path, TOKEN, mode=0o644)
    with pytest.raises(CredentialError, match=r"readable by other users; run: chmod o-rwx"):
        tokens_from_file(path)


@pytest.mark.parametrize(
    "lines",
    [
        (),
        ("# only a comment",),
        ("Qz7short",),
        ("has space inside xxxxxxxxx",),
        ("bad\u00e9character-xxxxxxxxxxxx",),
    ],
)
def test_an_unusable_token_file_is_refused_without_echoing_its_content(
    tmp_path: Path, lines: tuple[str, ...]
) -> None:
    path = token_file(tmp_path, *lines)
    with pytest.raises(CredentialError) as raised:
        tokens_from_file(path)
    message = str(raised.value)
    assert (path in message and "secrets.token_urlsafe" in message) or "RFC 6750" in message
    for line in lines:
        if not line.startswith("#"):
            assert line.strip() not in message


def test_a_missing_token_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(CredentialError, match=r"token file .*nope: No such file"):
        tokens_from_file(str(tmp_path / "nope"))


def test_tokens_come_from_an_environment_variable() -> None:
    environ = {"MCP_TOKENS": f"{TOKEN} {OLD_TOKEN}", "ONE": TOKEN}
    assert (
        tokens_from_env("MCP_TOKENS", environ).match(OLD_TOKEN) == "environment variable MCP_TOKENS token 2"
    )
    assert client_token_from_env("ONE", environ) == TOKEN
    with pytest.raises(CredentialError, match="is not set"):
        tokens_from_env("UNSET", environ)
    with pytest.raises(CredentialError, match="a client presents one"):
        client_token_from_env("MCP_TOKENS", environ)


def test_tokens_come_from_a_systemd_credential(tmp_path: Path) -> None:
    token_file(tmp_path, TOKEN)  # named "tokens", as LoadCredential=tokens:... would
    assert tokens_from_credential("tokens", {"CREDENTIALS_DIRECTORY": str(tmp_path)}).match(TOKEN)
    with pytest.raises(CredentialError, match=r"LoadCredential="):
        tokens_from_credential("tokens", {})
    with pytest.raises(CredentialError, match="bare credential name"):
        tokens_from_credential("../tokens", {"CREDENTIALS_DIRECTORY": str(tmp_path)})


# -- newline channels: the first message carries the token ----------------------------------------


def guarded(**more) -> ListenOptions:
    return ListenOptions(tokens=TokenSet.of([(TOKEN, "test token")]), **more)


async def test_a_tcp_client_without_a_token_is_answered_unauthorized_and_never_reaches_a_child(
    caplog,
) -> None:
    caplog.set_level(logging.INFO)  # a refused client is normal operation, logged at INFO
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), ["tcp:127.0.0.1:0"], listen_options=guarded()) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            await client.send(request(1, "initialize", {}))
            replies = await client.receive_until_eof()
            assert [(r["id"], r["error"]["code"]) for r in replies] == [(1, UNAUTHORIZED)]
            assert "bridge/authenticate" in replies[0]["error"]["data"]["detail"]
            await poll(lambda: daemon.statistics().handshakes_failed == 1)
            stats = daemon.statistics()
            assert stats.children == 0 and stats.connections == 0
    assert "authentication failed" in caplog.text


async def test_a_tcp_client_with_a_wrong_token_is_refused_and_the_token_is_never_logged(caplog) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "wrong-token-0123456789abcdef"
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), ["tcp:127.0.0.1:0"], listen_options=guarded()) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            await client.send(authenticate_message(wrong), request(1, "ping"))
            replies = await client.receive_until_eof()
            assert [(r["id"], r["error"]["code"]) for r in replies] == [(None, UNAUTHORIZED)]
            assert daemon.statistics().children == 0
            good = await LineClient.open(daemon.addresses[0])
            await good.send(authenticate_message(TOKEN))
            assert result_text(await good.call(2, "echo", text="in")) == "in"
            await good.aclose()
    assert "wrong token" in caplog.text
    # One INFO line, no traceback: a refused client is normal operation.
    refused = [record for record in caplog.records if "authentication failed" in record.getMessage()]
    assert [(record.levelno, record.exc_info) for record in refused] == [(logging.INFO, None)]
    assert "auth='test token'" in caplog.text  # which token was used, by its label
    assert wrong not in caplog.text and TOKEN not in caplog.text


async def test_messages_pipelined_behind_the_token_all_reach_the_child() -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), ["tcp:127.0.0.1:0"], listen_options=guarded()) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            await client.send(authenticate_message(TOKEN), *(call(n, "echo", text=str(n)) for n in range(5)))
            replies = [await client.receive() for _ in range(5)]
            assert [result_text(r) for r in replies] == [str(n) for n in range(5)]
            await client.aclose()


async def test_a_client_that_never_authenticates_is_cut_at_the_handshake_deadline() -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(), ["tcp:127.0.0.1:0"], listen_options=guarded(handshake_timeout=0.3)
        ) as daemon:
            silent = await LineClient.open(daemon.addresses[0])
            assert await silent.receive_until_eof() == []
            await poll(lambda: daemon.statistics().handshakes_failed == 1)
            assert daemon.statistics().children == 0


async def test_unix_sockets_are_not_asked_for_a_token(sock_dir: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(), [f"unix:{sock_dir}/s.sock"], listen_options=guarded()
        ) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            assert result_text(await client.call(1, "echo", text="local")) == "local"
            await client.aclose()


async def test_our_tcp_client_presents_its_token_first() -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), ["tcp:127.0.0.1:0"], listen_options=guarded()) as daemon:
            address = parse_address(daemon.addresses[0])
            async with address.connect(ConnectOptions(token=TOKEN)) as channel:
                await channel.send(call(1, "echo", text="ok"))
                assert result_text(await channel.receive()) == "ok"


# -- the loopback rule ----------------------------------------------------------------------------


@pytest.mark.parametrize("address", ["tcp:0.0.0.0:0", "ws://0.0.0.0:0/"])
async def test_a_non_loopback_bind_without_authentication_is_refused_naming_the_flags(address: str) -> None:
    with trio.fail_after(TIMEOUT):
        with pytest.raises(ListenError, match=r"--token-file.*--insecure-no-auth"):
            await parse_address(address).listen(ListenOptions())


async def test_a_non_loopback_bind_with_tokens_is_allowed_with_a_clear_text_warning(caplog) -> None:
    with trio.fail_after(TIMEOUT):
        listeners = await TcpAddress("0.0.0.0", 0).listen(guarded())
        for listener in listeners:
            await listener.aclose()
        assert "clear text" in caplog.text
        listeners = await WebSocketAddress.parse("ws://0.0.0.0:0/").listen(guarded())
        for listener in listeners:
            await listener.aclose()


# -- connect ----------------------------------------------------------------------------------------


async def test_connect_presents_a_token_from_an_environment_variable_and_never_takes_one_as_an_argument(
    monkeypatch,
) -> None:
    monkeypatch.setenv("MCP_BRIDGE_TOKEN", TOKEN)
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), ["tcp:127.0.0.1:0"], listen_options=guarded()) as daemon:
            async with connect(daemon.addresses[0], "--token-env", "MCP_BRIDGE_TOKEN") as client:
                assert result_text(await client.call_echo(1, "with a token")) == "with a token"
                await client.close_stdin()
                assert await client.exit_code() == EXIT_OK
            async with connect(daemon.addresses[0], "--token", TOKEN) as client:
                assert await client.exit_code() == 2  # no such option: argv is world-readable


async def test_connect_with_a_wrong_token_exits_77_with_a_message(tmp_path: Path) -> None:
    path = token_file(tmp_path, "wrong-token-0123456789abcdef")
    with trio.fail_after(TIMEOUT):
        async with running_bridge(example_server(), ["tcp:127.0.0.1:0"], listen_options=guarded()) as daemon:
            async with connect(daemon.addresses[0], "--token-file", path) as client:
                await client.send(request(1, "ping"))
                assert await client.exit_code() == EXIT_NOPERM
                assert "access denied" in client.stderr_text()
            assert daemon.statistics().children == 0


async def test_connect_refuses_a_token_file_readable_by_others(tmp_path: Path) -> None:
    path = token_file(tmp_path, TOKEN, mode=0o644)
    with trio.fail_after(TIMEOUT):
        async with connect("tcp:127.0.0.1:9", "--token-file", path) as client:
            assert await client.exit_code() == 78
            assert "chmod o-rwx" in client.stderr_text()
