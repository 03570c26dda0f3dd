"""The benchmark's client side: newline-delimited JSON-RPC over file descriptors, standard library only.

A :class:`Conn` wraps one session: a read fd and a write fd (the same fd for a socket, the child's
stdout and stdin for the ``direct`` row). Both fds are non-blocking and every wait goes through
``poll`` with an idle timeout, so a hung relay turns into a reported error instead of a hung run.
While a large write is blocked, :meth:`Conn.send` keeps reading, so neither side can deadlock on
full buffers whatever the relay does.

Requests are encoded once, before any clock starts; replies are parsed with ``json.loads`` and every
one is checked (id and echoed text). A bad reply raises :class:`BenchError`, which the runner reports
in place of the measurement.
"""

from __future__ import annotations

import json
import os
import select
from collections.abc import Callable

READ_SIZE = 1 << 18  # bytes per os.read(): big, so a 16 MiB reply needs few system calls
IDLE_TIMEOUT_S = 10.0  # give up when no byte moves for this long (a hung relay fails, never hangs)
IDLE_TIMEOUT_MS = int(IDLE_TIMEOUT_S * 1000)
PROTOCOL_VERSION = "2025-06-18"  # a legacy-era version the example server accepts
INITIALIZE_ID = 0  # id of the handshake request; tools/call ids start at 1
CLIENT_INFO = {"name": "mcp-bridge-bench", "version": "1.0.0"}


class BenchError(Exception):
    """A failure that invalidates a measurement: it is reported, never timed."""


# -- messages ---------------------------------------------------------------------------------
def encode(message: dict) -> bytes:
    """One compact JSON-RPC line, ready to write."""
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


INITIALIZE = encode(
    {
        "jsonrpc": "2.0",
        "id": INITIALIZE_ID,
        "method": "initialize",
        "params": {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO},
    }
)
INITIALIZED = encode({"jsonrpc": "2.0", "method": "notifications/initialized"})


def echo_call(call_id: int | str, text: str) -> bytes:
    """A ``tools/call`` of the example server's ``echo`` tool."""
    return encode(
        {
            "jsonrpc": "2.0",
            "id": call_id,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}},
        }
    )


def _loads(line: bytes) -> dict:
    try:
        message = json.loads(line)
    except ValueError:
        raise BenchError(f"reply is not JSON: {line[:80]!r}") from None
    if not isinstance(message, dict):
        raise BenchError(f"reply is not a JSON object: {line[:80]!r}")
    return message


def check_initialize(line: bytes) -> None:
    """Raise unless ``line`` is the result of our ``initialize`` request (or, on a session of the
    2026-07-28 era, of the ``server/discover`` it became: see http_modern.py)."""
    message = _loads(line)
    result = message.get("result")
    if (
        message.get("id") != INITIALIZE_ID
        or not isinstance(result, dict)
        or ("protocolVersion" not in result and "supportedVersions" not in result)
    ):
        raise BenchError(f"bad initialize reply: {line[:200]!r}")


def parse_echo(line: bytes) -> tuple[object, str]:
    """The (id, echoed text) of an echo reply; raise on an error reply or a malformed result."""
    message = _loads(line)
    result = message.get("result")
    if result is None:
        raise BenchError(f"error reply: {str(message.get('error') or message)[:200]}")
    try:
        if result["isError"] is not False:
            raise BenchError(f"tool error: {str(result)[:200]}")
        return message["id"], result["content"][0]["text"]
    except (KeyError, IndexError, TypeError):
        raise BenchError(f"malformed echo result: {line[:200]!r}") from None


def mismatch(expected_id: object, got_id: object, expected_text: str, got_text: str) -> BenchError:
    """Describe a reply whose id or text differs from the request (texts summarised by length)."""
    if expected_id != got_id:
        return BenchError(f"reply id {got_id!r} where {expected_id!r} was expected")
    if not isinstance(got_text, str):
        return BenchError(f"echoed text is a {type(got_text).__name__}, not a string")
    where = next((i for i, (a, b) in enumerate(zip(expected_text, got_text, strict=False)) if a != b), None)
    where = min(len(expected_text), len(got_text)) if where is None else where
    return BenchError(
        f"echoed text differs at char {where} (sent {len(expected_text)} chars, got {len(got_text)})"
    )


