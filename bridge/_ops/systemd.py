"""systemd's notification protocol (sd_notify(3)), with the standard library only.

``Type=notify`` services report readiness, status and stopping, and feed the watchdog, by sending
``KEY=VALUE`` lines as one datagram to the ``AF_UNIX`` socket named in ``$NOTIFY_SOCKET`` (a path,
or an abstract name when it starts with ``@``). The protocol is stable (systemd's
PORTABILITY_AND_STABILITY); sd_notify(3) advises ignoring send errors, and without
``$NOTIFY_SOCKET`` (not started by systemd) every call is a no-op.

What the daemon sends:

* ``READY=1`` once every listener is bound (and, with ``--start eager``, the shared child is up);
* ``STATUS=...`` when something changes: connections, the child's pid, restarts;
* ``STOPPING=1`` when a graceful stop begins;
* ``WATCHDOG=1`` every half ``$WATCHDOG_USEC``, only while the daemon is healthy (its event loop
  runs this task, and a shared child is not failing or restarting).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, MutableMapping

import attrs
import trio

logger = logging.getLogger("bridge.systemd")

NOTIFY_VARIABLES = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")
# sd_watchdog_enabled(3): "it is recommended that a daemon sends a keep-alive notification
# message to the service manager every half the time returned here".
WATCHDOG_FRACTION = 0.5
# How often STATUS= is refreshed while nothing else happens (systemctl status shows the latest).
STATUS_PERIOD = 5.0


@attrs.define(eq=False)
class Notifier:
    r"""Sends sd_notify messages; a no-op when ``address`` is ``None``.

    Attributes:
        address: the notification socket (``/run/systemd/notify``, or ``\\0name`` for an
            abstract one), or ``None``.
        watchdog_interval: seconds between ``WATCHDOG=1`` messages (half ``$WATCHDOG_USEC``), or
            ``None`` when systemd runs no watchdog for this process.
    """

    address: str | None
    watchdog_interval: float | None = None
    _sent_status: str = attrs.field(init=False, default="")

    @classmethod
    def from_environment(cls, environ: MutableMapping[str, str] | None = None) -> Notifier:
        """Read ``$NOTIFY_SOCKET``, ``$WATCHDOG_USEC`` and ``$WATCHDOG_PID`` once.

        They are removed from the environment, so that no child inherits them.
        """
        environ = os.environ if environ is None else environ
        values = {name: environ.pop(name, None) for name in NOTIFY_VARIABLES}
        address = values["NOTIFY_SOCKET"] or None
        if address is not None and address.startswith("@"):
            address = "\0" + address[1:]
        interval = None
        usec, pid = values["WATCHDOG_USEC"], values["WATCHDOG_PID"]
        if usec and usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            interval = int(usec) / 1e6 * WATCHDOG_FRACTION
        return cls(address, interval)

    def send(self, *lines: str) -> None:
        """Send ``lines`` as one notification; errors are logged at DEBUG and otherwise ignored."""
        if self.address is None:
            return
        message = "\n".join(lines).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.sendto(message, self.address)
        except OSError as exc:
            logger.debug("sd_notify %r failed: %s", lines, exc)

    def ready(self, status: str) -> None:
        """``READY=1`` with a first status line."""
        self._sent_status = status
        self.send("READY=1", f"STATUS={status}")

    def status(self, status: str) -> None:
        """``STATUS=...``, only if it changed."""
        if status != self._sent_status:
            self._sent_status = status
            self.send(f"STATUS={status}")

    def stopping(self, status: str = "stopping") -> None:
        """``STOPPING=1``: a graceful stop has begun."""
        self._sent_status = status
        self.send("STOPPING=1", f"STATUS={status}")

    async def run(self, describe: Callable[[], str], healthy: Callable[[], bool]) -> None:
        """Keep ``STATUS=`` current, and feed the watchdog while ``healthy()``; until cancelled.

        The watchdog is fed only if systemd asked for one (``$WATCHDOG_USEC``).

        Args:
            describe: the current status line.
            healthy: whether the daemon is fit to be kept alive.
        """
        if self.address is None:
            await trio.sleep_forever()
        period = min(STATUS_PERIOD, self.watchdog_interval or STATUS_PERIOD)
        while True:
            self.status(describe())
            if self.watchdog_interval is not None:
                if healthy():
                    self.send("WATCHDOG=1")
                else:
                    logger.warning("not feeding the watchdog: %s", describe())
            await trio.sleep(period)
