"""Which protocol era a child serves, found by the ``server/discover`` probe (``--child auto``).

MCP 2026-07-28 is stateless: a modern (or dual-era) server serves every request from what the
request itself carries, so one child can be shared by all clients. A legacy server keeps the state of
its ``initialize`` handshake for the life of the process, so each client needs a child of its own.

The probe is the one the spec asks dual-era clients to make on stdio (2026-07-28
``basic/versioning.mdx``, backward compatibility): send ``server/discover`` with the modern
``_meta`` before anything else; a ``DiscoverResult`` or a recognised modern error (``-32020``,
``-32021``, ``-32022``) means modern; any other error, or no answer, means legacy. The fallback is
never keyed to one error code: legacy servers answer ``-32601`` or ``-32602`` or nothing at all.

Legacy is the safe verdict (one child per connection works with every server), so modern is given
only on positive evidence: a reply to ``server/discover`` that the bridge cannot read, or a
``DiscoverResult`` that names no modern version (go-sdk's stateful default advertises only
handshake versions; the official SDK clients fall back to ``initialize`` there too), is legacy.

:func:`classify_discover_reply` is the decision, without I/O; :func:`probe_era` does the exchange
with a child that has just been started.
"""

from __future__ import annotations

import enum
import logging
from typing import Any

import attrs
import trio

from channels import JSONObject, ProtocolError, RequestId

from .._child.process import ChildProcess, describe_exit
from .._errors import ChildStartError
from .._version import __version__

__all__ = [
    "MODERN_ERROR_CODES",
    "MODERN_VERSION",
    "PROBE_ID",
    "Era",
    "ProbeResult",
    "classify_discover_reply",
    "discover_request",
    "probe_era",
]

logger = logging.getLogger("bridge.eras")

MODERN_VERSION = "2026-07-28"
"""The protocol version the probe asks for: the first (and newest) per-request-metadata version."""

MODERN_ERROR_CODES = frozenset({-32020, -32021, -32022})
"""HeaderMismatch, MissingRequiredClientCapability, UnsupportedProtocolVersion: codes only a modern
server uses (2026-07-28 reserves ``-32020..-32099`` for the spec), so any of them is modern evidence."""

PROBE_ID = "mcp-bridge-probe"
"""The JSON-RPC id of the probe. No client is attached yet, so it cannot collide with a client's."""

# After the child's stdout ended: how long to wait for its exit status, for the error message.
EXIT_STATUS_WAIT = 1.0


class Era(enum.Enum):
    """A child's protocol era. Dual-era servers probe as :attr:`MODERN`."""

    LEGACY = "legacy"
    MODERN = "modern"


@attrs.frozen
class ProbeResult:
    """The probe's verdict.

    Attributes:
        era: the era to serve the child in.
        reason: why, as human text for the log.
        supported_versions: the versions the server named (in a ``DiscoverResult`` or in the
            ``data.supported`` of a modern error); empty if it named none.
        timed_out: the verdict is legacy for want of an answer within the probe's timeout, not
            from one: a modern server that starts slower than that gets it too.
    """

    era: Era
    reason: str
    supported_versions: tuple[str, ...] = ()
    timed_out: bool = False


