"""An event stream goes out in as few writes as it has moments: its head with its first events
(the priming event, the legacy ``endpoint`` event), its last events with its end.

Each write is a system call and, with ``TCP_NODELAY``, a segment of its own: a client waiting for
a stream's start or end gets it whole at once. Real sockets (a socket pair); the writes to the
server's socket are recorded as they pass ``os.write``.
"""

from __future__ import annotations

import os

import pytest
import trio
import trio.testing

from channels._http.server.response import StreamStyle, write_response
from channels._http.server.stream import ResponseStream

from socketpairs import connection_pair, read_all

TIMEOUT = 10
NOTIFICATION = (
    b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}'
)
REPLY = b'{"jsonrpc":"2.0","id":3,"result":{}}'


async def test_an_event_streams_head_goes_with_its_first_events_and_its_last_events_with_its_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    connection, client = connection_pair()
    server = connection.stream.socket
    writes: list[bytes] = []
    real_write = os.write

    def recording(fd: int, data: bytes) -> int:
        sent = real_write(fd, data)
        if fd == server.fileno():
            writes.append(bytes(data[:sent]))
        return sent

    monkeypatch.setattr(os, "write", recording)
    stream = ResponseStream("4", finals=1)
    style = StreamStyle(json_allowed=False, priming=True, retry_ms=1000)
    result: list[bool] = []

    async def respond() -> None:
        result.append(await write_response(connection, stream, style))

    with client, trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(respond)
            await trio.testing.wait_all_tasks_blocked()
            assert len(writes) == 1  # the head and the priming event
            assert writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
            assert writes[0].endswith(b"\r\n\r\n1c\r\nretry: 1000\nid: 4/0\ndata: \n\n\r\n")
            stream.put(NOTIFICATION)
            await trio.testing.wait_all_tasks_blocked()
            assert len(writes) == 2 and writes[1].endswith(b"data: " + NOTIFICATION + b"\n\n\r\n")
            stream.put(REPLY, final=True)
        assert result == [True]
        assert len(writes) == 3  # the reply and the end of the body
        assert writes[2].endswith(b"\nid: 4/2\ndata: " + REPLY + b"\n\n\r\n0\r\n\r\n")
        assert connection.reusable  # the response is complete: the next request may follow
        wire = read_all(client)
        await connection.aclose()
    assert wire == b"".join(writes) and wire.count(b"0\r\n\r\n") == 1
