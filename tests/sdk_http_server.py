"""A Streamable HTTP MCP server built with the official ``mcp`` SDK (2.x), for the HTTP client tests.

It is an independent implementation of the server side of Streamable HTTP: the SDK's session
manager serves legacy sessions (``initialize``, ``Mcp-Session-Id``, the standalone GET stream,
resumption from an event store) and, for requests whose ``MCP-Protocol-Version`` header is not a
handshake version, the 2026-07-28 single-exchange POSTs.

Usage: ``python tests/sdk_http_server.py --fd N [--json-response] [--retry-ms MS]``. The listening
socket is inherited (fd ``N``, bound and listening by the test), so the test knows the port before
the server starts, and a restarted server serves the same port with no window in which
connections are refused.

Tools:

* ``echo`` (``text``) and ``add`` (``a``, ``b``);
* ``slow`` (``steps``): reports progress ``1..steps`` of ``steps``, then returns ``"done"``;
* ``ask`` (``question``): elicits ``{"answer": str}`` from the client (a server-to-client request)
  and returns ``"you said <answer>"`` (or the action if the client declined);
* ``interrupted`` (``steps``): reports progress once, closes its event stream (2025-11-25 polling;
  needs the event store, always configured here), reports the rest, returns ``"resumed"``;
* ``announce``: sends ``notifications/tools/list_changed`` (it travels on the standalone GET
  stream, being unrelated to the request) and returns ``"announced"``;
* ``headers``: returns the request's ``Mcp-*`` headers as JSON (the test checks what the client
  sent);
* ``route`` (``region``, ``priority``): both annotated ``x-mcp-header`` (``Region``,
  ``Priority``); returns the ``Mcp-Param-*`` headers it received as JSON;
* ``wait_forever``: never returns (until cancelled).
"""

from __future__ import annotations

import argparse
import json
import socket
from typing import Annotated

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from pydantic import BaseModel, Field

server = MCPServer(name="mcp-bridge-sdk-http-test-server", version="1.0.0")


@server.tool(description="Return the given text unchanged.")
def echo(text: str) -> str:
    return text


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Report progress in steps, then return 'done'.")
async def slow(steps: int, ctx: Context) -> str:
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    return "done"


class Answer(BaseModel):
    answer: str


@server.tool(description="Ask the client a question (elicitation) and return its answer.")
async def ask(question: str, ctx: Context) -> str:
    result = await ctx.elicit(question, Answer)
    if result.action == "accept" and result.data is not None:
        return f"you said {result.data.answer}"
    return result.action


@server.tool(description="Close this call's event stream midway; the client resumes it.")
async def interrupted(steps: int, ctx: Context) -> str:
    await ctx.report_progress(1, steps)
    await ctx.close_sse_stream()
    for step in range(2, steps + 1):
        await ctx.report_progress(step, steps)
    return "resumed"


@server.tool(description="Tell the client that the tool list changed.")
async def announce(ctx: Context) -> str:
    await ctx.session.send_tool_list_changed()  # not request-scoped: the standalone stream
    return "announced"


@server.tool(description="The request's Mcp-* headers, as JSON.")
def headers(ctx: Context) -> str:
    received = ctx.headers or {}
    return json.dumps(
        {name.lower(): value for name, value in received.items() if name.lower().startswith("mcp-")}
    )


@server.tool(description="Route by region: its arguments are mirrored in Mcp-Param-* headers.")
def route(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
    priority: Annotated[int, Field(json_schema_extra={"x-mcp-header": "Priority"})],
    ctx: Context,
) -> str:
    received = ctx.headers or {}
    return json.dumps(
        {name.lower(): value for name, value in received.items() if name.lower().startswith("mcp-param-")}
    )


@server.tool(description="Never return.")
async def wait_forever() -> str:
    await anyio.sleep_forever()
    return "unreachable"


class MemoryEventStore(EventStore):
    """Every event kept in order; ids are their positions (the SDK examples' store, simplified)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, object]] = []

    async def store_event(self, stream_id, message):  # type: ignore[no-untyped-def]
        event_id = str(len(self.events) + 1)
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback):  # type: ignore[no-untyped-def]
        position = next((i for i, (eid, _, _) in enumerate(self.events) if eid == last_event_id), None)
        if position is None:
            return None
        stream_id = self.events[position][1]
        for event_id, stream, message in self.events[position + 1 :]:
            if stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))  # type: ignore[arg-type]
        return stream_id


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--json-response", action="store_true")
    parser.add_argument("--retry-ms", type=int, default=50)
    options = parser.parse_args()
    app = server.streamable_http_app(
        json_response=options.json_response,
        event_store=MemoryEventStore(),
        retry_interval=options.retry_ms,
        host="127.0.0.1",  # turns on the SDK's DNS-rebinding protection, as a real deployment would
    )
    listener = socket.socket(fileno=options.fd)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    anyio.run(uvicorn.Server(config).serve, [listener])


if __name__ == "__main__":
    main()
