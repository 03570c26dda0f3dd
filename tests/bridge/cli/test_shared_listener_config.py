"""Shared listeners in the configuration file (``[listeners.NAME]``, ``shared = "NAME"``), and
``--config FILE --listen http://...``: what they become, and each mistake named with its fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio
from test_config import SERVER, run_bridge_check, token_file, toml_list

from bridge._cli.config import plan, read
from bridge._cli.fleet_file import read_config
from bridge._cli.serve import servers_to_run
from bridge._cli.serve_parser import serve_parser
from bridge._errors import ConfigError

TIMEOUT = 20
TOKEN = "shared-listener-token-0123456789"


def three_servers(directory: Path, extra: str = "") -> Path:
    tokens = token_file(directory, TOKEN)
    config = directory / "bridge.toml"
    config.write_text(f"""
[listeners.public]
kind = "http"
address = "127.0.0.1:0"
allow_host = ["mcp.example.com"]

[servers.alpha]
command = {toml_list(SERVER)}
child = "shared"
[[servers.alpha.listeners]]
shared = "public"

[servers.beta]
command = {toml_list(SERVER)}
child = "per-connection"
[[servers.beta.listeners]]
shared = "public"
path = "/tools/beta/mcp"
max_sessions = 7

[servers.gamma]
command = {toml_list(SERVER)}
[[servers.gamma.listeners]]
shared = "public"
token_file = ["{tokens}"]
{extra}""")
    return config


def test_servers_mounted_on_a_shared_listener_keep_their_own_paths_tokens_and_sessions(
    tmp_path: Path,
) -> None:
    fleet = plan(read(str(three_servers(tmp_path))))
    assert fleet.listeners["public"].url == "http://127.0.0.1:0"
    assert fleet.listeners["public"].prefix == "/servers"
    assert {name: fleet.endpoints(name) for name in fleet.servers} == {
        "alpha": [("public", "/servers/alpha/mcp")],
        "beta": [("public", "/tools/beta/mcp")],
        "gamma": [("public", "/servers/gamma/mcp")],
    }
    assert all(config.listen == () for config in fleet.servers.values())  # the fleet adds the mount
    [alpha], [beta], [gamma] = fleet.mounts["alpha"], fleet.mounts["beta"], fleet.mounts["gamma"]
    assert gamma.options.tokens is not None and alpha.options.tokens is None
    assert beta.options.http.max_sessions == 7
    # the socket's Host check applies in every mount's guard
    assert all(mount.options.allow_hosts == {"mcp.example.com"} for mount in (alpha, beta, gamma))


BAD = [
    (
        '[[servers.gamma.listeners]]\nshared = "nope"\n',
        "servers.gamma.listeners[1].shared: no listener 'nope'; declare [listeners.nope]",
    ),
    (
        '[listeners.raw]\nkind = "tcp"\naddress = "127.0.0.1:0"\n',
        'listeners.raw.kind: expected "http" or "https"',
    ),
    ('[listeners.other]\nkind = "http"\n', "listeners.other.address: required for kind = 'http'"),
    (
        '[listeners.other]\nkind = "http"\naddress = "127.0.0.1:0"\ncors_origin = ["x"]\n',
        "listeners.other.cors_origin: a setting of each server, not of the socket",
    ),
    (
        '[listeners.other]\nkind = "http"\naddress = "127.0.0.1:0"\npath = "/x"\n',
        "listeners.other.path: each server has its own path; set prefix",
    ),
    (
        '[listeners.other]\nkind = "http"\naddress = "127.0.0.1:0"\nprefix = "/a/"\n',
        "listeners.other.prefix: expected an absolute path without a trailing slash",
    ),
    (
        '[[servers.gamma.listeners]]\nkind = "http"\nshared = "public"\n',
        "servers.gamma.listeners[1].kind: a mount is served by [listeners.public]",
    ),
    (
        '[[servers.gamma.listeners]]\nshared = "public"\ntls_cert = "c.pem"\n',
        "servers.gamma.listeners[1].tls_cert: a setting of the socket, which the servers share; set it on [listeners.public]",
    ),
    (
        '[[servers.gamma.listeners]]\nshared = "public"\nsocket_mode = "0600"\n',
        "servers.gamma.listeners[1].socket_mode: not used by a mount",
    ),
    ('[[servers.gamma.listeners]]\npath = "/x"\n', "servers.gamma.listeners[1].kind: required"),
    (
        '[servers."my server"]\ncommand = ["cat"]\n[[servers."my server".listeners]]\nshared = "public"\n',
        "servers.my server: a server on a shared listener is named in its paths",
    ),
    (
        '[servers.delta]\ncommand = ["cat"]\n[[servers.delta.listeners]]\nshared = "public"\npath = "/tools/beta/mcp"\n',
        "servers.delta: its path /tools/beta/mcp on listener 'public' collides with servers.beta's",
    ),
    (
        '[servers.delta]\ncommand = ["cat"]\n[[servers.delta.listeners]]\nshared = "public"\npath = "/tools/beta/other"\n',
        "collides with servers.beta's (/tools/beta/messages)",
    ),
    (
        '[servers.delta]\ncommand = ["cat"]\n[[servers.delta.listeners]]\nshared = "public"\npath = "/servers"\n',
        "servers.delta: its path /servers is the index of listener 'public'",
    ),
    (
        '[servers.delta]\ncommand = ["cat"]\n[[servers.delta.listeners]]\nshared = "public"\npath = "/a/../b"\n',
        "servers.delta.listeners[0].path: no . or .. segments",
    ),
    (
        '[servers.delta]\ncommand = ["cat"]\n[[servers.delta.listeners]]\nshared = "public"\npath = "/a%2Fb"\n',
        "servers.delta.listeners[0].path: letters, digits",
    ),
    (
        '[[servers.gamma.listeners]]\nshared = "public"\npath = "/g2/mcp"\n',
        "servers.gamma.listeners: mounted twice on listener 'public'",
    ),
]


@pytest.mark.parametrize(("extra", "message"), BAD)
def test_each_mistake_with_a_shared_listener_is_named_by_its_field_with_the_fix(
    tmp_path: Path, extra: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        plan(read(str(three_servers(tmp_path, extra))))
    assert message in str(caught.value)


async def test_check_config_shows_the_shared_listener_and_each_servers_url_on_it(tmp_path: Path) -> None:
    with trio.fail_after(TIMEOUT):
        result = await run_bridge_check(str(three_servers(tmp_path)))
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode().splitlines()
    assert lines[0] == "listener public: http://127.0.0.1:0, servers under /servers/"
    assert "http://127.0.0.1:0/tools/beta/mcp (listener public)" in lines[2]
    assert lines[1].startswith("alpha: ") and "http://127.0.0.1:0/servers/alpha/mcp" in lines[1]


def desktop_file(directory: Path, command: str = SERVER[0]) -> Path:
    path = directory / "servers.json"
    servers = {name: {"command": command, "args": SERVER[1:]} for name in ("one", "two")}
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def test_an_mcp_servers_json_with_listen_http_mounts_every_server_on_that_port_instead_of_sockets(
    tmp_path: Path,
) -> None:
    argv = ["--config", str(desktop_file(tmp_path)), "--listen", "http://127.0.0.1:0"]
    fleet, reread = servers_to_run(serve_parser().parse_args(argv), [])
    assert reread is not None
    assert fleet.listeners["listen"].url == "http://127.0.0.1:0"
    assert [fleet.endpoints(name) for name in fleet.servers] == [
        [("listen", "/servers/one/mcp")],
        [("listen", "/servers/two/mcp")],
    ]
    assert all(config.listen == () for config in fleet.servers.values())  # no Unix socket
    prefixed = servers_to_run(serve_parser().parse_args([*argv[:3], "http://127.0.0.1:0/mcp/"]), [])[0]
    assert prefixed.endpoints("one") == [("listen", "/mcp/one/mcp")]


def test_listen_beside_config_takes_one_http_url_and_its_tokens_guard_every_server(tmp_path: Path) -> None:
    tokens = token_file(tmp_path, TOKEN)
    argv = [
        "--config",
        str(desktop_file(tmp_path)),
        "--listen",
        "http://127.0.0.1:0",
        "--token-file",
        str(tokens),
    ]
    fleet, _ = servers_to_run(serve_parser().parse_args(argv), [])
    assert fleet.listeners["listen"].options.tokens is not None
    assert all(mount.options.tokens is not None for mounts in fleet.mounts.values() for mount in mounts)
    for listen in (["tcp:127.0.0.1:0"], ["http://127.0.0.1:0", "http://127.0.0.1:1"]):
        options = serve_parser().parse_args(
            [
                "--config",
                str(desktop_file(tmp_path)),
                *[flag for item in listen for flag in ("--listen", item)],
            ]
        )
        with pytest.raises(ConfigError, match="give one --listen http://HOST:PORT"):
            servers_to_run(options, [])


def test_a_mounted_server_whose_command_is_missing_is_left_out_when_serving_but_refused_by_check_config(
    tmp_path: Path,
) -> None:
    config = three_servers(tmp_path)
    config.write_text(
        config.read_text().replace(
            f'command = {toml_list(SERVER)}\nchild = "per-connection"',
            'command = ["mb-no-such-command-xyz"]\nchild = "per-connection"',
        )
    )
    fleet = read_config(str(config), str(tmp_path))
    assert list(fleet.unavailable) == ["beta"]
    assert "'mb-no-such-command-xyz' not found in PATH" in fleet.unavailable["beta"]
    with pytest.raises(
        ConfigError, match=r"servers\.beta\.command: command 'mb-no-such-command-xyz' not found"
    ):
        read_config(str(config), str(tmp_path), strict=True)
