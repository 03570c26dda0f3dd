"""An https:// listener's lingering close says TLS's goodbye (close_notify) before it lingers.

After a refusal sent while the client may still be sending (a 413 for a body past the bounds of
what is read and dropped, or for one sent despite ``Expect: 100-continue``), the HTTP server shuts
its write side and reads on, so that the client reads the answer instead of a reset. Over TLS,
shutting the write side is ``close_notify``: without it, the client saw the answer, then waited
out the linger: up to 30 s while it still sent (nginx's lingering_time), for the server's
close_notify at its close.

A real bridge in this process with an https:// listener (trustme certificates), and a client on
``trio.SSLStream`` that treats a ragged EOF as the error it is (``https_compatible=False``). The
client goes on sending a little at a steady pace after its body, as a client that writes a large
body before reading does; the end of the response must reach it meanwhile, not after the linger
(which ends ``discard_time``, 30 s, after the refusal: past this test's deadline).
"""

from __future__ import annotations

import json
import ssl

import pytest
import trio

from bridge import Limits
from channels._http.server import request as request_module

from conftest import TlsFiles, call, example_server, running_bridge

TIMEOUT = 20
LIMIT = 1000  # the bridge's --max-message here
DISCARD_BYTES = 64 * 1024  # what is read and dropped of an over-limit body, lowered from 64 MiB
BODY_BYTES = 4 * DISCARD_BYTES  # past that bound: refused while the client still sends
TRICKLE = b" " * 1024  # what the client sends now and then after its body ...
TRICKLE_PAUSE = 0.2  # ... at this pace, well within the linger's 5 s without a byte


def head(content_length: int, *extra: bytes) -> bytes:
    return (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n%s\r\n"
        % (content_length, b"".join(line + b"\r\n" for line in extra))
    )


@pytest.mark.parametrize("expect", [False, True], ids=["past-the-discard-bound", "despite-expect-continue"])
async def test_an_https_refusal_of_a_body_still_being_sent_reaches_its_end_by_tls_close_notify_while_the_client_still_sends(
    tls_files: TlsFiles, monkeypatch: pytest.MonkeyPatch, expect: bool
) -> None:
    monkeypatch.setattr(request_module, "DISCARD_BYTES", DISCARD_BYTES)
    body = json.dumps(call(7, "echo", text="x" * BODY_BYTES)).encode()
    context = ssl.create_default_context(cafile=tls_files.ca)
    with trio.fail_after(TIMEOUT):
        async with running_bridge(
            example_server(),
            ["https://127.0.0.1:0/mcp"],
            listen_options=tls_files.listen_options(),
            limits=Limits(max_client_message=LIMIT),
        ) as daemon:
            port = int(daemon.addresses[0].rsplit(":", 1)[1].split("/", 1)[0])
            tcp = await trio.open_tcp_stream("127.0.0.1", port)
            client = trio.SSLStream(tcp, context, server_hostname="127.0.0.1")
            async with client:
                await client.do_handshake()
                extra = (b"Expect: 100-continue",) if expect else ()
                # The whole body without waiting, as httpx and Node's fetch send it (and curl after
                # its one-second wait for 100 Continue).
                await client.send_all(head(len(body), *extra) + body)
                received = bytearray()
                async with trio.open_nursery() as nursery:

                    async def trickle() -> None:
                        while True:
                            await trio.sleep(TRICKLE_PAUSE)  # the client's pace, not a synchronisation
                            await client.send_all(TRICKLE)

                    nursery.start_soon(trickle)
                    # A ragged EOF (no close_notify) would raise BrokenResourceError.
                    while data := await client.receive_some(65536):
                        received += data
                    nursery.cancel_scope.cancel()
    status, _, rest = bytes(received).partition(b"\r\n")
    assert status.startswith(b"HTTP/1.1 413"), received
    reply = json.loads(rest.partition(b"\r\n\r\n")[2].decode())
    assert reply["error"]["data"] == {"limit": LIMIT, "reason": "message-too-large"}, reply
