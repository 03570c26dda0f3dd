"""The embedding API: ``open_bridge`` runs a bridge for a block and stops it gracefully however the
block ends; configuration accepts plain strings and lists."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import trio
import trio.testing

import channels
from bridge import ChildSpec, Daemon, RestartPolicy, ServeConfig, open_bridge

from conftest import call, example_server, poll, process_exists, result_text, wait_until_gone

TIMEOUT = 20


def config(*listen: str) -> ServeConfig:
    return ServeConfig(
        listen=list(listen), child=ChildSpec(argv=list(example_server())), child_mode="per-connection"
    )


async def test_open_bridge_yields_once_listening_with_the_bound_addresses(sock_dir: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_bridge(config(f"unix:{sock_dir}/s.sock", "tcp:127.0.0.1:0")) as bridge:
            unix, tcp = bridge.addresses
            assert unix == f"unix:{sock_dir}/s.sock" and not tcp.endswith(":0")
            async with channels.connect(tcp) as channel:
                await channel.send(call(1, "echo", text="up"))
                assert result_text(await channel.receive()) == "up"
                assert bridge.statistics().connections == 1
        assert bridge.stopped
        assert not (sock_dir / "s.sock").exists()


async def test_cancelling_the_block_still_stops_gracefully_finishing_requests_in_flight(
    sock_dir: Path,
) -> None:
    address = f"unix:{sock_dir}/s.sock"
    replies: list[dict] = []
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            ready = trio.Event()
            pids: list[int] = []

            async def client() -> None:
                async with channels.connect(address) as channel:
                    await channel.send(call(1, "echo", text="pid?"))
                    await channel.receive()
                    await channel.send(call(2, "sleep", seconds=0.5))
                    ready.set()
                    replies.append(await channel.receive())

            with trio.CancelScope() as scope:
                async with open_bridge(config(address)) as bridge:
                    nursery.start_soon(client)
                    await ready.wait()
                    await trio.testing.wait_all_tasks_blocked()
                    pids.extend(child.pid for child in bridge._counters.children)
                    scope.cancel()  # the enclosing scope goes away mid-request
                    await trio.sleep_forever()
            assert bridge.stopped
    assert replies and replies[0]["id"] == 2 and result_text(replies[0]) == "slept"
    for pid in pids:
        await wait_until_gone(pid)
        assert not process_exists(pid)


async def test_a_cancelled_daemon_stops_and_reaps_each_connections_child_and_logs_no_error(
    sock_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Cancelled, the daemon skips the drain; each connection still stops its child (shielded) and
    # takes the child's stderr out of the daemon's reader, whose task had already ended.
    caplog.set_level(logging.INFO)
    daemon = Daemon(config(f"unix:{sock_dir}/s.sock"))
    with trio.fail_after(TIMEOUT):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                [address] = await nursery.start(daemon.run)
                async with channels.connect(address) as channel:
                    await channel.send(call(1, "echo", text="up"))
                    assert result_text(await channel.receive()) == "up"
                    pids = [child.pid for child in daemon._counters.children]
                    await channel.send(call(2, "sleep", seconds=30))
                    scope.cancel()
                    await trio.sleep_forever()
        assert daemon.stopped
        assert len(pids) == 1
        await wait_until_gone(pids[0])
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_a_child_spec_without_a_command_is_refused() -> None:
    with pytest.raises(ValueError, match="argv"):
        ChildSpec(argv=[])


def test_a_malformed_address_string_is_refused_when_the_config_is_built() -> None:
    with pytest.raises(channels.AddressError, match="unknown address kind"):
        ServeConfig(listen=["carrier-pigeon:1"], child=ChildSpec(argv=["true"]))


async def test_statistics_count_the_bytes_relayed_and_the_shared_childs_restarts(sock_dir: Path) -> None:
    shared = ServeConfig(
        listen=[f"unix:{sock_dir}/s.sock"],
        child=ChildSpec(argv=[*example_server("--crash-after", "0")]),
        child_mode="shared",
        restart_policy=RestartPolicy(floor=0.01, cap=0.05, crash_limit=3, crash_window=10),
    )
    with trio.fail_after(TIMEOUT):
        async with open_bridge(shared) as bridge:
            async with channels.connect(bridge.addresses[0]) as channel:
                await channel.send(call(1, "echo", text="crashes the child"))
                reply = await channel.receive()
                assert reply["error"]["data"]["reason"] == "child-exited"
                await poll(lambda: bridge.statistics().child_restarts == 1)
                sent = len(channels.encode(call(1, "echo", text="crashes the child")))
                stats = bridge.statistics()
                assert stats.bytes_from_clients == sent
                assert stats.bytes_to_clients == len(channels.encode(reply))
        assert bridge.statistics().bytes_from_clients == sent  # kept after the connection ended


async def test_open_bridge_raises_a_listen_error_itself_not_wrapped_in_a_group(sock_dir: Path) -> None:
    taken = sock_dir / "taken"
    taken.write_text("not a socket")
    with trio.fail_after(TIMEOUT):
        with pytest.raises(channels.ListenError, match="not a socket"):
            async with open_bridge(config(f"unix:{taken}")):
                pytest.fail("the block must not run")  # pragma: no cover


async def test_an_exception_in_the_block_comes_out_as_itself_after_a_graceful_stop(sock_dir: Path) -> None:
    with trio.fail_after(TIMEOUT):
        with pytest.raises(KeyError, match="raised in the block"):
            async with open_bridge(config(f"unix:{sock_dir}/s.sock")) as bridge:
                raise KeyError("raised in the block")
    assert bridge.stopped


@pytest.mark.parametrize(("field", "value"), [("child_mode", "sharded"), ("start", "soon")])
def test_an_unknown_child_mode_or_start_is_refused_when_the_config_is_built(field: str, value: str) -> None:
    with pytest.raises(ValueError, match=field):
        ServeConfig(listen=["unix:/tmp/x.sock"], child=ChildSpec(argv=["true"]), **{field: value})
