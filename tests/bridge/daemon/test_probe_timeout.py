"""``child_mode = "auto"`` with a child slower to start than the era probe waits (``probe_timeout``).

Real children and real Unix sockets. The slow child is the example server (both eras) started late
by ``sh -c 'sleep ...'``, as an SDK server starts on a loaded machine. Its delay only ever makes the
probe's answer later, so a probe timeout shorter than the delay times out however loaded the machine
is; the longer one is far past the delay and within the test's own deadline.
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import pytest
import trio

from bridge import ChildSpec, Daemon, ServeConfig

from conftest import LineClient, example_server, result_text, running_bridge

TIMEOUT = 30
DELAY = 0.5  # seconds the slow child sleeps before it reads its stdin
SHORT = 0.05  # a probe timeout the slow child cannot meet: it answers DELAY seconds at the earliest
LONG = 20.0  # a probe timeout past the slow child's start even on a loaded machine (below TIMEOUT)


def slow_to_start() -> tuple[str, ...]:
    """The dual-era example server, reading its stdin only DELAY seconds after it was started."""
    return ("sh", "-c", f'sleep {DELAY} && exec "$@"', "sh", *example_server())


def auto_bridge(sock_dir: Path, probe_timeout: float) -> AbstractAsyncContextManager[Daemon]:
    """A daemon in auto mode over the slow child, started eagerly (probed before it accepts)."""
    return running_bridge(
        slow_to_start(),
        [f"unix:{sock_dir}/s.sock"],
        child_mode="auto",
        probe_timeout=probe_timeout,
        name="slow",
    )


def mode_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.getMessage().startswith("child mode ")]


async def test_a_child_slower_than_the_probe_timeout_is_served_per_connection_with_a_warning_naming_the_option(
    sock_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="bridge")
    with trio.fail_after(TIMEOUT):
        async with auto_bridge(sock_dir, probe_timeout=SHORT) as daemon:
            assert daemon.mode == "per-connection"
            client = await LineClient.open(daemon.addresses[0])
            assert result_text(await client.call(1, "echo", text="late")) == "late"
            await client.aclose()
    [record] = mode_records(caplog)
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert message.startswith("child mode per-connection: no answer to server/discover within 0.05s")
    assert "serving one child per connection" in message
    assert "if this server speaks 2026-07-28, raise --probe-timeout" in message
    assert "probe_timeout in a configuration file" in message and "or set --child shared" in message
    # The warning is the one loud line: the probe itself records its timeout only at debug.
    probe_lines = [record for record in caplog.records if record.name == "bridge.eras"]
    assert [record.levelno for record in probe_lines] == [logging.DEBUG]


async def test_a_longer_probe_timeout_lets_a_slow_dual_era_child_be_shared(
    sock_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="bridge")
    with trio.fail_after(TIMEOUT):
        async with auto_bridge(sock_dir, probe_timeout=LONG) as daemon:
            assert daemon.mode == "shared" and daemon._shared is not None
            clients = [await LineClient.open(daemon.addresses[0]) for _ in range(2)]
            for number, client in enumerate(clients):
                assert result_text(await client.call(number, "echo", text=f"c{number}")) == f"c{number}"
                await client.aclose()
    [record] = mode_records(caplog)
    assert record.levelno == logging.INFO
    assert record.getMessage() == "child mode shared: server/discover answered: supported versions 2026-07-28"
    loud = [record for record in caplog.records if record.levelno >= logging.WARNING]
    assert not [record for record in loud if record.name in ("bridge.daemon", "bridge.eras")]


@pytest.mark.parametrize("value", [0, -1.0])
def test_a_probe_timeout_that_is_not_positive_is_refused_when_the_config_is_built(value: float) -> None:
    with pytest.raises(ValueError, match="probe_timeout"):
        ServeConfig(listen=["unix:/tmp/x.sock"], child=ChildSpec(argv=["x"]), probe_timeout=value)
