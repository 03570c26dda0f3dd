"""What a client had already sent when its connection ended: read it (bounded), answer its requests.

When a connection ends for a reason of the bridge's (its child exited, the bridge is stopping),
the client may have written requests the relay never read: they sit in the socket's buffers, or
are still on the wire. Closing at once would leave them unanswered (docs/design.md §5.1). The
relay therefore reads on, within :data:`UNREAD_BYTES` and :data:`UNREAD_TIME`, until the client
has been quiet for :data:`UNREAD_QUIET`, and answers each request it finds with the connection's
ending error. Only a request written after that (the client has not seen the close yet) can go
unanswered; the client then sees the connection close, which MCP clients report for every
request still pending.

Then the relay closes lingeringly (:func:`linger`), as web servers do (nginx's
``lingering_close``; RFC 9112 §9.6): a socket closed while the client still sends is reset by
Linux, and the reset destroys the replies the client had not read yet, the errors just written
among them. The relay shuts its write side instead (over TLS with ``close_notify``, reading on),
so the client reads every reply and then the end, and reads and drops what the client still sends
until it closes, within :data:`LINGER_TIME` and :data:`LINGER_BYTES`. Requests read then cannot
be answered (the write side is shut): they were written after the end, the window above.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

import trio

from channels import JSONObject, Kind, MessageChannel, ProtocolError, RequestId, kind, receive_batch

from .._errors import error_response
from .ending import Ending
from .writers import BATCH

# How long the client may stay quiet before the connection is taken to hold nothing more it had
# sent: Linux's minimum TCP retransmission timeout (TCP_RTO_MIN, 200 ms), so that a request sent
# before the close whose segment was lost once is still read; on a Unix socket or loopback what
# was sent is already in the buffer.
UNREAD_QUIET = 0.2
# Longest time spent reading after the end, however busy the client: Apache httpd's lingering
# close reads a departing client for up to 2 s (SECONDS_TO_LINGER) before closing.
UNREAD_TIME = 2.0
# Most bytes read after the end: what a client can have sent and the bridge not read fits in the
# socket buffers between them (Linux's defaults: 128 KiB for a TCP receive buffer, tcp_rmem; 208
# KiB for a Unix socket's, net.core.wmem_default); 1 MiB covers both ends with room to spare.
UNREAD_BYTES = 1024 * 1024
# Longest time spent lingering: Apache httpd's lingering close waits 2 s for a read
# (SECONDS_TO_LINGER); a client that reads gets the end and closes well within it (what it has
# left to read fits in the socket buffers), and one that neither reads nor closes is cut off.
LINGER_TIME = 2.0
# Most bytes read and dropped while lingering: as UNREAD_BYTES, what the socket buffers between
# the two ends can hold; a client still sending after that is closed on (and reset).
LINGER_BYTES = UNREAD_BYTES


def ending_error(request_id: RequestId, ending: Ending) -> JSONObject:
    """The bridge's reply to a request that the connection's end left without the child's."""
    return error_response(
        request_id,
        ending.code,
        "Connection closed",
        ending.reason,
        detail=ending.description,
        **ending.data,
    )


async def answer_unread(
    client: MessageChannel,
    read: Iterable[JSONObject | ProtocolError],
    ending: Ending,
    send: Callable[[list[JSONObject]], Awaitable[bool]],
) -> int:
    """Answer the requests in ``read`` (read but never handled), then in what the client sent since.

    Reads ``client`` until it is quiet for :data:`UNREAD_QUIET`, ends its input, fails, or the
    bounds are reached; answers each request with ``ending``'s error through ``send`` (which
    returns False once the client cannot be written to). Notifications, responses and bad
    messages are dropped: the child they were for is gone. Does not close ``client`` (its owner
    does). Returns how many requests were answered.
    """
    answered = 0
    items = list(read)
    start = client.bytes_received
    with trio.move_on_after(UNREAD_TIME):
        while True:
            replies = [
                ending_error(item["id"], ending)
                for item in items
                if not isinstance(item, ProtocolError) and kind(item) is Kind.REQUEST
            ]
            if replies:
                if not await send(replies):
                    break
                answered += len(replies)
            if client.bytes_received - start >= UNREAD_BYTES:
                break
            items = []
            with trio.move_on_after(UNREAD_QUIET):
                try:
                    items = await receive_batch(client, BATCH)
                except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError):
                    break
            if not items:
                break
    return answered


async def linger(client: MessageChannel) -> None:
    """Half-close ``client``, then read and drop what it sends until it closes, within bounds.

    Ends at the client's end of input, after :data:`LINGER_TIME`, or once :data:`LINGER_BYTES`
    were read; returns at once if the channel cannot half-close (WebSocket, whose channel lingers
    the same way after its close frame when closed) or is already broken. A ``tls:`` connection
    half-closes with TLS's ``close_notify``. Does not close ``client`` (its owner does); nothing
    may be sent on it afterwards.
    """
    try:
        await client.send_eof()
    except (NotImplementedError, trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        return
    start = client.bytes_received
    with trio.move_on_after(LINGER_TIME):
        while client.bytes_received - start < LINGER_BYTES:
            try:
                await client.receive()
            except ProtocolError:
                continue  # dropped like the rest
            except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError):
                return
