"""A stdio MCP server built with the official ``mcp`` SDK (2.x), for the end-to-end tests.

It is an independent implementation of the server side: the tests put it behind the bridge
and check that an SDK client reaches it unchanged. ``MCPServer.run("stdio")`` serves both
protocol eras on one stdio connection (the SDK's ``serve_dual_era_loop``): a client that opens
with ``initialize`` gets the legacy handshake era, a client whose first request carries the
2026-07-28 ``_meta`` envelope gets the modern stateless era.

Tools: ``echo`` (``text`` → the same text) and ``add`` (``a`` + ``b``).

With ``--extra-tools`` (the shared-mode tests) three more; they are opt-in so that the other
tests still see exactly ``echo`` and ``add``:

* ``slow`` (``seconds``, ``steps``): reports progress ``1..steps`` of ``steps`` through the SDK's
  ``Context.report_progress``, the first at once, sleeping ``seconds / steps`` after each; returns
  ``"done"``. A call cancelled by the client is counted;
* ``cancelled_slow_calls`` (``at_least``): waits until at least that many ``slow`` calls have been
  cancelled, then returns how many were (the test bounds the wait with its own timeout);
* ``blob`` (``size``, ``seconds`` 0 by default): a text of ``size`` bytes (``"x"`` repeated),
  unstructured, so the reply carries it once, after sleeping ``seconds``.

With ``--client-tools`` (the HTTP tests) two tools that ask the client back, in the legacy era
(a server-to-client request, answered by the SDK client's callback):

* ``ask_client`` (``prompt``): sends ``sampling/createMessage`` with the prompt as the one user
  message and returns the text the client's sampling callback answered;
* ``client_roots``: sends ``roots/list`` and returns the root URIs, one a line.

With ``--crash-tools`` (the HTTP restart tests) two more:

* ``pid``: the server's process id (a restarted child has a new one);
* ``crash``: the process exits at once with status 3, before replying.

Run as a script (``python tests/sdk_server.py [--extra-tools] [--client-tools] [--crash-tools]``); it
needs the ``mcp`` package, not the bridge.
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import SamplingMessage, TextContent

server = MCPServer(name="mcp-bridge-sdk-test-server", version="1.0.0")


@server.tool(description="Return the given text unchanged.")
def echo(text: str) -> str:
    return text


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


class _Cancellations:
    """How many ``slow`` calls were cancelled, and a way to wait for that number to grow."""

    count = 0
    changed: anyio.Event | None = None  # created inside the event loop, by the first waiter

    @classmethod
    def add(cls) -> None:
        cls.count += 1
        if cls.changed is not None:
            cls.changed.set()
            cls.changed = None

    @classmethod
    async def wait(cls) -> None:
        if cls.changed is None:
            cls.changed = anyio.Event()
        await cls.changed.wait()


async def slow(seconds: float, steps: int, ctx: Context) -> str:
    try:
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
            await anyio.sleep(seconds / steps)
    except anyio.get_cancelled_exc_class():
        _Cancellations.add()
        raise
    return "done"


async def cancelled_slow_calls(at_least: int) -> int:
    while _Cancellations.count < at_least:
        await _Cancellations.wait()
    return _Cancellations.count


async def blob(size: int, seconds: float = 0.0) -> str:
    await anyio.sleep(seconds)
    return "x" * size


async def ask_client(prompt: str, ctx: Context) -> str:
    answer = await ctx.session.create_message(
        [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=100,
    )
    assert isinstance(answer.content, TextContent), answer
    return answer.content.text


async def client_roots(ctx: Context) -> str:
    listed = await ctx.session.list_roots()
    return "\n".join(str(root.uri) for root in listed.roots)


def pid() -> int:
    return os.getpid()


def crash() -> str:
    print(f"sdk_server: pid {os.getpid()} exits on request", file=sys.stderr, flush=True)
    os._exit(3)


if __name__ == "__main__":
    if "--extra-tools" in sys.argv[1:]:
        server.tool(description="Report progress in steps, sleeping between them; return 'done'.")(slow)
        server.tool(description="Wait until at least N slow calls were cancelled; return how many.")(
            cancelled_slow_calls
        )
        server.tool(
            description="A text of the given size, after the given seconds.", structured_output=False
        )(blob)
    if "--client-tools" in sys.argv[1:]:
        server.tool(description="Ask the client to sample a message; return its text.")(ask_client)
        server.tool(description="Ask the client for its roots; return their URIs, one a line.")(client_roots)
    if "--crash-tools" in sys.argv[1:]:
        server.tool(description="This server's process id.")(pid)
        server.tool(description="Exit the process at once, without replying.")(crash)
    server.run("stdio")