# -- transport --------------------------------------------------------------------------------
class Conn:
    """One JSON-RPC session over a read fd and a write fd (the same fd for a socket)."""

    def __init__(self, read_fd: int, write_fd: int, on_close: Callable[[], None]) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self._on_close = on_close
        self._partial: list[bytes] = []  # pieces of a line whose newline has not arrived yet
        self._stashed: list[bytes] = []  # complete lines read while a send was waiting
        os.set_blocking(read_fd, False)
        os.set_blocking(write_fd, False)
        self._wait_readable = select.poll()
        self._wait_readable.register(read_fd, select.POLLIN)
        self._wait_writable = select.poll()  # writable, or readable so that we can drain meanwhile
        if read_fd == write_fd:
            self._wait_writable.register(read_fd, select.POLLIN | select.POLLOUT)
        else:
            self._wait_writable.register(read_fd, select.POLLIN)
            self._wait_writable.register(write_fd, select.POLLOUT)

    def close(self) -> None:
        self._on_close()

    def reserve(self, in_flight: int) -> None:
        """Get ready for ``in_flight`` requests at once (a stream needs nothing; an HTTP session
        opens a connection per request in flight, see streamable_http.py)."""

    def send(self, data: bytes) -> None:
        """Write all of ``data``, reading (and keeping) replies whenever the write would block."""
        view = memoryview(data)
        while view:
            try:
                view = view[self._write(view) :]
                continue
            except BlockingIOError:
                pass
            events = self._wait_writable.poll(IDLE_TIMEOUT_MS)
            if not events:
                raise BenchError(f"peer stopped reading for {IDLE_TIMEOUT_S:g} s")
            for fd, event in events:
                if fd == self.read_fd and event & (select.POLLIN | select.POLLHUP):
                    self._stashed.extend(self._read_once())

    def read_available(self) -> list[bytes]:
        """The complete lines one read brings (maybe none); raise at end of stream."""
        if self._stashed:
            lines, self._stashed = self._stashed, []
            return lines
        return self._read_once()

    def read_lines(self) -> list[bytes]:
        """Wait for at least one complete line and return all complete lines received."""
        while True:
            lines = self.read_available()
            if lines:
                return lines
            if not self._wait_readable.poll(IDLE_TIMEOUT_MS):
                raise BenchError(f"no reply for {IDLE_TIMEOUT_S:g} s")

    def read_one(self) -> bytes:
        """Exactly one message, for request/reply exchanges with nothing else in flight."""
        lines = self.read_lines()
        if len(lines) != 1:
            raise BenchError(f"{len(lines)} messages arrived where one reply was expected")
        return lines[0]

    def _read_once(self) -> list[bytes]:
        try:
            data = self._recv()
        except BlockingIOError:
            return []
        if not data:
            raise BenchError("connection closed by the other side")
        return self._split(data)

    # The byte-level hooks a channel with framing or encryption of its own overrides (ws_tls.py).
    def _write(self, view: memoryview) -> int:
        """Write what the fd takes now; raise BlockingIOError when it takes nothing."""
        return os.write(self.write_fd, view)

    def _recv(self) -> bytes:
        """Bytes available now (b"" at end of stream); raise BlockingIOError when there are none."""
        return os.read(self.read_fd, READ_SIZE)

    def _split(self, data: bytes) -> list[bytes]:
        """Cut received bytes into lines; a long line is joined once, when its newline arrives."""
        if b"\n" not in data:
            self._partial.append(data)
            return []
        lines = data.split(b"\n")
        if self._partial:
            self._partial.append(lines[0])
            lines[0] = b"".join(self._partial)
            self._partial = []
        last = lines.pop()
        if last:
            self._partial.append(last)
        return [line for line in lines if line]


def open_session(connect: Callable[[], Conn]) -> Conn:
    """Connect and do the MCP handshake (``initialize``, then ``notifications/initialized``)."""
    conn = connect()
    try:
        conn.send(INITIALIZE)
        check_initialize(conn.read_one())
        conn.send(INITIALIZED)
    except BaseException:
        conn.close()
        raise
    return conn
