"""``--idle-timeout`` and ``--tcp-keepalive``: on the command line and in the configuration file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bridge._cli.config import read, serve_configs
from bridge._cli.serve import build_serve_config
from bridge._cli.serve_parser import serve_parser
from bridge._errors import ConfigError
from channels import ListenOptions, TcpKeepalive

COMMAND = [sys.executable]


def test_the_idle_timeout_and_tcp_keepalive_on_the_command_line_reach_the_listen_options() -> None:
    argv = ["--listen", "tcp:127.0.0.1:0", "--idle-timeout", "90s", "--tcp-keepalive", "60,10,5"]
    options = build_serve_config(serve_parser().parse_args(argv), COMMAND).listen_options
    assert options.idle_timeout == 90
    assert options.tcp_keepalive == TcpKeepalive(60, 10, 5)
    off = ["--listen", "tcp:127.0.0.1:0", "--idle-timeout", "0", "--tcp-keepalive", "off"]
    options = build_serve_config(serve_parser().parse_args(off), COMMAND).listen_options
    assert options.idle_timeout_for(3600) is None and options.tcp_keepalive is None
    default = build_serve_config(serve_parser().parse_args(argv[:2]), COMMAND).listen_options
    assert default.idle_timeout is None and default.tcp_keepalive == ListenOptions().tcp_keepalive


def test_a_bad_tcp_keepalive_on_the_command_line_is_a_usage_error_saying_what_is_expected(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        serve_parser().parse_args(["--listen", "tcp:127.0.0.1:0", "--tcp-keepalive", "300"])
    assert exited.value.code == 2
    assert "--tcp-keepalive" in capsys.readouterr().err


def write(directory: Path, limits: str) -> Path:
    config = directory / "bridge.toml"
    config.write_text(
        '[servers.a]\ncommand = ["x"]\n[[servers.a.listeners]]\nkind = "tcp"\naddress = "127.0.0.1:0"\n'
        f"[servers.a.limits]\n{limits}"
    )
    return config


def test_the_idle_timeout_and_tcp_keepalive_in_the_configuration_file_reach_the_listen_options(
    tmp_path: Path,
) -> None:
    config = write(tmp_path, 'idle_timeout = "10m"\ntcp_keepalive = "120,30,4"\n')
    options = serve_configs(read(str(config)))["a"].listener_options[0]
    assert options.idle_timeout == 600 and options.tcp_keepalive == TcpKeepalive(120, 30, 4)
    config = write(tmp_path, 'tcp_keepalive = "off"\n')
    assert serve_configs(read(str(config)))["a"].listener_options[0].tcp_keepalive is None


@pytest.mark.parametrize(
    ("limits", "field"),
    [
        ('idle_timeout = "for ever"\n', "servers.a.limits.idle_timeout"),
        ('tcp_keepalive = "1,2"\n', "servers.a.limits.tcp_keepalive"),
    ],
)
def test_a_bad_idle_timeout_or_tcp_keepalive_in_the_file_names_the_field(
    tmp_path: Path, limits: str, field: str
) -> None:
    with pytest.raises(ConfigError, match=field):
        serve_configs(read(str(write(tmp_path, limits))))
