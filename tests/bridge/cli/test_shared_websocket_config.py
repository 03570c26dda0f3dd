"""WebSocket shared listeners in the configuration file (``kind = "ws"`` or ``"wss"`` in
``[listeners.NAME]``), and ``--config FILE --listen ws://...``: servers mounted at
``PREFIX/NAME/ws``, and each mistake named with its fix."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from test_config import SERVER, run_bridge_check, token_file, toml_list
from test_shared_listener_config import desktop_file

from bridge._cli.config import plan, read
from bridge._cli.serve import servers_to_run
from bridge._cli.serve_parser import serve_parser
from bridge._errors import ConfigError

TIMEOUT = 20
TOKEN = "shared-websocket-token-0123456789"


def websocket_servers(directory: Path, extra: str = "", listener: str = "") -> Path:
    tokens = token_file(directory, TOKEN)
    config = directory / "bridge.toml"
    config.write_text(f"""
[listeners.sockets]
kind = "ws"
address = "127.0.0.1:0"
allow_origin = ["https://app.example.com"]
{listener}
[servers.alpha]
command = {toml_list(SERVER)}
[[servers.alpha.listeners]]
shared = "sockets"

[servers.beta]
command = {toml_list(SERVER)}
[[servers.beta.listeners]]
shared = "sockets"
path = "/tools/beta/ws"
token_file = ["{tokens}"]
{extra}""")
    return config


def test_servers_mounted_on_a_websocket_shared_listener_are_at_prefix_name_ws_with_their_own_tokens(
    tmp_path: Path,
) -> None:
    fleet = plan(read(str(websocket_servers(tmp_path))))
    listener = fleet.listeners["sockets"]
    assert listener.url == "ws://127.0.0.1:0"
    assert listener.websocket and not listener.index
    assert {name: fleet.endpoints(name) for name in fleet.servers} == {
        "alpha": [("sockets", "/servers/alpha/ws")],
        "beta": [("sockets", "/tools/beta/ws")],
    }
    [alpha], [beta] = fleet.mounts["alpha"], fleet.mounts["beta"]
    assert beta.options.tokens is not None and alpha.options.tokens is None
    # the socket's Origin check applies in every mount's guard
    assert all(mount.options.allow_origins == {"https://app.example.com"} for mount in (alpha, beta))


BAD = [
    ("index = true\n", "listeners.sockets.index: a WebSocket listener has no index"),
    ('token_file = ["t"]\n', "listeners.sockets.token_file: not used by kind = 'ws' (it guards the index"),
    ('oauth_issuer = ["https://id.example"]\n', "listeners.sockets.oauth_issuer: not used by kind = 'ws'"),
    ("trust_proxy = true\n", "listeners.sockets.trust_proxy: not used by kind = 'ws'"),
    (
        'tls_cert = "c.pem"\n',
        "listeners.sockets.tls_cert: for kind = 'wss'; remove it or make the listener wss",
    ),
]


@pytest.mark.parametrize(("listener", "message"), BAD)
def test_each_mistake_on_a_websocket_shared_listener_is_named_by_its_field_with_the_fix(
    tmp_path: Path, listener: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        plan(read(str(websocket_servers(tmp_path, listener=listener))))
    assert message in str(caught.value)


MOUNT_BAD = [
    (
        '[[servers.alpha.listeners]]\nshared = "sockets"\nmax_sessions = 3\n',
        "servers.alpha.listeners[1].max_sessions: HTTP's; not used by a mount on WebSocket listener",
    ),
    (
        '[[servers.alpha.listeners]]\nshared = "sockets"\ncors_origin = ["https://x"]\n',
        "servers.alpha.listeners[1].cors_origin: HTTP's",
    ),
    (
        '[servers.gamma]\ncommand = ["cat"]\n[[servers.gamma.listeners]]\nshared = "sockets"\npath = "/tools/beta/ws"\n',
        "servers.gamma: its path /tools/beta/ws on listener 'sockets' collides with servers.beta's",
    ),
]


@pytest.mark.parametrize(("extra", "message"), MOUNT_BAD)
def test_each_mistake_in_a_mount_on_a_websocket_listener_is_named_by_its_field(
    tmp_path: Path, extra: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        plan(read(str(websocket_servers(tmp_path, extra))))
    assert message in str(caught.value)


def test_a_wss_shared_listener_needs_its_certificate_and_key(tmp_path: Path) -> None:
    config = websocket_servers(tmp_path)
    config.write_text(config.read_text().replace('kind = "ws"', 'kind = "wss"'))
    with pytest.raises(ConfigError, match=r"listeners\.sockets: kind = 'wss' needs tls_cert and tls_key"):
        plan(read(str(config)))


def test_a_servers_path_on_a_websocket_listener_may_be_its_prefix_since_it_has_no_index(
    tmp_path: Path,
) -> None:
    extra = '[servers.gamma]\ncommand = ["cat"]\n[[servers.gamma.listeners]]\nshared = "sockets"\npath = "/servers"\n'
    fleet = plan(read(str(websocket_servers(tmp_path, extra))))
    assert fleet.endpoints("gamma") == [("sockets", "/servers")]


def test_an_mcp_servers_json_with_listen_ws_mounts_every_server_at_its_ws_path_with_the_tokens(
    tmp_path: Path,
) -> None:
    tokens = token_file(tmp_path, TOKEN)
    argv = [
        "--config",
        str(desktop_file(tmp_path)),
        "--listen",
        "ws://127.0.0.1:0",
        "--token-file",
        str(tokens),
    ]
    fleet, reread = servers_to_run(serve_parser().parse_args(argv), [])
    assert reread is not None
    assert fleet.listeners["listen"].url == "ws://127.0.0.1:0"
    assert fleet.listeners["listen"].options.tokens is None  # no index to guard
    assert [fleet.endpoints(name) for name in fleet.servers] == [
        [("listen", "/servers/one/ws")],
        [("listen", "/servers/two/ws")],
    ]
    assert all(mount.options.tokens is not None for mounts in fleet.mounts.values() for mount in mounts)


async def test_check_config_shows_the_websocket_listener_and_each_servers_ws_url(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        result = await run_bridge_check(str(websocket_servers(tmp_path)))
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode().splitlines()
    assert lines[0] == "listener sockets: ws://127.0.0.1:0, servers under /servers/ (WebSocket)"
    assert "ws://127.0.0.1:0/servers/alpha/ws (listener sockets)" in lines[1]
    assert "ws://127.0.0.1:0/tools/beta/ws (listener sockets)" in lines[2]
