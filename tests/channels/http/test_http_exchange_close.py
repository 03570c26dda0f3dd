"""A 2026-07-28 request's channel (:class:`ExchangeChannel`) when the bridge closes it."""

from __future__ import annotations

import pytest
import trio

from channels import PeerInfo
from channels._http.server.exchange import ExchangeChannel

REQUEST = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}


def _exchange() -> ExchangeChannel:
    return ExchangeChannel(dict(REQUEST), PeerInfo("http", "127.0.0.1:1"), lambda reply: 200)


async def test_a_closed_exchange_ends_its_response_and_refuses_to_be_used_again() -> None:
    exchange = _exchange()
    with trio.fail_after(5):
        assert await exchange.receive() == REQUEST
        await exchange.aclose()
        await exchange.aclose()  # the bridge closes it, then its establish block does
        assert exchange.stream.ended
        with pytest.raises(trio.ClosedResourceError):
            await exchange.receive()
        with pytest.raises(trio.ClosedResourceError):
            exchange.send_nowait({"jsonrpc": "2.0", "id": 7, "result": {}})


async def test_an_exchange_closed_in_a_cancelled_scope_is_closed_all_the_same() -> None:
    exchange = _exchange()
    with trio.fail_after(5):
        with trio.CancelScope() as scope:
            scope.cancel()
            await exchange.aclose()
        assert scope.cancelled_caught
        assert exchange.closed and exchange.stream.ended
