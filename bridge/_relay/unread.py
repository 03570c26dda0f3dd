"""What a client had already sent when its connection ended: read it (bounded), answer its requests.

When a connection ends for a reason of the bridge's (its child exited, the bridge is stopping),
the client may have written requests the relay never read: they sit in the socket's buffers, or
are still on the wire. Closing at once would leave them unanswered (docs/design.md §5.1). The
relay therefore reads on, within :data:`UNREAD_BYTES` and :data:`UNREAD_TIME`, until the client
has been quiet for :data:`UNREAD_QUIET`, and answers each request it finds with the connection's
ending error. Only a request written after that (the client has not seen the close yet) can go
unanswered; the client then sees the connection close, which MCP clients report for every
request still pending.
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
