"""A connection the listeners accepted, served or refused by :class:`Connections` alone.

Real sockets (a Unix socket pair), the handler built as the daemon builds it, no listener: so a
connection can be handed over at a moment a listener only reaches in a race.
"""

from __future__ import annotations

import logging

import pytest
import trio

from bridge import ChildSpec, ServeConfig
from bridge._daemon.connection import Connections
from bridge._daemon.statistics import Counters
from bridge._daemon.usage import Usage
from channels import PeerInfo, StreamChannel, StreamIncoming

from conftest import call, example_server

TIMEOUT = 10
PEER = PeerInfo("unix", "a socket pair")


async def no_child() -> None:
    raise AssertionError("a refused connection must start no child")


def connections(stopping: trio.Event) -> tuple[Connections, Counters]:
    config = ServeConfig(listen=["unix:/unused.sock"], child=ChildSpec(argv=list(example_server())))
    counters = Counters()
    handler = Connections(
        config,
        counters,
        stopping,
        trio.Event(),
        ensure_started=no_child,
        pool=lambda: None,
        usage=Usage(),
        tap=None,
        request_metrics=None,
        stop=lambda: None,
    )
    return handler, counters


async def test_a_connection_whose_task_runs_after_a_stop_began_is_told_shutting_down_not_too_many(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Accepted just before SIGTERM, its task ran just after: the stop, not the cap, refused it.
    caplog.set_level(logging.INFO, "bridge.daemon")
    stopping = trio.Event()
    stopping.set()
    handler, counters = connections(stopping)
    ours, theirs = trio.socket.socketpair()
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            incoming = StreamIncoming(trio.SocketStream(ours), PEER, max_message_bytes=1 << 20)
            nursery.start_soon(handler.handle, incoming)
            async with StreamChannel(trio.SocketStream(theirs)) as client:
                await client.send(call(3, "echo", text="just in time?"))
                reply = await client.receive()
                with pytest.raises(trio.EndOfChannel):
                    await client.receive()
    assert reply["id"] == 3 and reply["error"]["code"] == -32000, reply
    assert reply["error"]["data"]["reason"] == "shutting-down"
    assert counters.connections_refused == 1 and counters.connections == 0
    [record] = [r for r in caplog.records if "refused" in r.getMessage()]
    assert record.levelno == logging.INFO and "stopping" in record.getMessage()
