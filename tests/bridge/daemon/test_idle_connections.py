"""The daemon ends each idle connection relayed to a child of its own (``--idle-timeout``,
bridge/_relay/idle.py): real children, real TCP sockets."""

from __future__ import annotations

import trio

from channels import ListenOptions

from conftest import LineClient, example_server, poll, result_text, running_bridge

TIMEOUT = 20
IDLE_TIMEOUT = 0.5  # seconds of real time: short, so the test is too


async def test_a_daemons_idle_tcp_connections_are_each_ended_and_their_children_stopped() -> None:
    options = ListenOptions(idle_timeout=IDLE_TIMEOUT)
    async with running_bridge(example_server(), ["tcp:127.0.0.1:0"], listen_options=options) as daemon:
        with trio.fail_after(TIMEOUT):
            clients = [await LineClient.open(daemon.addresses[0]) for _ in range(3)]
            assert result_text(await clients[0].call(1, "echo", text="once")) == "once"
            for client in clients:
                assert await client.receive_until_eof() == []  # ended without another word
                await client.aclose()
            await poll(lambda: daemon.statistics().connections == 0)
            assert daemon.statistics().children == 0
