"""The systemd unit files under ``systemd/`` are valid (``systemd-analyze verify``), hardened
(``systemd-analyze security``), and agree with the daemon's own timeouts."""

from __future__ import annotations

import configparser
import re
import shutil
import sys
from pathlib import Path

import pytest
import trio

from bridge import ChildSpec, Limits, ServeConfig, stop_budget

from conftest import REPO

TIMEOUT = 60
UNITS = REPO / "systemd"
SERVICES = ["mcp-bridge@.service", "mcp-bridge.service"]
# systemd-analyze security's scale: 0 to 10, lower is better; "OK" ends at 4.9 (systemd 252).
MAX_EXPOSURE = 2.0

needs_systemd_analyze = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="needs systemd-analyze (Debian package systemd)"
)


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read(UNITS / name)
    return parser


def installed_units(directory: Path) -> list[str]:
    """The units as an instance named ``test``, with ExecStart pointing at this venv's command."""
    command = Path(sys.executable).with_name("mcp-bridge")  # installed by pip install -e .
    if not command.exists():
        command = Path(sys.executable)  # verify checks only that ExecStart is executable
    names = []
    for source in UNITS.iterdir():
        target = source.name.replace("@.", "@test.")
        text = source.read_text().replace("/usr/local/bin/mcp-bridge", str(command))
        (directory / target).write_text(text)
        names.append(f"./{target}")
    return sorted(names)


@needs_systemd_analyze
async def test_the_unit_files_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    names = installed_units(tmp_path)
    with trio.fail_after(TIMEOUT):
        result = await trio.run_process(
            ["systemd-analyze", "verify", "--man=no", *names],
            cwd=tmp_path,
            check=False,
            capture_stdout=True,
            capture_stderr=True,
        )
    output = (result.stdout + result.stderr).decode()
    assert result.returncode == 0, output
    assert not [line for line in output.splitlines() if "mcp-bridge" in line], output


@needs_systemd_analyze
@pytest.mark.parametrize("service", ["mcp-bridge@test.service", "mcp-bridge.service"])
async def test_the_services_score_as_well_hardened(tmp_path: Path, service: str) -> None:
    installed_units(tmp_path)
    with trio.fail_after(TIMEOUT):
        result = await trio.run_process(
            ["systemd-analyze", "security", "--offline=yes", f"./{service}"],
            cwd=tmp_path,
            check=False,
            capture_stdout=True,
            capture_stderr=True,
        )
    output = result.stdout.decode()
    score = re.search(r"Overall exposure level for \S+: (\d+\.\d)", output)
    assert score is not None, output + result.stderr.decode()
    assert float(score.group(1)) <= MAX_EXPOSURE, output


@pytest.mark.parametrize("name", SERVICES)
def test_the_services_let_the_bridge_stop_its_child_in_time(name: str) -> None:
    service = unit(name)["Service"]
    assert service["Type"] == "notify"
    assert service["KillMode"] == "mixed"  # systemd signals the bridge; the bridge stops the child
    assert service["Restart"] == "on-failure"
    budget = stop_budget(ServeConfig(listen=[], child=ChildSpec(argv=["x"]), limits=Limits()))
    assert int(service["TimeoutStopSec"]) > budget
    assert int(service["WatchdogSec"]) > 0


def test_the_socket_is_not_world_accessible_and_is_named_for_fd_listen() -> None:
    socket = unit("mcp-bridge@.socket")["Socket"]
    assert socket["SocketMode"] == "0660"
    assert socket["FileDescriptorName"] == "mcp"
    assert "--config /etc/mcp-bridge/%i.toml" in unit("mcp-bridge@.service")["Service"]["ExecStart"]


def test_no_unit_hands_the_child_a_shell() -> None:
    for name in SERVICES:
        assert "sh -c" not in unit(name)["Service"]["ExecStart"]
