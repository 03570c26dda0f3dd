"""The benchmark's WebSocket and TLS sessions: :class:`wire.Conn` with framing or encryption added.

Both keep ``Conn``'s design: one non-blocking socket, every wait through ``poll`` on its fd, no
thread of their own, so the ``ws://`` and ``tls:`` rows are driven exactly as the Unix and TCP rows
are (the concurrent scenario's single poll loop included) and their figures differ only by what the
channel itself costs, on the client's side as on the relay's.

* :class:`WsConn` speaks WebSocket through the ``websockets`` library's sans-I/O client protocol
  (``websockets.client.ClientProtocol``): this module owns the socket and the waits, the library
  only builds and parses bytes. Each newline-terminated message handed to :meth:`WsConn.send` goes
  out as one text frame (masked, as a client must); each text message received is one line. The
  opening handshake offers the ``mcp`` subprotocol, asks for no compression (no
  ``permessage-deflate``) and sets no message size limit.
* :class:`TlsConn` is an ``ssl``-wrapped TCP socket carrying newline-delimited JSON, as ``tcp:`` does.
  A TLS socket can hold decrypted bytes that ``poll`` does not see, so every read drains it until
  OpenSSL wants more from the network.
* :class:`TestCertificates` makes a throwaway CA and a certificate for 127.0.0.1 with ``trustme``,
  in a directory the caller deletes: no key is ever kept or committed.

Both client sockets set ``TCP_NODELAY``, as the TCP row does (the benchmark batches its writes).
"""

from __future__ import annotations

import os
import socket
import ssl

import trustme
from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.protocol import State
from websockets.typing import Subprotocol
from websockets.uri import parse_uri
from wire import IDLE_TIMEOUT_S, READ_SIZE, BenchError, Conn

WS_SUBPROTOCOL = Subprotocol("mcp")  # what an MCP-over-WebSocket client offers
LOOPBACK = "127.0.0.1"
DATA_OPCODES = (Opcode.TEXT, Opcode.BINARY, Opcode.CONT)


def _tcp_socket(host: str, port: int) -> socket.socket:
    """A blocking TCP connection with an idle timeout and Nagle's algorithm off."""
    sock = socket.create_connection((host, port), timeout=IDLE_TIMEOUT_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # we batch writes ourselves
    return sock


# -- WebSocket --------------------------------------------------------------------------------
class WsConn(Conn):
    """One session over a WebSocket: one text frame per message each way."""

    def __init__(self, sock: socket.socket, protocol: ClientProtocol) -> None:
        sock.setblocking(False)
        super().__init__(sock.fileno(), sock.fileno(), sock.close)
        self._sock = sock  # kept alive (and closed) with the connection
        self._protocol = protocol
        self._fragments: list[bytes] = []  # pieces of a fragmented message
        self._sending = False

    def send(self, data: bytes) -> None:
        """Frame each newline-terminated message of ``data`` and write the frames in one go."""
        for message in data.split(b"\n"):
            if message:
                self._protocol.send_text(message)
        self._flush()

    def _flush(self) -> None:
        """Write everything the protocol has queued: our frames, and any pong or close reply."""
        pending = b"".join(self._protocol.data_to_send())
        if pending:
            self._sending = True
            try:
                super().send(pending)
            finally:
                self._sending = False

    def _split(self, data: bytes) -> list[bytes]:
        self._protocol.receive_data(data)
        lines = self.lines_from(self._protocol.events_received())
        if self._protocol.state is not State.OPEN:
            raise BenchError(f"WebSocket closed by the other side: {self._close_reason()}")
        if not self._sending:  # answer a ping now, unless that would cut into a frame being written
            self._flush()
        return lines

    def lines_from(self, events: list) -> list[bytes]:
        """The complete messages among received frames (pings are answered by the protocol)."""
        lines = []
        for frame in events:
            if not isinstance(frame, Frame) or frame.opcode not in DATA_OPCODES:
                continue
            self._fragments.append(frame.data)
            if frame.fin:
                lines.append(b"".join(self._fragments))
                self._fragments = []
        return lines

    def _close_reason(self) -> str:
        if self._protocol.parser_exc is not None:
            return f"{type(self._protocol.parser_exc).__name__}: {self._protocol.parser_exc}"
        received = self._protocol.close_rcvd
        return f"close code {received.code} {received.reason!r}" if received else "no close frame"


def ws_connect(url: str) -> WsConn:
    """Open a WebSocket session: TCP connect and opening handshake, blocking with a timeout."""
    uri = parse_uri(url)
    protocol = ClientProtocol(uri, subprotocols=[WS_SUBPROTOCOL], max_size=None)  # no extensions
    sock = _tcp_socket(uri.host, uri.port)
    try:
        protocol.send_request(protocol.connect())
        sock.sendall(b"".join(protocol.data_to_send()))
        while protocol.state is State.CONNECTING:
            data = sock.recv(READ_SIZE)
            if not data:
                protocol.receive_eof()
                break
            protocol.receive_data(data)
        events = protocol.events_received()
        if protocol.state is not State.OPEN:
            raise BenchError(f"WebSocket handshake with {url} failed: {protocol.handshake_exc}")
        conn = WsConn(sock, protocol)
    except BaseException:
        sock.close()
        raise
    conn._stashed.extend(conn.lines_from([e for e in events if not isinstance(e, Response)]))
    return conn


# -- TLS --------------------------------------------------------------------------------------
class TlsConn(Conn):
    """One session over TLS on TCP: newline-delimited JSON, as on a plain TCP socket."""

    def __init__(self, sock: ssl.SSLSocket) -> None:
        sock.setblocking(False)
        super().__init__(sock.fileno(), sock.fileno(), sock.close)
        self._sock = sock
        self._ended = False  # the peer closed after the bytes last returned

    def _write(self, view: memoryview) -> int:
        # OpenSSL takes the whole buffer or asks for the same one again once the socket drains
        # (Python sets SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER), which is what Conn.send does.
        try:
            return self._sock.send(view)
        except (ssl.SSLWantWriteError, ssl.SSLWantReadError):
            raise BlockingIOError from None

    def _recv(self) -> bytes:
        """Everything readable now, including what OpenSSL already decrypted and poll cannot see."""
        chunks = []
        while not self._ended:
            try:
                chunk = self._sock.recv(READ_SIZE)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                break
            if not chunk:
                self._ended = True
                break
            chunks.append(chunk)
        if chunks:
            return b"".join(chunks)
        if self._ended:
            return b""
        raise BlockingIOError


def tls_connect(address: tuple[str, int], context: ssl.SSLContext) -> TlsConn:
    """Open a TLS session: TCP connect and TLS handshake, blocking with a timeout."""
    sock = _tcp_socket(*address)
    try:
        secure = context.wrap_socket(sock, server_hostname=address[0])
    except BaseException:
        sock.close()
        raise
    try:
        return TlsConn(secure)
    except BaseException:
        secure.close()
        raise


class TestCertificates:
    """A throwaway CA and a server certificate for 127.0.0.1, written into ``directory``."""

    def __init__(self, directory: str) -> None:
        authority = trustme.CA()
        issued = authority.issue_cert(LOOPBACK, "localhost")
        self.cert_path = os.path.join(directory, "server-chain.pem")
        self.key_path = os.path.join(directory, "server-key.pem")
        with open(self.cert_path, "wb") as chain:
            chain.write(b"".join(pem.bytes() for pem in issued.cert_chain_pems))
        issued.private_key_pem.write_to_path(self.key_path)
        self.client_context = ssl.create_default_context()
        authority.configure_trust(self.client_context)