def discover_request(request_id: RequestId) -> JSONObject:
    """The ``server/discover`` request, with the modern per-request ``_meta``."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "server/discover",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "mcp-bridge", "version": __version__},
            },
        },
    }


def _versions(value: Any) -> tuple[str, ...] | None:
    """``value`` as a tuple of version strings, or None if it is not a list (non-strings dropped)."""
    if not isinstance(value, list):
        return None
    return tuple(item for item in value if isinstance(item, str))


def _is_modern_version(version: str) -> bool:
    # Versions are ISO dates, so they compare as strings; every version from 2026-07-28 on is
    # modern (versioning.mdx: "2026-07-28 and later").
    return version >= MODERN_VERSION


def classify_discover_reply(reply: JSONObject) -> ProbeResult:
    """Decide the era from the reply to ``server/discover`` (a JSON-RPC response object)."""
    if "error" in reply:
        error = reply["error"] if isinstance(reply["error"], dict) else {}
        code = error.get("code")
        message = error.get("message")
        described = f"{code} {message}" if isinstance(message, str) and message else f"{code}"
        if isinstance(code, int) and not isinstance(code, bool) and code in MODERN_ERROR_CODES:
            data = error.get("data")
            supported = _versions(data.get("supported")) if isinstance(data, dict) else None
            reason = f"server/discover failed with modern error {described}"
            if supported:
                reason += f": supported versions {', '.join(supported)}"
            return ProbeResult(Era.MODERN, reason, supported or ())
        return ProbeResult(Era.LEGACY, f"server/discover failed with {described}")
    result = reply.get("result")
    supported = _versions(result.get("supportedVersions")) if isinstance(result, dict) else None
    if supported is None:
        return ProbeResult(Era.LEGACY, "server/discover answered without a supportedVersions list")
    listed = ", ".join(supported) or "none"
    if not any(_is_modern_version(version) for version in supported):
        return ProbeResult(
            Era.LEGACY,
            f"server/discover answered with no modern version: supported versions {listed}",
            supported,
        )
    return ProbeResult(Era.MODERN, f"server/discover answered: supported versions {listed}", supported)


async def probe_era(child: ChildProcess, *, timeout: float) -> ProbeResult:
    """Probe a child that has just been started, before any client is attached to it.

    Sends :func:`discover_request` (id :data:`PROBE_ID`) and reads the child's stdout up to the
    reply. Lines that are not JSON-RPC are counted as garbage and skipped, as the relay does; other
    messages that arrive before the reply (a notification, a request to a client that is not there
    yet) are dropped, logged at debug. Nothing after the reply is consumed: what the child wrote
    after it stays in ``child.channel`` for the next reader. No answer within ``timeout`` seconds
    (including the child's start-up; the daemon passes ``ServeConfig.probe_timeout``) is a legacy
    verdict with ``timed_out`` set; the child may still answer later, and that stray reply then
    reaches whoever reads the channel next (the relay drops replies to no request of its client's).

    An answer's verdict is logged at INFO with the child's name and pid; a timeout only at debug
    here, because the caller knows what follows from it and warns, naming the fix.

    Raises:
        ChildStartError: the child exited, or closed its stdout or stdin, before it answered.
    """
    channel = child.channel
    gone: BaseException | None = None
    with trio.move_on_after(timeout):
        try:
            await channel.send(discover_request(PROBE_ID))
            while True:
                try:
                    message = await channel.receive()
                except ProtocolError as exc:
                    child.note_garbage(exc)
                    if exc.request_id == PROBE_ID:
                        result = ProbeResult(
                            Era.LEGACY,
                            f"server/discover answered with a message the bridge cannot accept ({exc})",
                        )
                        break
                    continue
                if message.get("id") == PROBE_ID and "method" not in message:
                    result = classify_discover_reply(message)
                    break
                logger.debug(
                    "[%s pid %d] dropped a message that arrived before the era probe's reply: %.200r",
                    child.spec.name,
                    child.pid,
                    message,
                )
        except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            gone = exc
        else:
            logger.info("[%s pid %d] %s era: %s", child.spec.name, child.pid, result.era.value, result.reason)
            return result
    if gone is not None:
        with trio.move_on_after(EXIT_STATUS_WAIT):
            await child.wait()
        status = (
            describe_exit(child.returncode)
            if child.returncode is not None
            else "closed its stdout"
            if isinstance(gone, trio.EndOfChannel)
            else "closed its stdin"
        )
        raise ChildStartError(
            f"child exited during the era probe: {child.spec.name} (pid {child.pid}) {status}"
        ) from gone
    result = ProbeResult(Era.LEGACY, f"no answer to server/discover within {timeout:g}s", timed_out=True)
    logger.debug("[%s pid %d] %s era: %s", child.spec.name, child.pid, result.era.value, result.reason)
    return result
