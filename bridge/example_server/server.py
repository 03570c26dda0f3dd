"""The example server's state and handlers: one ``on_<method>`` per JSON-RPC method.

It reads and writes stdin/stdout itself (blocking, one request at a time); ``__main__`` feeds it
the lines of stdin and owns the process (signals, exit).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

from .tools import JSON, TOOLS, ToolError, text_result

LEGACY_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS = ("2026-07-28",)
SERVER_INFO = {"name": "mcp-bridge-example", "version": "1.0.0"}


class Server:
    """The server's state and its handlers, one ``on_<method>`` per JSON-RPC method.

    Args:
        options: the parsed command line (:func:`parse_args`), which switches faults on.
    """

    def __init__(self, options: argparse.Namespace) -> None:
        self.options = options
        self.requests_seen = 0
        self.replies_sent = 0
        self.grandchildren: list[subprocess.Popen[bytes]] = []
        self.deferred: list[bytes] = []  # lines read while a tool waited for a client's answer
        self.asks = 0
        self.initializes = 0
        self.cancelled: list[Any] = []  # requestIds of the notifications/cancelled received
        self.calls: dict[str, int] = {}  # tools/call requests received, by tool name

    def feed(self, line: bytes) -> None:
        """Handle one line read from stdin, then the lines deferred while a tool waited."""
        line = line.strip()
        if line:
            self.handle_line(line)
        while self.deferred:
            self.handle_line(self.deferred.pop(0))

    # -- output -------------------------------------------------------------------------------
    def write(self, message: JSON) -> None:
        """Write one message to stdout as a line and flush.

        Faults switched on from the command line happen here: a junk line before every Nth reply
        (``--junk-every``), and stdout closed after N replies (``--close-stdout-after``).
        """
        junk_every = self.options.junk_every
        if junk_every and "id" in message and (self.replies_sent + 1) % junk_every == 0:
            sys.stdout.buffer.write(b"this line is not JSON-RPC\n")
        line = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        sys.stdout.buffer.write(line.encode("utf-8") + b"\n")
        sys.stdout.buffer.flush()
        if "id" in message and "method" not in message:
            self.replies_sent += 1
            limit = self.options.close_stdout_after
            if limit is not None and self.replies_sent >= limit:
                os.close(1)
                time.sleep(3600)

    def reply(self, request_id: Any, result: JSON) -> None:
        """Answer request ``request_id`` with ``result``."""
        self.write({"jsonrpc": "2.0", "id": request_id, "result": result})

    def error(self, request_id: Any, code: int, message: str, data: Any = None) -> None:
        """Answer request ``request_id`` (``None``: unknown) with a JSON-RPC error."""
        error = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self.write({"jsonrpc": "2.0", "id": request_id, "error": error})

    # -- dispatch -----------------------------------------------------------------------------
    def handle_line(self, line: bytes) -> None:
        """Parse one line, dispatch it to its ``on_<method>`` handler (or crash: ``--crash-after``)."""
        try:
            message = json.loads(line)
        except ValueError:
            self.error(None, -32700, "Parse error")
            return
        if not isinstance(message, dict):
            self.error(None, -32600, "Invalid Request")
            return
        method = message.get("method")
        if method is None:
            return  # a response to a request we never send, ignore
        if "id" not in message:
            if method == "notifications/cancelled":
                self.cancelled.append((message.get("params") or {}).get("requestId"))
            return  # notifications need no answer
        request_id = message["id"]
        self.requests_seen += 1
        crash_once = self.options.crash_once_file
        if crash_once and os.path.exists(crash_once):
            pass  # crashed once already (in an earlier process)
        elif self.options.crash_after is not None and self.requests_seen > self.options.crash_after:
            if crash_once:
                open(crash_once, "w").close()
            sys.stderr.write(f"example server: crashing on request {self.requests_seen}\n")
            sys.stderr.flush()
            os._exit(3)
        params = message.get("params") or {}
        if method == "server/discover" and self.options.discover_hang:
            return  # never answered; later requests are
        handler = getattr(self, "on_" + method.replace("/", "_"), None)
        if method == "server/discover" and self.options.era == "legacy":
            handler = None  # a 2025 server does not know it
        if handler is None:
            self.error(request_id, -32601, f"Method not found: {method}")
            return
        try:
            result = handler(params, request_id)
        except ToolError as exc:
            result = {"content": [{"type": "text", "text": str(exc)}], "isError": True}
        if result is not None:
            if is_modern(params) and self.options.era != "legacy":
                result.setdefault("resultType", "complete")
            self.reply(request_id, result)

    def on_initialize(self, params: JSON, request_id: Any) -> JSON | None:
        """The legacy handshake; a ``--era modern`` server refuses it with ``-32022``."""
        self.initializes += 1
        requested = params.get("protocolVersion")
        if self.options.era == "modern":  # versioning.mdx: name the supported versions
            self.error(
                request_id,
                -32022,
                "Unsupported protocol version",
                {
                    "supported": list(MODERN_VERSIONS),
                    "requested": requested if isinstance(requested, str) else "",
                },
            )
            return None
        version = requested if requested in LEGACY_VERSIONS else LEGACY_VERSIONS[-1]
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": SERVER_INFO,
        }

    def on_server_discover(self, params: JSON, request_id: Any) -> JSON:
        """The 2026-07-28 ``server/discover``: the supported versions and capabilities."""
        return {
            "resultType": "complete",
            "supportedVersions": list(MODERN_VERSIONS),
            "capabilities": {"tools": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO},
            "ttlMs": 3_600_000,
            "cacheScope": "public",
        }

    def on_ping(self, params: JSON, request_id: Any) -> JSON:
        """Answer a ping with an empty result."""
        return {}

    def on_tools_list(self, params: JSON, request_id: Any) -> JSON:
        """The tools the module docstring lists; in 2026-07-28, a CacheableResult (its two hints)."""
        modern = is_modern(params) and self.options.era != "legacy"
        return {"tools": TOOLS, **({"ttlMs": 3_600_000, "cacheScope": "public"} if modern else {})}

    def on_tools_call(self, params: JSON, request_id: Any) -> JSON:
        """Run one tool (see the module docstring).

        Raises:
            ToolError: the tool is unknown (answered as an error result).
        """
        name = params.get("name")
        self.calls[str(name)] = self.calls.get(str(name), 0) + 1
        arguments = params.get("arguments") or {}
        if name == "echo":
            return text_result(str(arguments.get("text", "")))
        if name == "add":
            return text_result(str(arguments.get("a", 0) + arguments.get("b", 0)))
        if name == "sleep":
            token = (params.get("_meta") or {}).get("progressToken")
            if token is not None:  # tells the client the request has reached the server
                self.write(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": 0},
                    }
                )
            time.sleep(float(arguments.get("seconds", 0)))
            return text_result("slept")
        if name == "blob":
            return text_result("x" * int(arguments.get("size", 0)))
        if name == "progress":
            token = (params.get("_meta") or {}).get("progressToken")
            steps = int(arguments.get("steps", 0))
            for step in range(1, steps + 1):
                if token is not None:
                    self.write(
                        {
                            "jsonrpc": "2.0",
                            "method": "notifications/progress",
                            "params": {"progressToken": token, "progress": step, "total": steps},
                        }
                    )
            return text_result("done")
        if name == "ask_client":
            return text_result(self.ask_client(str(arguments.get("method", "roots/list"))))
        if name == "notify":
            self.write({"jsonrpc": "2.0", "method": str(arguments.get("method")), "params": {}})
            return text_result("sent")
        if name == "stats":
            seen = {"initialize": self.initializes, "cancelled": self.cancelled, "calls": self.calls}
            return text_result(json.dumps(seen))
        if name == "spawn_grandchild":
            child = subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL)
            self.grandchildren.append(child)
            return text_result(str(child.pid))
        raise ToolError(f"Unknown tool: {name}")

    def on_subscriptions_listen(self, params: JSON, request_id: Any) -> JSON:
        """2026-07-28 subscriptions: acknowledge, send one tagged update, end at once."""
        tag = {"io.modelcontextprotocol/subscriptionId": request_id}
        self.write(
            {
                "jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": {"_meta": tag, "notifications": params.get("notifications", {})},
            }
        )
        self.write(
            {
                "jsonrpc": "2.0",
                "method": "notifications/resources/updated",
                "params": {"_meta": tag, "uri": "example://updated"},
            }
        )
        return {"resultType": "complete", "_meta": tag}

    def ask_client(self, method: str) -> str:
        """Send the client a request and wait for its answer (other lines are handled after)."""
        self.asks += 1
        ask_id = f"ask-{self.asks}"
        self.write({"jsonrpc": "2.0", "id": ask_id, "method": method, "params": {}})
        while raw := sys.stdin.buffer.readline():
            try:
                message = json.loads(raw)
            except ValueError:
                message = None
            if isinstance(message, dict) and message.get("id") == ask_id and "method" not in message:
                return json.dumps(message.get("result", message.get("error")), sort_keys=True)
            self.deferred.append(raw.strip())
        return "no answer: stdin closed"


def is_modern(params: JSON) -> bool:
    """Whether a request's ``params`` carry the 2026-07-28 protocol version in ``_meta``."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and "io.modelcontextprotocol/protocolVersion" in meta
