"""The MCP-over-HTTP rules, sans-IO: what the HTTP transport must know of MCP, and nothing else.

``headers`` reads and writes the 2026-07-28 request headers, ``admission`` decides what happens to
a request before anything reaches a child, ``modern`` holds the 2026-07-28 server-side checks,
``refusal`` turns a refusal into an HTTP status with a JSON-RPC error body, and ``client`` and
``params`` are the client's side of the same rules.

Import rule: ``channels._core`` only, and no trio: used by ``channels._http`` alone.
"""

__all__: list[str] = []  # nothing here is public: the HTTP channels use it
