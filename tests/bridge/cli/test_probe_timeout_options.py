"""``--probe-timeout`` and the file's ``probe_timeout``: how long ``--child auto``'s era probe waits.

The values reach the ServeConfig; every bad one is refused with an error naming its option or
field; and the command, run for real over a child slower to start than the probe waits, serves it
one child per connection and warns, naming the option.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from bridge._cli.config import read, serve_configs
from bridge._cli.describe import describe
from bridge._cli.serve_parser import serve_parser
from bridge._daemon.config import PROBE_TIMEOUT
from bridge._errors import ConfigError

from cli_options import LISTEN, serve_config, server_file
from conftest import LineClient, bridge_process, example_server, result_text

TIMEOUT = 30


def test_probe_timeout_on_the_command_line_reaches_the_serve_config() -> None:
    assert serve_config("--probe-timeout", "20s").probe_timeout == 20
    assert serve_config("--child", "auto", "--probe-timeout", "1500ms").probe_timeout == 1.5
    assert serve_config().probe_timeout == PROBE_TIMEOUT == 5


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (("--child", "shared", "--probe-timeout", "10s"), "--probe-timeout: only with --child auto"),
        (("--child", "per-connection", "--probe-timeout", "10s"), "--probe-timeout: only with --child auto"),
        (("--probe-timeout", "0"), "--probe-timeout: expected a positive duration such as 10s, not 0"),
    ],
)
def test_a_probe_timeout_that_cannot_work_on_the_command_line_is_refused_naming_the_option(
    flags: tuple[str, ...], fragment: str
) -> None:
    with pytest.raises(ConfigError, match=fragment):
        serve_config(*flags)


def test_a_malformed_probe_timeout_is_a_usage_error_naming_the_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        serve_parser().parse_args([*LISTEN, "--probe-timeout", "a while"])
    assert exit_info.value.code == 2 and "--probe-timeout" in capsys.readouterr().err


def test_probe_timeout_in_the_file_reaches_the_serve_config(tmp_path: Path) -> None:
    path = server_file(tmp_path / "c.toml", 'probe_timeout = "20s"\n')
    assert serve_configs(read(str(path)))["a"].probe_timeout == 20
    path = server_file(tmp_path / "d.toml", 'child = "auto"\nprobe_timeout = "1m"\n')
    assert serve_configs(read(str(path)))["a"].probe_timeout == 60
    path = server_file(tmp_path / "e.toml", "")
    assert serve_configs(read(str(path)))["a"].probe_timeout == PROBE_TIMEOUT


def test_check_config_shows_a_probe_timeout_that_is_not_the_default(tmp_path: Path) -> None:
    configs = serve_configs(read(str(server_file(tmp_path / "c.toml", 'probe_timeout = "20s"\n'))))
    assert describe(configs) == ["a: x on unix:/x (auto); era probe waits 20s"]
    configs = serve_configs(read(str(server_file(tmp_path / "d.toml", ""))))
    assert describe(configs) == ["a: x on unix:/x (auto)"]


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ('child = "shared"\nprobe_timeout = "10s"\n', 'servers.a.probe_timeout: only with child = "auto"'),
        (
            'child = "per-connection"\nprobe_timeout = "10s"\n',
            'servers.a.probe_timeout: only with child = "auto"',
        ),
        ('probe_timeout = "a while"\n', "servers.a.probe_timeout: expected a duration"),
        ('probe_timeout = "0s"\n', "servers.a.probe_timeout: expected a positive duration such as 10s"),
        ("probe_timeout = 10\n", "servers.a.probe_timeout: expected a string"),
        ('probe_timout = "10s"\n', "servers.a: unknown keys"),
    ],
)
def test_a_bad_probe_timeout_in_the_file_is_refused_naming_the_field(
    tmp_path: Path, extra: str, fragment: str
) -> None:
    path = server_file(tmp_path / "c.toml", extra)
    with pytest.raises(ConfigError, match=fragment):
        serve_configs(read(str(path)))


async def test_the_command_with_a_probe_timeout_shorter_than_the_childs_start_warns_naming_the_option(
    sock_dir: Path,
) -> None:
    # The child reads its stdin half a second after it was started: the probe's 50 ms run out first,
    # however loaded the machine.
    slow = ("sh", "-c", 'sleep 0.5 && exec "$@"', "sh", *example_server())
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--listen", f"unix:{sock_dir}/s.sock", "--probe-timeout", "50ms", "--", *slow
        ) as bridge:
            # Probed before the listener accepts (--start eager): the line is there already.
            [warning] = [line for line in bridge.stderr_lines if "child mode " in line]
            assert "WARNING" in warning
            assert "no answer to server/discover within 0.05s" in warning
            assert "raise --probe-timeout" in warning and "or set --child shared" in warning
            client = await LineClient.open(bridge.addresses[0])
            assert result_text(await client.call(1, "echo", text="served")) == "served"
            await client.aclose()
