"""``mcp-bridge connect ADDRESS``: stdio on one side, a channel on the other.

Any stdio-only MCP client can launch this as if it were the server. stdout carries only protocol
messages (logs go to stderr). The local client's EOF on stdin half-closes the connection, so replies
still in flight arrive before the bridge closes its end; the bridge closing first, or the connection
breaking, is a lost connection and exits non-zero with a message on stderr.
"""

from __future__ import annotations

import logging

import attrs
import trio

from channels import (
    UNAUTHORIZED,
    AccessDenied,
    Address,
    ConnectError,
    ConnectOptions,
    JSONObject,
    MessageChannel,
    MessageTooLarge,
    PeerInfo,
    ProtocolError,
    StreamChannel,
    open_stdio_stream,
    receive_batch,
)

from .._errors import REPLY_TOO_LARGE, error_response
from .._relay.writers import BATCH
from .exits import EXIT_LOST, EXIT_NOPERM, EXIT_OK, EXIT_UNAVAILABLE

logger = logging.getLogger("bridge.connect")


# After the local client's EOF on a channel that cannot half-close (TLS, WebSocket), how long the
# replies it still awaits may take before the connection is closed anyway (the bridge's own
# --half-close-timeout default).
REPLY_GRACE = 30.0


@attrs.define(eq=False)
class _Connection:
    local: MessageChannel
    remote: MessageChannel
    local_done: bool = False
    exit_code: int = EXIT_OK
    _write_lock: trio.Lock = attrs.field(factory=trio.Lock)
    # Requests sent and not yet answered, for channels that cannot half-close: on the local EOF
    # they are waited for, then the connection is closed.
    _awaited: set[tuple[type, object]] = attrs.field(factory=set)
    _all_answered: trio.Event = attrs.field(factory=trio.Event)

    def lost(self, exc: BaseException) -> None:
        if self.exit_code == EXIT_OK:
            logger.error("connection to %s lost: %s", self.remote.peer, exc)
            self.exit_code = EXIT_LOST

    async def write_local(self, messages: list[JSONObject]) -> None:
        async with self._write_lock:
            await self.local.send_many(messages)

    async def upstream(self) -> None:
        """Stdin → remote; on stdin EOF, half-close the connection."""
        while True:
            try:
                items = await receive_batch(self.local, BATCH)
            except (trio.EndOfChannel, trio.BrokenResourceError):
                self.local_done = True
                await self._finish()
                return
            forward = [item for item in items if not isinstance(item, ProtocolError)]
            errors = [
                error_response(
                    item.request_id, item.rpc_code, "Invalid message", item.reason, detail=str(item)
                )
                for item in items
                if isinstance(item, ProtocolError)
            ]
            if errors:
                await self.write_local(errors)  # never sent on: the bridge would refuse it too
            if forward:
                self._awaited.update(
                    (type(item["id"]), item["id"]) for item in forward if "method" in item and "id" in item
                )
                try:
                    await self.remote.send_many(forward)
                except trio.BrokenResourceError as exc:
                    self.lost(exc)
                    return

    async def _finish(self) -> None:
        """The local client is done: half-close the connection.

        Where the channel cannot half-close, wait for the replies the client still awaits, then
        close.
        """
        try:
            await self.remote.send_eof()
            return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return
        except NotImplementedError:
            pass
        with trio.move_on_after(REPLY_GRACE) as waited:
            if self._awaited:
                await self._all_answered.wait()
        if waited.cancelled_caught:
            logger.warning(
                "%d replies did not arrive within %gs of the end of input", len(self._awaited), REPLY_GRACE
            )
        await self.remote.aclose()

    def _answered(self, message: JSONObject) -> None:
        if "method" not in message and "id" in message:
            self._awaited.discard((type(message["id"]), message["id"]))
            if not self._awaited and self.local_done:
                self._all_answered.set()

    async def downstream(self) -> None:
        """Remote → stdout, until the remote end closes."""
        while True:
            try:
                items = await receive_batch(self.remote, BATCH)
            except (trio.EndOfChannel, trio.ClosedResourceError):
                if not self.local_done:
                    logger.error("connection closed by the bridge (%s)", self.remote.peer)
                    self.exit_code = EXIT_LOST
                return
            except trio.BrokenResourceError as exc:
                self.lost(exc)
                return
            messages = []
            for item in items:
                if isinstance(item, MessageTooLarge):
                    if item.request_id is None:
                        # It may have been any request's reply: end, so the client fails them all
                        # instead of waiting forever for one.
                        logger.error(
                            "the bridge sent a message over --max-message (%d bytes) "
                            "that names no request; closing",
                            item.limit,
                        )
                        self.exit_code = EXIT_LOST
                        return
                    logger.error(
                        "reply to %r is over --max-message (%d bytes); answering it with an error",
                        item.request_id,
                        item.limit,
                    )
                    messages.append(
                        error_response(
                            item.request_id, REPLY_TOO_LARGE, "Reply too large", item.reason, limit=item.limit
                        )
                    )
                elif isinstance(item, ProtocolError):
                    logger.warning("dropped an invalid message from the bridge: %s", item)
                elif _is_unauthorized(item):
                    logger.error(
                        "access denied: the bridge refused our token (%s)",
                        item["error"].get("data", {}).get("detail", "no detail"),
                    )
                    self.exit_code = EXIT_NOPERM
                    return
                else:
                    self._answered(item)
                    messages.append(item)
            if messages:
                try:
                    await self.write_local(messages)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return  # the local client closed its stdin side: it is done with us


def _is_unauthorized(message: JSONObject) -> bool:
    error = message.get("error")
    return message.get("id") is None and isinstance(error, dict) and error.get("code") == UNAUTHORIZED


async def run_connect(address: Address, options: ConnectOptions) -> int:
    """Relay this process's stdio to ``address`` until either side is done; return the exit code."""
    local = StreamChannel(
        open_stdio_stream(), max_message_bytes=options.max_message_bytes, peer=PeerInfo("stdio")
    )
    try:
        async with address.connect(options) as remote:
            connection = _Connection(local, remote)
            async with trio.open_nursery() as nursery:

                async def downstream_then_stop() -> None:
                    await connection.downstream()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(connection.upstream)
                nursery.start_soon(downstream_then_stop)
            return connection.exit_code
    except AccessDenied as exc:
        logger.error("access denied: %s", exc)
        return EXIT_NOPERM
    except ConnectError as exc:
        logger.error("cannot connect: %s", exc)
        return EXIT_UNAVAILABLE
    finally:
        await trio.aclose_forcefully(local)
