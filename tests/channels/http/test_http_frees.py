"""What an HTTP connection or a legacy session let go of when they end, freed by reference counts.

A closed connection's parser and head check, and a closed session's ended streams with their kept
events, are in no reference cycle (channels/_http/server/request.py, session.py): otherwise they
would wait for the next full collection, tens of megabytes under a legacy HTTP soak
(bridge/_ops/memory.py). The cycle collector is off while each test runs, so only reference counts
can free them.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from functools import partial

import pytest
import trio
from garbage import cycle_collector_off

from channels import PeerInfo
from channels._http.server.request import BadRequest, Parsing
from channels._http.server.session import SessionChannel

from socketpairs import connection_pair

TIMEOUT = 10


@pytest.fixture
def no_cycle_collector() -> Iterator[None]:
    with cycle_collector_off():
        yield


def passes(parsing: Parsing, *head: object) -> None:
    """A head check that refers to its connection's parsing, as the listener's does (a cycle)."""


@pytest.mark.usefixtures("no_cycle_collector")
async def test_a_closed_connections_parser_and_head_check_are_freed_by_reference_counts() -> None:
    with trio.fail_after(TIMEOUT):
        connection, client = connection_pair()
        with client:
            connection.parsing.check_head = partial(passes, connection.parsing)
            connection.parsing.feed(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert len(connection.parsing.done) == 1
            await connection.aclose()
            freed = weakref.ref(connection.parsing)
            del connection
            assert freed() is None


@pytest.mark.usefixtures("no_cycle_collector")
async def test_a_closed_connection_that_refused_a_malformed_request_is_freed_by_reference_counts() -> None:
    with trio.fail_after(TIMEOUT):
        connection, client = connection_pair()
        with client:
            client.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nNOT HTTP\r\n\r\n")
            assert await connection.next_request(first=True) is not None
            with pytest.raises(BadRequest):  # kept by the parsing while the request before was served
                await connection.next_request(first=False)
            await connection.aclose()
            freed = weakref.ref(connection)
            del connection
            assert freed() is None


@pytest.mark.usefixtures("no_cycle_collector")
async def test_a_closed_connection_that_refused_a_body_over_the_limit_is_freed_by_reference_counts() -> None:
    with trio.fail_after(TIMEOUT):
        connection, client = connection_pair()
        with client:
            connection.parsing.max_body = 16
            client.sendall(
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n" + b"x" * 100
            )
            with pytest.raises(BadRequest) as refused:  # read to its end, then refused
                await connection.next_request(first=True)
            assert refused.value.status == 413
            del refused
            await connection.aclose()
            freed = weakref.ref(connection)
            del connection
            assert freed() is None


@pytest.mark.usefixtures("no_cycle_collector")
async def test_a_closed_session_lets_go_of_its_ended_streams_and_their_kept_events_at_once() -> None:
    with trio.fail_after(TIMEOUT):
        session = SessionChannel("0" * 32, PeerInfo("memory"), event_budget=1 << 20)
        stream = session.open_request_stream([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
        await session.send({"jsonrpc": "2.0", "id": 1, "result": {}})
        stream.attach()
        stream.written(stream.pending()[-1][0])  # written as an event: kept for Last-Event-ID
        stream.detach()
        session.response_done(stream)
        assert stream.kept == 1 and session.budget.used > 0
        await session.aclose()
        freed = weakref.ref(stream)
        del stream
        assert freed() is None  # while the session itself is still held
        assert session.closed


@pytest.mark.usefixtures("no_cycle_collector")
def test_a_request_refused_as_malformed_leaves_no_reference_cycle_behind() -> None:
    parsing = Parsing(1024, None)
    with pytest.raises(BadRequest, match="malformed request"):
        parsing.feed(b"NOT HTTP\r\n\r\n")
    parsing.release()  # the parser's own cycle, which the connection's close breaks
    freed = weakref.ref(parsing)
    del parsing
    assert freed() is None
