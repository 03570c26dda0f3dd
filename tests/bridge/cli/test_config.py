"""``--config FILE``: many servers from one TOML file (or a client's mcpServers JSON), each field's
error named by its path, and ``check-config`` validating without starting anything."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest
import trio
from commands import admin_port, get, http, run_bridge

import channels
from bridge._cli.config import read, serve_configs
from bridge._cli.serve import build_serve_config
from bridge._cli.serve_parser import serve_parser
from bridge._errors import ConfigError

from conftest import EXAMPLE_SERVER, LineClient, bridge_process, call, poll, result_text, servers_file

TIMEOUT = 20
TOKEN = "config-token-0123456789abcdef"
SERVER = [sys.executable, str(EXAMPLE_SERVER)]


def toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(item) for item in items) + "]"


def token_file(directory: Path, token: str) -> Path:
    """``directory/tokens`` holding ``token``, readable by its owner only (as token files must be)."""
    tokens = directory / "tokens"
    tokens.write_text(token + "\n")
    tokens.chmod(0o600)
    return tokens


def two_servers(directory: Path) -> Path:
    tokens = token_file(directory, TOKEN)
    config = directory / "bridge.toml"
    config.write_text(f"""
[servers.alpha]
command = {toml_list(SERVER)}
child = "per-connection"

[[servers.alpha.listeners]]
kind = "unix"
path = "{directory}/alpha.sock"

[[servers.alpha.listeners]]
kind = "ws"
address = "127.0.0.1:0"
path = "/mcp"
token_file = ["{tokens}"]

[servers.beta]
command = {toml_list(SERVER)}
child = "shared"
restart_window = "30s"

[servers.beta.limits]
max_message = "1MiB"
drain_timeout = "3s"
ping_interval = "5s"

