"""``--start on-demand`` / ``--idle-stop`` and the file's ``start = "on-demand"`` / ``idle_stop``.

The values reach the ServeConfig; every bad one is refused with an error naming its option or
field; and the command, run for real, reports an idle child on ``/readyz`` as idle, not failed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio
from commands import admin_port, get, http

from bridge._cli.config import read, serve_configs
from bridge._cli.serve_parser import serve_parser
from bridge._daemon.config import IDLE_STOP
from bridge._errors import ConfigError

from cli_options import LISTEN, serve_config, server_file
from conftest import EXAMPLE_SERVER, LineClient, bridge_process, poll, process_exists, result_text

TIMEOUT = 20


def test_start_on_demand_and_idle_stop_on_the_command_line_reach_the_serve_config() -> None:
    config = serve_config("--start", "on-demand", "--idle-stop", "90s")
    assert config.start == "on-demand" and config.idle_stop == 90
    assert serve_config("--start", "on-demand").idle_stop == IDLE_STOP == 600


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (("--idle-stop", "90s"), "--idle-stop: only with --start on-demand"),
        (("--start", "lazy", "--idle-stop", "90s"), "--idle-stop: only with --start on-demand"),
        (("--start", "on-demand", "--idle-stop", "0"), "--idle-stop: expected a positive duration"),
    ],
)
def test_an_idle_stop_that_cannot_work_on_the_command_line_is_refused_naming_the_option(
    flags: tuple[str, ...], fragment: str
) -> None:
    with pytest.raises(ConfigError, match=fragment):
        serve_config(*flags)


@pytest.mark.parametrize(
    "flags", [("--idle-stop", "a while"), ("--start", "sometimes")], ids=["idle-stop", "start"]
)
def test_a_malformed_start_or_idle_stop_is_a_usage_error_naming_the_option(
    flags: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        serve_parser().parse_args([*LISTEN, *flags])
    assert exit_info.value.code == 2 and flags[0] in capsys.readouterr().err


def test_start_on_demand_and_idle_stop_in_the_file_reach_the_serve_config(tmp_path: Path) -> None:
    path = server_file(tmp_path / "c.toml", 'start = "on-demand"\nidle_stop = "15m"\n')
    config = serve_configs(read(str(path)))["a"]
    assert config.start == "on-demand" and config.idle_stop == 900
    path = server_file(tmp_path / "d.toml", 'start = "on-demand"\n')
    assert serve_configs(read(str(path)))["a"].idle_stop == IDLE_STOP


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ('start = "sometimes"\n', 'servers.a.start: expected "eager", "lazy" or "on-demand"'),
        ('idle_stop = "10m"\n', 'servers.a.idle_stop: only with start = "on-demand"'),
        ('start = "on-demand"\nidle_stop = "a while"\n', "servers.a.idle_stop: expected a duration"),
        ('start = "on-demand"\nidle_stop = "0s"\n', "servers.a.idle_stop: expected a positive duration"),
        ('start = "on-demand"\nidle_stop = 600\n', "servers.a.idle_stop"),
    ],
)
def test_a_bad_start_or_idle_stop_in_the_file_is_refused_naming_the_field(
    tmp_path: Path, extra: str, fragment: str
) -> None:
    path = server_file(tmp_path / "c.toml", extra)
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(")):
        serve_configs(read(str(path)))


async def test_the_command_with_start_on_demand_reports_its_idle_child_as_idle_and_ready(
    sock_dir: Path,
) -> None:
    # Real time here: a short --idle-stop, and polling /readyz for the state it leads to.
    with trio.fail_after(TIMEOUT):
        async with bridge_process(
            "--listen",
            f"unix:{sock_dir}/s.sock",
            "--child",
            "shared",
            "--start",
            "on-demand",
            "--idle-stop",
            "300ms",
            "--admin",
            "tcp:127.0.0.1:0",
            "--",
            sys.executable,
            str(EXAMPLE_SERVER),
        ) as bridge:
            await poll(lambda: any("admin endpoint on" in line for line in bridge.stderr_lines))
            port = admin_port(bridge.stderr_lines)
            status, _, ready = await http(port, get("/readyz"))
            assert status == 200 and "idle (not started yet)" in ready
            client = await LineClient.open(bridge.addresses[0])
            assert result_text(await client.call(1, "echo", text="hi")) == "hi"
            status, _, ready = await http(port, get("/readyz"))
            assert status == 200 and "shared child ready, child pid" in ready
            pid = int(ready.split("child pid ")[1].split(",")[0])
            await client.aclose()
            while "idle (stopped on demand)" not in ready:
                status, _, ready = await http(port, get("/readyz"))
                assert status == 200, ready
                await trio.sleep(0.02)  # polling a state, bounded by fail_after
            assert not process_exists(pid)
            _, _, metrics = await http(port, get("/metrics"))
            assert 'mcp_bridge_child_idle_stops_total{server="server"} 1' in metrics
            again = await LineClient.open(bridge.addresses[0])
            assert result_text(await again.call(2, "echo", text="again")) == "again"
            await again.aclose()
