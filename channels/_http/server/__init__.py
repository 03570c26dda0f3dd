"""The HTTP listener: connections, routes, legacy sessions and response streams.

``front`` is the connection loop of a socket (slots, deadlines, TLS) and routes each request by
its exact path (``routing``: what a shared host refuses first) to a ``service``, one per MCP
endpoint (its checks, sessions and routes; ``proxying``: CORS and forwarded headers); ``conn``
is one HTTP/1.1 connection with its limits, ``request`` the parsing of its requests (httptools)
and their head checks; ``endpoint``
is the MCP endpoint (POST, GET, DELETE) and ``legacy`` the 2024-11-05 HTTP+SSE endpoints;
``call`` is one request being answered; ``session``, ``exchange`` and ``stream`` turn sessions
and responses into message channels (``backlog`` bounds what they queue); ``response`` writes a
stream out as one JSON body or as server-sent events.

Import rule: ``channels._core``, ``channels._sockets``, ``channels._mcp`` and ``channels._http.sse``.
"""
