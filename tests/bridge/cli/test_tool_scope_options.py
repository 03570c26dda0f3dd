"""Per-tool scopes from the command line (``--tool-scope``) and the configuration file (``tool_scopes``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

from bridge._cli.config import read, serve_configs
from bridge._cli.describe import describe
from bridge._cli.serve import build_serve_config, servers_to_run
from bridge._cli.serve_parser import serve_parser
from bridge._errors import ConfigError

from conftest import EXAMPLE_SERVER, LineClient, bridge_process, request

TIMEOUT = 20


def from_command_line(*flags: str):  # type: ignore[no-untyped-def]
    argv = ["--listen", "unix:/tmp/never-bound.sock", *flags]
    return build_serve_config(serve_parser().parse_args(argv), [sys.executable])


def test_tool_scope_options_add_up_to_one_policy_and_a_repeated_pattern_needs_all_its_scopes() -> None:
    config = from_command_line(
        "--tool-scope", "delete_*=mcp:admin", "--tool-scope", "delete_*=audit", "--tool-scope", "read_*=a,b"
    )
    scopes = config.tool_scopes
    assert scopes.required("delete_user") == {"mcp:admin", "audit"}
    assert scopes.required("read_file") == {"a", "b"}
    assert scopes.scopes_supported == ("a", "audit", "b", "mcp:admin")
    assert not from_command_line().tool_scopes  # none by default


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("delete_*", "--tool-scope 'delete_*': expected PATTERN=SCOPE[,SCOPE...], e.g. 'delete_*=mcp:admin'"),
        ("=mcp:admin", "--tool-scope '=mcp:admin': expected PATTERN=SCOPE"),
        ("delete_*=", "--tool-scope 'delete_*=': expected PATTERN=SCOPE"),
        ("delete_*=a,,b", "--tool-scope 'delete_*=a,,b': an empty scope; separate scopes with single commas"),
        ("delete_*=mcp admin", "--tool-scope 'delete_*': 'mcp admin' is not a scope"),
    ],
)
def test_a_bad_tool_scope_option_is_a_config_error_naming_it_and_the_fix(item: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        from_command_line("--tool-scope", item)
    assert str(caught.value).startswith(message)


def server_file(tmp_path: Path, tool_scopes: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(
        f'[servers.a]\ncommand = ["x"]\ntool_scopes = {tool_scopes}\n'
        '[[servers.a.listeners]]\nkind = "http"\naddress = "127.0.0.1:7302"\npath = "/mcp"\n'
    )
    return path


def test_a_servers_tool_scopes_table_in_the_file_becomes_its_policy_and_check_config_shows_it(
    tmp_path: Path,
) -> None:
    configs = serve_configs(
        read(str(server_file(tmp_path, '{ "delete_*" = ["mcp:admin"], "*" = ["mcp:use"] }')))
    )
    scopes = configs["a"].tool_scopes
    assert [rule.pattern for rule in scopes.rules] == ["delete_*", "*"]
    assert scopes.required("delete_user") == {"mcp:admin", "mcp:use"}
    assert describe(configs) == [
        "a: x on http://127.0.0.1:7302/mcp (auto); tools delete_* need mcp:admin; tools * need mcp:use"
    ]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('{ "delete_*" = "mcp:admin" }', "servers.a.tool_scopes.delete_*: expected a list"),
        ('{ "delete_*" = [] }', "servers.a.tool_scopes.delete_*: expected at least one scope"),
        ('{ "delete_*" = ["mcp admin"] }', "servers.a.tool_scopes.delete_*: 'mcp admin' is not a scope"),
        ('{ "delete_*" = [1] }', "servers.a.tool_scopes.delete_*[0]: expected a string"),
        ('{ "" = ["a"] }', "servers.a.tool_scopes: a tool name pattern is empty"),
    ],
)
def test_a_bad_tool_scopes_table_is_refused_naming_the_field_and_the_fix(
    tmp_path: Path, table: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        serve_configs(read(str(server_file(tmp_path, table))))
    assert message in str(caught.value)


def test_tool_scope_beside_config_is_refused_since_the_file_says_it_per_server(tmp_path: Path) -> None:
    path = server_file(tmp_path, '{ "delete_*" = ["mcp:admin"] }')
    options = serve_parser().parse_args(["--config", str(path), "--tool-scope", "x=y"])
    with pytest.raises(ConfigError, match="--tool-scope: with --config, set this in the file"):
        servers_to_run(options, [])


async def test_the_bridge_started_with_tool_scope_hides_and_refuses_the_tool_for_a_unix_client(
    sock_dir: Path,
) -> None:
    address = f"unix:{sock_dir}/s.sock"
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--listen",
            address,
            "--tool-scope",
            "spawn_*=mcp:admin",
            "--",
            sys.executable,
            str(EXAMPLE_SERVER),
        ) as bridge:
            client = await LineClient.open(address)
            await client.send(request(1, "tools/list"))
            names = [tool["name"] for tool in (await client.receive())["result"]["tools"]]
            assert "echo" in names and "spawn_grandchild" not in names
            refusal = await client.call(2, "spawn_grandchild")
            assert refusal["error"]["code"] == -31005
            await client.aclose()
    # The refusal is logged at INFO, naming the tool and the scope, with no traceback.
    assert any("'spawn_grandchild' refused: needs scope mcp:admin" in line for line in bridge.stderr_lines)
    assert not any("Traceback" in line for line in bridge.stderr_lines)
