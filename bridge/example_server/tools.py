"""The example server's tools, as ``tools/list`` lists them, and the shapes of a tool's result.

What each tool does is in the package docstring; ``server.Server.on_tools_call`` runs them.
"""

from __future__ import annotations

from typing import Any

TOOLS = [
    {
        "name": "echo",
        "description": "Return the given text unchanged.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
    {
        "name": "add",
        "description": "Add two numbers.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
    {
        "name": "sleep",
        "description": "Wait the given number of seconds, then answer.",
        "inputSchema": {
            "type": "object",
            "properties": {"seconds": {"type": "number"}},
            "required": ["seconds"],
        },
    },
    {
        "name": "blob",
        "description": "Return a text of the given size in bytes.",
        "inputSchema": {
            "type": "object",
            "properties": {"size": {"type": "integer", "minimum": 0}},
            "required": ["size"],
        },
    },
    {
        "name": "progress",
        "description": "Send the given number of progress notifications, then answer.",
        "inputSchema": {
            "type": "object",
            "properties": {"steps": {"type": "integer", "minimum": 0}},
            "required": ["steps"],
        },
    },
    {
        "name": "ask_client",
        "description": "Send the client a request (e.g. roots/list), wait for its answer, return it.",
        "inputSchema": {
            "type": "object",
            "properties": {"method": {"type": "string"}},
            "required": ["method"],
        },
    },
    {
        "name": "notify",
        "description": "Send a notification that belongs to no request (e.g. a list change).",
        "inputSchema": {
            "type": "object",
            "properties": {"method": {"type": "string"}},
            "required": ["method"],
        },
    },
    {
        "name": "stats",
        "description": "What this process has seen: initialize requests, cancelled ids, tools called.",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "spawn_grandchild",
        "description": "Start a long sleep in this server's process group; answer with its pid.",
        "inputSchema": {"type": "object", "properties": {}},
    },
]


JSON = dict[str, Any]


class ToolError(Exception):
    """A tool call whose arguments are wrong: reported as an error result, as MCP asks."""


def text_result(text: str) -> JSON:
    """A successful ``tools/call`` result holding one text item."""
    return {"content": [{"type": "text", "text": text}], "isError": False}
