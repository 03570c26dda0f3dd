"""The admin endpoint (``--admin tcp:127.0.0.1:9100``): liveness, readiness and metrics over HTTP.

* ``GET /healthz``: 200 while the daemon runs (liveness: the event loop answers).
* ``GET /readyz``: 200 when it serves (listeners bound, a shared child up), else 503 with the
  reason; a Kubernetes readiness probe or a load balancer's health check. One line per server
  (``NAME: state``), a server on a shared listener that could not start as ``NAME: failed: why``.
* ``GET /readyz/NAME``: the same for one server (404 if there is none of that name): the check for
  a proxy route to one server of a shared listener, which the others' failures must not take down.
* ``GET /metrics``: Prometheus text (:mod:`bridge._ops.metrics`), then the process's own: its
  build info and ``process_*`` metrics (:mod:`bridge._ops.process_metrics`).

HTTP/1.1 is parsed by h11; one request per connection (``Connection: close``), a 10 s header
deadline and h11's 16 KiB header bound, so a slow or hostile client costs one task briefly. The
endpoint binds loopback only: it has no authentication (put a proxy in front to expose it).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping, Sequence
from functools import partial
from urllib.parse import unquote

import h11
import trio

from channels import TcpAddress

from .._daemon.daemon import Daemon
from .._errors import ConfigError
from . import process_metrics
from .metrics import CONTENT_TYPE, merge, render

logger = logging.getLogger("bridge.admin")

# A complete request may never take longer (HAProxy `timeout http-request`, the handshake bound).
REQUEST_TIMEOUT = 10.0
# h11's own default for max_incomplete_event_size: headers past this are refused.
MAX_REQUEST_HEAD_BYTES = 16 * 1024
RECEIVE_SIZE = 4096


def admin_address(text: str) -> TcpAddress:
    """Parse ``--admin``: a loopback ``tcp:HOST:PORT``.

    Raises:
        ConfigError: not ``tcp:``, or not a loopback host.
    """
    try:
        address = TcpAddress.parse(text)
    except ValueError as exc:
        raise ConfigError(f"--admin {exc}") from None
    host = address.host
    loopback = host == "localhost" or _is_loopback_literal(host)
    if not loopback:
        raise ConfigError(
            f"--admin {text}: the admin endpoint has no authentication and binds "
            "loopback only (127.0.0.1, ::1 or localhost); put a proxy in front"
        )
    return address


def _is_loopback_literal(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def serve_admin(
    daemons: Sequence[Daemon],
    address: TcpAddress,
    *,
    failed: Mapping[str, str] | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the admin endpoint until cancelled; ``nursery.start`` returns the bound addresses.

    ``daemons`` and ``failed`` (servers that could not start, with why) are read at each request:
    the fleet keeps them current.

    Raises:
        ConfigError: the address cannot be bound.
    """
    try:
        listeners = await trio.open_tcp_listeners(address.port, host=address.host)
    except OSError as exc:
        raise ConfigError(f"--admin {address}: {exc.strerror or exc}") from None
    bound = [
        f"tcp:{listener.socket.getsockname()[0]}:{listener.socket.getsockname()[1]}" for listener in listeners
    ]
    for text in bound:
        logger.info("admin endpoint on %s", text)
    task_status.started(bound)
    await trio.serve_listeners(partial(_handle, daemons, failed if failed is not None else {}), listeners)


async def _handle(daemons: Sequence[Daemon], failed: Mapping[str, str], stream: trio.SocketStream) -> None:
    connection = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_REQUEST_HEAD_BYTES)
    try:
        with trio.move_on_after(REQUEST_TIMEOUT):
            request = await _read_request(connection, stream)
            if request is None:
                return
            status, content_type, body, extra = _route(daemons, failed, request)
            headers = [
                ("content-type", content_type),
                ("content-length", str(len(body))),  # a HEAD answer says the GET's length
                ("connection", "close"),
                *extra,
            ]
            data = connection.send(h11.Response(status_code=status, headers=headers))
            if request.method != b"HEAD":
                data += connection.send(h11.Data(data=body))
            data += connection.send(h11.EndOfMessage())
            await stream.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


async def _read_request(connection: h11.Connection, stream: trio.SocketStream) -> h11.Request | None:
    """The request head, or ``None`` after answering a malformed one with 400 (or the peer left)."""
    while True:
        try:
            event = connection.next_event()
        except h11.RemoteProtocolError as exc:
            body = f"bad request: {exc}\n".encode()
            response = h11.Response(
                status_code=exc.error_status_hint,
                headers=[
                    ("content-type", "text/plain"),
                    ("content-length", str(len(body))),
                    ("connection", "close"),
                ],
            )
            await stream.send_all(
                connection.send(response)
                + connection.send(h11.Data(data=body))
                + connection.send(h11.EndOfMessage())
            )
            return None
        if event is h11.NEED_DATA:
            data = await stream.receive_some(RECEIVE_SIZE)
            connection.receive_data(data)
            continue
        if isinstance(event, h11.Request):
            return event
        return None  # the peer closed before a request


def _readiness(daemons: Sequence[Daemon], failed: Mapping[str, str], name: str | None) -> tuple[int, bytes]:
    """``/readyz`` (``name`` None) or ``/readyz/NAME``: the status and one line per server."""
    chosen = [daemon for daemon in daemons if name is None or daemon.config.child.name == name]
    down = {key: why for key, why in failed.items() if name is None or key == name}
    if not chosen and not down:
        return 404, f"no server named {name!r}\n".encode()
    ready = all(daemon.healthy() and not daemon.stopping for daemon in chosen) and not down
    lines = [
        daemon.describe()
        if len(daemons) == 1 and not failed
        else f"{daemon.config.child.name}: {daemon.describe()}"
        for daemon in chosen
    ] + [f"{key}: failed: {why}" for key, why in down.items()]
    return (200 if ready else 503), "".join(line + "\n" for line in lines).encode()


def _route(
    daemons: Sequence[Daemon], failed: Mapping[str, str], request: h11.Request
) -> tuple[int, str, bytes, list[tuple[str, str]]]:
    if request.method not in (b"GET", b"HEAD"):
        return 405, "text/plain", b"method not allowed\n", [("allow", "GET, HEAD")]
    path = request.target.partition(b"?")[0]
    if path == b"/healthz":
        return 200, "text/plain", b"ok\n", []
    if path == b"/readyz" or path.startswith(b"/readyz/"):
        name = unquote(path.removeprefix(b"/readyz/").decode("latin-1")) if path != b"/readyz" else None
        status, body = _readiness(daemons, failed, name)
        return status, "text/plain", body, []
    if path == b"/metrics":
        text = merge(
            [
                render(
                    daemon.statistics(),
                    server=daemon.config.child.name,
                    healthy=daemon.healthy(),
                    requests=daemon.request_metrics,
                )
                for daemon in daemons
            ]
        )
        text += process_metrics.build_info()  # once each: one process serves them all
        if (sample := process_metrics.read()) is not None:
            text += process_metrics.render(sample)
        return 200, CONTENT_TYPE, text.encode(), []
    return 404, "text/plain", b"not found: try /healthz, /readyz or /metrics\n", []
