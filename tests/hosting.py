"""What the tests of one socket shared by several servers share, for either kind of host.

tests/channels/http/test_http_host.py (``HttpHost``) and tests/channels/ws/test_ws_host.py
(``WebSocketHost``) mount real daemons on a host, each with the bundled example server as its
child (:func:`serving_daemons`), or listeners served by :func:`echo_handler`, so that nothing but
a mount's own ``aclose`` ends what it serves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import trio

from bridge import ChildSpec, Daemon, ServeConfig
from channels import HttpHost, Incoming, ListenOptions, WebSocketHost

from conftest import example_server, poll, request

LEGACY = "2025-06-18"  # the era the hosts' tests speak, with a session per connection or per id


def initialize(request_id: Any = 1) -> dict[str, Any]:
    params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    return request(request_id, "initialize", params)


@asynccontextmanager
async def serving_daemons(
    host: HttpHost | WebSocketHost, servers: Mapping[str, ListenOptions]
) -> AsyncIterator[dict[str, Daemon]]:
    """Serve ``host`` with one daemon per entry of ``servers``, mounted under its name.

    The host is the caller's, opened; this serves it and closes it on exit, after stopping the
    daemons and seeing each one's listener unmounted.
    """
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(host.serve)
            daemons = {}
            async with AsyncExitStack() as stack:
                for name, options in servers.items():
                    config = ServeConfig(
                        listen=(host.mount_address(name),),
                        child=ChildSpec(argv=example_server()),
                        listen_options=options,
                    )
                    daemon = Daemon(config)
                    await nursery.start(daemon.run)
                    stack.callback(daemon.stop)
                    daemons[name] = daemon
                yield daemons
            await poll(lambda: not host.mounts)  # each daemon closed its listener: unmounted
            nursery.cancel_scope.cancel()
    finally:
        await host.aclose()


async def echo_handler(incoming: Incoming) -> None:
    """Answer every request with an empty result (initialize with a legacy version's)."""
    async with incoming.establish() as channel:
        while True:
            try:
                message = await channel.receive()
            except (trio.EndOfChannel, trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if "id" in message and "method" in message:
                result = {"protocolVersion": LEGACY, "capabilities": {}, "serverInfo": {"name": "e"}}
                await channel.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
