"""Shared mode honours a stream listener's idle timeout, as the per-connection relay does.

A silent client of the shared child is disconnected once it has been idle (no traffic either way,
nothing in flight, nothing unsent) for the listener's idle timeout; one waiting for a slow reply is
not; and the shared child, which serves everyone, is never touched. Real sockets, a real child.
"""

from __future__ import annotations

from pathlib import Path

import trio

from channels import ListenOptions

from conftest import LineClient, call, example_server, poll, result_text, running_bridge

TIMEOUT = 20
IDLE = 0.5  # short for a test; long enough that connecting and sending never count as idle


async def test_a_silent_client_of_the_shared_child_is_closed_after_the_idle_timeout_and_the_child_stays(
    sock_dir: Path,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(),
            [f"unix:{sock_dir}/s.sock"],
            child_mode="shared",
            listen_options=ListenOptions(idle_timeout=IDLE),
        ) as daemon:
            silent = await LineClient.open(daemon.addresses[0])
            busy = await LineClient.open(daemon.addresses[0])
            shared = daemon._shared
            await poll(lambda: shared is not None and shared.child is not None)
            assert shared is not None
            child = shared.child
            assert child is not None
            # The busy client waits four idle timeouts for its reply, with no byte either way.
            async with trio.open_nursery() as nursery:
                replies: list[dict[str, object]] = []

                async def wait_for_slow_reply() -> None:
                    replies.append(await busy.call(1, "sleep", seconds=4 * IDLE))

                nursery.start_soon(wait_for_slow_reply)
                assert await silent.receive_until_eof() == []  # closed by the bridge, nothing sent
            assert result_text(replies[0]) == "slept"
            assert await busy.receive_until_eof() == []  # idle once answered: closed too
            assert shared.child is child and child.returncode is None  # the one child served on
            fresh = await LineClient.open(daemon.addresses[0])
            await fresh.send(call(2, "echo", text="still here"))
            assert result_text(await fresh.receive()) == "still here"


async def test_without_an_idle_timeout_a_silent_client_of_the_shared_child_stays_connected(
    sock_dir: Path,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(), [f"unix:{sock_dir}/n.sock"], child_mode="shared"
        ) as daemon:
            client = await LineClient.open(daemon.addresses[0])
            with trio.move_on_after(4 * IDLE):
                await client.receive_until_eof()
                raise AssertionError("the bridge closed a connection that has no idle timeout")
            await client.send(call(1, "echo", text="after a pause"))
            assert result_text(await client.receive()) == "after a pause"
