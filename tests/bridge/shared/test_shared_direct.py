"""A client whose channel queues without waiting (a 2026-07-28 HTTP request) needs no writer task.

Its messages go onto its channel as they are routed, and what waits there is bounded exactly as a
writer's queue is: the same message that overflows one overflows the other, with the same ending.
Pure routing, no I/O: the channels here only record what they are given.
"""

from __future__ import annotations

from typing import Any, cast

import attrs
import pytest
import trio
import trio.testing

from bridge._child.process import ChildSpec
from bridge._limits import Limits
from bridge._shared.clients import Client, Clients, direct_channel
from bridge._shared.mux import SharedChild
from bridge._shared.router import Router
from channels import JSONObject, PeerInfo


@attrs.define
class _Recorder:
    """A channel that queues without waiting and never writes (its client reads nothing)."""

    peer: PeerInfo = attrs.field(factory=lambda: PeerInfo("memory", "direct"))
    queued: list[JSONObject] = attrs.field(factory=list)
    closed: bool = False

    @property
    def waiting(self) -> tuple[int, int]:
        return len(self.queued), 100 * len(self.queued)

    def send_nowait(self, message: JSONObject) -> None:
        if self.closed:
            raise trio.ClosedResourceError
        self.queued.append(message)


@attrs.define
class _Plain:
    """A channel with no ``send_nowait``: its client gets a queue and a writer."""

    peer: PeerInfo = attrs.field(factory=lambda: PeerInfo("memory", "plain"))


def _clients(limits: Limits, *channels: Any) -> tuple[Clients, list[Client]]:
    router = Router(8)
    clients = Clients(limits, router)
    made = []
    for key, channel in enumerate(channels):
        client = Client(key, channel, direct_channel(channel))
        clients.by_key[key] = client
        router.attach(key)
        made.append(client)
    return clients, made


def _note(n: int) -> JSONObject:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": 1, "progress": n},
    }


def test_a_direct_client_gets_its_messages_on_its_channel_at_once_and_in_order() -> None:
    clients, (client,) = _clients(Limits(), _Recorder())
    assert client.direct is not None
    client.changed = trio.Event()  # as a task waiting in wait_changed makes it
    for n in range(3):
        clients.deliver(client.key, _note(n), 100)
    assert client.channel.queued == [_note(0), _note(1), _note(2)]  # type: ignore[attr-defined]
    assert not client.unsent  # nothing for a writer: none runs
    assert client.changed.is_set()


def test_a_direct_client_nobody_waits_on_makes_no_event() -> None:
    clients, (client,) = _clients(Limits(), _Recorder())
    clients.deliver(client.key, _note(0), 100)
    assert client.wake is None  # no writer to wake
    assert client.changed is None  # no drain waited: nothing to set


async def test_a_change_wakes_a_task_already_waiting_for_it() -> None:
    clients, (client,) = _clients(Limits(), _Recorder())
    woken = []

    async def waiter() -> None:
        await client.wait_changed()
        woken.append(True)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            clients.deliver(client.key, _note(0), 100)
    assert woken == [True]


def test_a_direct_client_overflows_at_the_same_message_as_a_client_with_a_writer_and_ends_alike() -> None:
    limits = Limits(client_queue=3)
    clients, (direct, plain) = _clients(limits, _Recorder(), _Plain())
    assert plain.direct is None
    for n in range(limits.client_queue + 1):
        assert (direct.ending, plain.ending) == (None, None)
        clients.deliver(direct.key, _note(n), 100)
        clients.deliver(plain.key, _note(n), 100)
    assert direct.ending == plain.ending == "client-too-slow"
    assert direct.scope.cancel_called and plain.scope.cancel_called


def test_a_direct_client_whose_channel_is_closed_is_dropped_as_disconnected() -> None:
    channel = _Recorder(closed=True)
    clients, (client,) = _clients(Limits(), channel)
    clients.deliver(client.key, _note(0), 100)
    assert client.ending == "client-disconnected"


async def test_a_shared_client_stopped_before_anything_entered_its_scope_is_cancelled_once_something_does() -> (
    None
):
    client = Client(1, cast(Any, None))
    client.stop()
    with trio.fail_after(5):
        with client.scope:
            await trio.sleep_forever()
    assert client.scope.cancelled_caught


@attrs.define
class _FailingExchange:
    """A 2026-07-28 request's channel whose receive fails unexpectedly (a bug's stand-in)."""

    peer: PeerInfo = attrs.field(factory=lambda: PeerInfo("memory", "exchange"))
    send_timeout: float | None = None
    ended: bool = False
    responded_after_end: list[bool] = attrs.field(factory=list)

    @property
    def waiting(self) -> tuple[int, int]:
        return 0, 0

    def send_nowait(self, message: JSONObject) -> None:
        raise AssertionError("nothing is routed to it")

    def end(self) -> None:
        self.ended = True

    async def receive(self) -> JSONObject:
        raise RuntimeError("receive failed")

    async def respond(self) -> bool:
        self.responded_after_end.append(self.ended)
        return True


async def test_an_exchange_whose_serving_fails_is_still_responded_to_once_after_its_channel_ended() -> None:
    shared = SharedChild(ChildSpec(argv=["true"]), Limits(), trio.Event())
    channel = _FailingExchange()
    with trio.fail_after(5):
        with pytest.raises(RuntimeError, match="receive failed"):
            await shared.serve_exchange(cast(Any, channel), channel.respond)
    assert channel.responded_after_end == [True]  # once, and the response ends with what it had
    assert shared.clients == 0
