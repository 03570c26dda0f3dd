"""A legacy session's response, answered by the task that routes its answer, waits for its client's next bytes.

``StreamStyle(park=True)`` (``response.park``): the response's task waits on its socket rather than
on the stream, so that it wakes once per request, at the client's next request, not once for the
answer and again for that request. Anything else that comes for the stream must still wake it at
once: an answer not written whole, a message before the answer, the deadline, a graceful stop; and
a connection that closes after its answer is not left waiting. Real sockets (a socket pair); no
bridge.
"""

from __future__ import annotations

import socket

import trio
import trio.testing

from channels import ListenOptions
from channels._core.ticker import Ticker
from channels._http.server.backlog import Backlog
from channels._http.server.conn import HttpConnection
from channels._http.server.front import HttpFront
from channels._http.server.response import StreamStyle, write_response
from channels._http.server.stream import ResponseStream

from socketpairs import connection_pair, read_all

TIMEOUT = 10
HEADERS = ((b"mcp-session-id", b"0123"),)
ANSWER = b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}]}}'
NEXT = b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 2\r\n\r\n{}"


class Parked:
    """A response writing ``stream`` in the background, parked as a legacy session's are."""

    def __init__(self, connection: HttpConnection, ticker: Ticker | None = None) -> None:
        self.connection = connection
        self.backlog = Backlog()
        self.stream = ResponseStream("1", finals=1, backlog=self.backlog)
        self.style = StreamStyle(extra_headers=HEADERS, ticker=ticker or Ticker(), answer_now=True, park=True)
        self.result: list[bool] = []

    async def respond(self) -> None:
        self.result.append(await write_response(self.connection, self.stream, self.style))


async def _parked_and_answered(nursery: trio.Nursery, parked: Parked, client: socket.socket) -> bytes:
    """Start the response, queue the answer once it waits; what the answer put on the wire."""
    nursery.start_soon(parked.respond)
    await trio.testing.wait_all_tasks_blocked()
    assert parked.stream.watching is not None  # parked on the socket, not the stream
    parked.stream.put(ANSWER, final=True)
    return read_all(client)


async def test_a_parked_response_answered_at_once_wakes_only_at_its_clients_next_request() -> None:
    connection, client = connection_pair()
    parked = Parked(connection)
    with client, trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            wire = await _parked_and_answered(nursery, parked, client)
            assert wire.startswith(b"HTTP/1.1 200 OK\r\n") and wire.endswith(b"\r\n\r\n" + ANSWER)
            await trio.testing.wait_all_tasks_blocked()
            assert parked.result == [] and parked.stream.answered  # not woken by its answer
            assert parked.stream.unwritten == 1 and parked.backlog.unwritten == len(ANSWER)
            client.send(NEXT)
        assert parked.result == [True] and parked.stream.unwritten == 0 and parked.backlog.unwritten == 0
        assert parked.stream.watching is None and parked.stream.answer_now is None
        request = await connection.next_request(first=False)  # the bytes it read are kept for it
        assert request is not None and request.method == "POST" and request.body == b"{}"
        await connection.aclose()


async def test_a_parked_response_whose_client_closes_after_its_answer_completes() -> None:
    connection, client = connection_pair()
    parked = Parked(connection)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            with client:
                assert (await _parked_and_answered(nursery, parked, client)).endswith(ANSWER)
        assert parked.result == [True]
        assert await connection.next_request(first=False) is None
        await connection.aclose()


async def test_a_parked_response_whose_client_leaves_before_its_answer_is_abandoned() -> None:
    connection, client = connection_pair()
    parked = Parked(connection)
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(parked.respond)
            await trio.testing.wait_all_tasks_blocked()
            client.close()
        assert parked.result == [False] and parked.stream.abandoned
        await connection.aclose()


async def test_an_answer_the_kernel_does_not_take_at_once_wakes_its_parked_response_which_writes_the_rest() -> (
    None
):
    connection, client = connection_pair(buffer=4096)
    parked = Parked(connection)
    body = b'{"jsonrpc":"2.0","id":8,"result":"' + b"x" * 60_000 + b'"}'
    with client, trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(parked.respond)
            await trio.testing.wait_all_tasks_blocked()
            parked.stream.put(body, final=True)
            assert not parked.stream.answered and parked.stream.watching is None  # woken
            wire = read_all(client)
            while not parked.result:
                await trio.testing.wait_all_tasks_blocked()
                wire += read_all(client)
            wire += read_all(client)
        assert parked.result == [True] and wire.endswith(b"\r\n\r\n" + body)
        client.send(NEXT)  # the socket, whose wait was ended, is waited on again as usual
        request = await connection.next_request(first=False)
        assert request is not None and request.body == b"{}"
        await connection.aclose()


async def test_a_message_before_the_answer_wakes_a_parked_response_into_an_event_stream() -> None:
    connection, client = connection_pair()
    parked = Parked(connection)
    progress = (
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}'
    )
    with client, trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(parked.respond)
            await trio.testing.wait_all_tasks_blocked()
            parked.stream.put(progress)
            await trio.testing.wait_all_tasks_blocked()
            parked.stream.put(ANSWER, final=True)
        wire = read_all(client)
        await connection.aclose()
    assert parked.result == [True]
    assert b"content-type: text/event-stream\r\n" in wire
    assert b"data: " + progress in wire and b"data: " + ANSWER in wire


async def test_the_deadline_of_a_parked_answered_response_ends_its_wait_without_the_client() -> None:
    connection, client = connection_pair()
    parked = Parked(connection)
    with client, trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await _parked_and_answered(nursery, parked, client)
            await trio.testing.wait_all_tasks_blocked()
            assert parked.result == []
            parked.stream.expire()  # what the ticker does once its quick wait passed
        assert parked.result == [True] and parked.stream.unwritten == 0
        await connection.aclose()


async def test_an_answer_on_a_connection_that_closes_after_it_does_not_park() -> None:
    connection, client = connection_pair()
    connection.closing = True  # the server stops: "connection: close", the connection ends after it
    parked = Parked(connection)
    with client, trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            wire = await _parked_and_answered(nursery, parked, client)
            assert b"connection: close\r\n" in wire and not parked.stream.answered  # woken at once
        assert parked.result == [True]
        await connection.aclose()


async def test_a_graceful_stop_ends_the_wait_of_a_parked_answered_response() -> None:
    front = HttpFront(ListenOptions())
    connection, client = connection_pair()
    parked = Parked(connection, front.ticker)
    with client, trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await _parked_and_answered(nursery, parked, client)
            await trio.testing.wait_all_tasks_blocked()
            assert parked.result == []
            front.stop()  # as an idle keep-alive connection's read is ended
        assert parked.result == [True]
        await connection.aclose()


async def test_a_response_parked_before_its_answer_when_the_server_stops_answers_unparked() -> None:
    front = HttpFront(ListenOptions())
    connection, client = connection_pair()
    parked = Parked(connection, front.ticker)
    with client, trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(parked.respond)
            await trio.testing.wait_all_tasks_blocked()
            front.stop()
            await trio.testing.wait_all_tasks_blocked()
            assert parked.stream.watching is None and parked.result == []  # waits for its answer
            parked.stream.put(ANSWER, final=True)
        assert parked.result == [True] and read_all(client).endswith(ANSWER)
        await connection.aclose()