[[servers.beta.listeners]]
kind = "unix"
path = "{directory}/beta.sock"
socket_mode = "0660"
""")
    return config


async def test_one_file_serves_several_servers_each_on_its_own_listeners(sock_dir: Path) -> None:
    config = two_servers(sock_dir)
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--config", str(config), "--admin", "tcp:127.0.0.1:0", listeners=3
        ) as bridge:
            by_kind = {address.split(":")[0]: address for address in bridge.addresses}
            for name in ("alpha", "beta"):
                client = await LineClient.open(f"unix:{sock_dir}/{name}.sock")
                assert result_text(await client.call(1, "echo", text=name)) == name
                await client.aclose()
            assert oct((sock_dir / "beta.sock").stat().st_mode & 0o777) == "0o660"
            ws = by_kind["ws"]
            with pytest.raises(channels.AccessDenied):  # the ws listener, and only it, wants a token
                async with channels.connect(ws):
                    pass
            async with channels.connect(ws, channels.ConnectOptions(token=TOKEN)) as channel:
                await channel.send(call(2, "echo", text="with a token"))
                assert result_text(await channel.receive()) == "with a token"
            await poll(lambda: any("admin endpoint on" in line for line in bridge.stderr_lines))
            port = admin_port(bridge.stderr_lines)
            status, _, ready = await http(port, get("/readyz"))
            assert status == 200 and [line.split(":")[0] for line in ready.splitlines()] == ["alpha", "beta"]
            _, _, metrics = await http(port, get("/metrics"))
    assert metrics.count("# TYPE mcp_bridge_up gauge") == 1  # one family, a sample per server
    assert 'mcp_bridge_up{server="alpha"} 1' in metrics and 'mcp_bridge_up{server="beta"} 1' in metrics
    log = bridge.log()
    assert "[alpha]" in log or ("alpha" in log and "beta" in log)


def test_the_file_maps_onto_the_same_model_as_the_command_line(sock_dir: Path) -> None:
    configs = serve_configs(read(str(two_servers(sock_dir))))
    alpha, beta = configs["alpha"], configs["beta"]
    assert [str(address) for address in alpha.listen] == [
        f"unix:{sock_dir}/alpha.sock",
        "ws://127.0.0.1:0/mcp",
    ]
    assert alpha.listener_options[1].tokens is not None and alpha.listener_options[0].tokens is None
    assert beta.child_mode == "shared" and beta.limits.max_client_message == 1 << 20
    assert beta.limits.drain_timeout == 3 and beta.restart_policy.crash_window == 30
    assert beta.listener_options[0].ping_interval == 5
    assert alpha.child.name == "alpha"


BAD_FILES = [
    (
        '[servers.a]\ncommand = ["x"]\n[[servers.a.listeners]]\nkind = "unix"\npath = 5\n',
        "servers.a.listeners[0].path: expected a string",
    ),
    (
        '[servers.a]\ncommand = ["x"]\ncolour = "blue"\n[[servers.a.listeners]]\nkind = "unix"\npath = "/x"\n',
        "servers.a: unknown keys",
    ),
    ('[servers.a]\n[[servers.a.listeners]]\nkind = "unix"\npath = "/x"\n', "servers.a.command: required"),
    (
        '[servers.a]\ncommand = ["x"]\n[[servers.a.listeners]]\nkind = "carrier-pigeon"\n',
        "servers.a.listeners[0].kind: expected one of unix, tcp, tls, ws, wss, http, https, fd",
    ),
    (
        '[servers.a]\ncommand = ["x"]\n[[servers.a.listeners]]\nkind = "tcp"\n',
        "servers.a.listeners[0].address: required for kind = 'tcp'",
    ),
    (
        '[servers.a]\ncommand = ["x"]\n[servers.a.limits]\ndrain_timeout = "soon"\n'
        '[[servers.a.listeners]]\nkind = "unix"\npath = "/x"\n',
        "servers.a.limits.drain_timeout",
    ),
    ('[servers.a]\ncommand = ["x"]\nlisteners = []\n', "servers.a.listeners: a server needs at least one"),
    ('[servers.a\ncommand = ["x"]\n', "not TOML"),
    ("", "servers: required"),
    (
        '[servers.a]\ncommand = "x"\n[[servers.a.listeners]]\nkind = "unix"\npath = "/x"\n',
        "servers.a.command: expected a list",
    ),
    (
        '[servers.a]\ncommand = ["x"]\nrestart_limit = -1\n[[servers.a.listeners]]\nkind = "unix"\npath = "/x"\n',
        "servers.a.restart_limit: expected a whole number, at least 0",
    ),
    (
        '[servers.a]\ncommand = ["x"]\n[[servers.a.listeners]]\nkind = "tcp"\naddress = "127.0.0.1:1"\n'
        'tls_cert = "/c.pem"\n',
        "servers.a.listeners[0].tls_cert: not used by kind = 'tcp'",
    ),
    (
        '[servers.a]\ncommand = ["x"]\n[[servers.a.listeners]]\nkind = "ws"\naddress = "127.0.0.1:1"\n'
        "trust_proxy = true\n",
        "servers.a.listeners[0].trust_proxy: not used by kind = 'ws'",
    ),
    (
        '[servers.a]\ncommand = ["x"]\n[[servers.a.listeners]]\nkind = "http"\naddress = "127.0.0.1:1"\n'
        'session_idle_timeout = "a while"\n',
        "servers.a.listeners[0].session_idle_timeout",
    ),
    (
        '[servers.a]\ncommand = ["x"]\n[[servers.a.listeners]]\nkind = "http"\naddress = "127.0.0.1:1"\n'
        'sse_after = "soon"\n',
        "servers.a.listeners[0].sse_after",
    ),
]


def test_an_activated_socket_in_the_file_can_serve_http_on_a_path(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[servers.a]\ncommand = ["x"]\n[[servers.a.listeners]]\nkind = "fd"\nname = "web"\n'
        'protocol = "http"\npath = "/servers/a/mcp"\ntrust_proxy = true\n'
    )
    config = serve_configs(read(str(path)))["a"]
    assert [str(address) for address in config.listen] == ["http+fd:web/servers/a/mcp"]
    assert config.listener_options[0].http.trust_proxy


def test_an_http_listener_in_the_file_carries_its_http_settings(tmp_path: Path) -> None:
    metadata = tmp_path / "prm.json"
    metadata.write_text('{"authorization_servers": ["https://auth.example"]}')
    path = tmp_path / "c.toml"
    path.write_text(
        '[servers.a]\ncommand = ["x"]\n[[servers.a.listeners]]\nkind = "http"\naddress = "127.0.0.1:7302"\n'
        'path = "/mcp"\ncors_origin = ["https://App.example/"]\ntrust_proxy = true\n'
        f'oauth_metadata = "{metadata}"\nsession_idle_timeout = "10m"\nmax_sessions = 8\n'
        'sse_after = "45s"\n'
    )
    config = serve_configs(read(str(path)))["a"]
    assert [str(address) for address in config.listen] == ["http://127.0.0.1:7302/mcp"]
    http = config.listener_options[0].http
    assert http.cors_origins == frozenset({"https://app.example"})
    assert http.trust_proxy and http.session_idle_timeout == 600 and http.max_sessions == 8
    assert http.sse_after == 45
    assert http.resource_metadata == {"authorization_servers": ["https://auth.example"]}


@pytest.mark.parametrize(("text", "fragment"), BAD_FILES)
async def test_check_config_names_the_path_of_each_bad_field(
    tmp_path: Path, text: str, fragment: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with trio.fail_after(TIMEOUT):
        result = await run_bridge_check(str(path))
    assert result.returncode == 78, result.stderr.decode()
    assert fragment in result.stderr.decode()
    assert result.stdout == b""


async def run_bridge_check(*args: str):  # type: ignore[no-untyped-def]
    return await trio.run_process(
        [sys.executable, "-m", "bridge", "check-config", *args],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )


async def test_check_config_lists_the_servers_of_a_good_file_and_starts_nothing(sock_dir: Path) -> None:
    with trio.fail_after(TIMEOUT):
        result = await run_bridge_check(str(two_servers(sock_dir)))
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode().splitlines()
    assert [line.split(":")[0] for line in lines] == ["alpha", "beta"]
    assert not (sock_dir / "alpha.sock").exists()


async def test_a_clients_mcp_servers_json_is_served_as_is_one_socket_per_server(sock_dir: Path) -> None:
    desktop = sock_dir / "claude_desktop_config.json"
    desktop.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "first": {"command": SERVER[0], "args": SERVER[1:]},
                    "second": {"command": SERVER[0], "args": SERVER[1:], "env": {"EXAMPLE": "1"}},
                }
            }
        )
    )
    with trio.fail_after(TIMEOUT):
        checked = await run_bridge_check(str(desktop), "--socket-dir", str(sock_dir))
        assert checked.returncode == 0, checked.stderr.decode()
        async with bridge_process("--config", str(desktop), "--socket-dir", str(sock_dir), listeners=2):
            for name in ("first", "second"):
                client = await LineClient.open(f"unix:{sock_dir}/{name}.sock")
                assert result_text(await client.call(1, "echo", text=name)) == name
                await client.aclose()


def test_a_remote_server_in_mcp_servers_json_is_refused_by_name(tmp_path: Path) -> None:
    desktop = tmp_path / "servers.json"
    desktop.write_text(json.dumps({"mcpServers": {"remote": {"url": "https://example.org/mcp"}}}))
    with pytest.raises(ConfigError, match=r"mcpServers\.remote: a remote server"):
        read(str(desktop))


async def test_config_and_listen_together_are_refused(sock_dir: Path) -> None:
    with trio.fail_after(TIMEOUT):
        result = await run_bridge(
            "--config", str(two_servers(sock_dir)), "--listen", f"unix:{sock_dir}/x.sock"
        )
    assert result.returncode == 78
    assert "drop --listen" in result.stderr.decode()


def test_the_example_in_the_template_unit_is_a_valid_configuration(tmp_path: Path) -> None:
    unit = (Path(__file__).resolve().parents[3] / "systemd" / "mcp-bridge@.service").read_text()
    example = "\n".join(
        line.removeprefix("#   ").removeprefix("#")
        for line in unit.split("\n\n")[0].splitlines()[3:]
        if line.startswith("#")
    )
    path = tmp_path / "NAME.toml"
    path.write_text(example.split("Check it first")[0])
    [config] = serve_configs(read(str(path))).values()
    assert [str(address) for address in config.listen] == ["fd:mcp"]
    assert config.child.argv[:2] == ("npx", "-y")


async def test_sighup_starts_added_servers_stops_removed_ones_and_leaves_the_others_and_their_clients_alone(
    sock_dir: Path,
) -> None:
    config = sock_dir / "bridge.toml"
    servers_file(config, sock_dir, ["alpha", "beta"])
    with trio.fail_after(TIMEOUT):
        async with bridge_process("--config", str(config), listeners=2) as bridge:
            alpha = await LineClient.open(f"unix:{sock_dir}/alpha.sock")
            assert result_text(await alpha.call(1, "echo", text="before")) == "before"
            servers_file(config, sock_dir, ["alpha", "gamma"])
            bridge.process.send_signal(signal.SIGHUP)
            await poll(lambda: (sock_dir / "gamma.sock").exists() and not (sock_dir / "beta.sock").exists())
            gamma = await LineClient.open(f"unix:{sock_dir}/gamma.sock")
            assert result_text(await gamma.call(1, "echo", text="new")) == "new"
            # alpha's connection, and its child, went on untouched
            assert result_text(await alpha.call(2, "echo", text="after")) == "after"
            await alpha.aclose()
            await gamma.aclose()
    assert any("[beta] removed from the configuration" in line for line in bridge.stderr_lines)
    assert not any("[alpha]" in line and "stopping" in line for line in bridge.stderr_lines)


async def test_a_server_whose_settings_changed_is_restarted_with_them_on_sighup(sock_dir: Path) -> None:
    config = sock_dir / "bridge.toml"
    servers_file(config, sock_dir, ["alpha"])
    with trio.fail_after(TIMEOUT):
        async with bridge_process("--config", str(config)) as bridge:
            old = await LineClient.open(f"unix:{sock_dir}/alpha.sock")
            assert result_text(await old.call(1, "echo", text="old")) == "old"
            servers_file(config, sock_dir, ["alpha"], child="shared")
            bridge.process.send_signal(signal.SIGHUP)
            assert await old.receive_until_eof() == []  # drained and closed: its session is gone
            await poll(lambda: any("[alpha] started" in line for line in bridge.stderr_lines))
            new = await LineClient.open(f"unix:{sock_dir}/alpha.sock")
            assert result_text(await new.call(1, "echo", text="new")) == "new"
            await new.aclose()
    assert any("shared child" in line for line in bridge.stderr_lines)


async def test_a_bad_file_on_sighup_is_reported_and_the_running_servers_stay(sock_dir: Path) -> None:
    config = sock_dir / "bridge.toml"
    servers_file(config, sock_dir, ["alpha"])
    with trio.fail_after(TIMEOUT):
        async with bridge_process("--config", str(config)) as bridge:
            config.write_text("[servers.alpha\n")
            bridge.process.send_signal(signal.SIGHUP)
            await poll(lambda: any("reload failed" in line for line in bridge.stderr_lines))
            client = await LineClient.open(f"unix:{sock_dir}/alpha.sock")
            assert result_text(await client.call(1, "echo", text="still here")) == "still here"
            await client.aclose()
            bridge.process.send_signal(signal.SIGTERM)
            assert await bridge.process.wait() == 0


def test_mcp_servers_names_cannot_escape_the_socket_directory_and_disabled_ones_are_skipped(
    tmp_path: Path,
) -> None:
    escaping = tmp_path / "escaping.json"
    escaping.write_text(json.dumps({"mcpServers": {"../evil": {"command": "cat"}}}))
    with pytest.raises(ConfigError, match="no '/'"):
        read(str(escaping))
    mixed = tmp_path / "mixed.json"
    mixed.write_text(
        json.dumps({"mcpServers": {"on": {"command": "cat"}, "off": {"command": "cat", "disabled": True}}})
    )
    assert list(read(str(mixed), str(tmp_path)).servers) == ["on"]


async def test_command_line_server_options_are_refused_beside_config(sock_dir: Path) -> None:
    with trio.fail_after(TIMEOUT):
        result = await run_bridge("--config", str(two_servers(sock_dir)), "--max-message", "1KiB")
    assert result.returncode == 78
    assert "--max-message: with --config, set this in the file" in result.stderr.decode()


async def test_a_server_renamed_on_sighup_keeps_serving_on_the_same_socket(sock_dir: Path) -> None:
    config = sock_dir / "bridge.toml"
    config.write_text(
        f'[servers.old]\ncommand = {toml_list(SERVER)}\nchild = "per-connection"\n'
        f'[[servers.old.listeners]]\nkind = "unix"\npath = "{sock_dir}/mcp.sock"\n'
    )
    with trio.fail_after(TIMEOUT):
        async with bridge_process("--config", str(config)) as bridge:
            config.write_text(config.read_text().replace("servers.old", "servers.new"))
            bridge.process.send_signal(signal.SIGHUP)
            await poll(lambda: any("[new] started" in line for line in bridge.stderr_lines))
            client = await LineClient.open(f"unix:{sock_dir}/mcp.sock")
            assert result_text(await client.call(1, "echo", text="renamed")) == "renamed"
            await client.aclose()
    assert not any("could not start" in line for line in bridge.stderr_lines)


def test_sse_after_on_the_command_line_reaches_the_http_listeners_options() -> None:
    argv = ["--listen", "http://127.0.0.1:0/mcp", "--sse-after", "2m"]
    config = build_serve_config(serve_parser().parse_args(argv), [sys.executable])
    assert config.listen_options.http.sse_after == 120
    default = build_serve_config(serve_parser().parse_args(argv[:2]), [sys.executable])
    assert default.listen_options.http.sse_after == channels.HttpOptions().sse_after == 15
