"""The client end of Streamable HTTP, as a message channel (``mcp-bridge connect http://...``).

``channel`` is the :class:`~channels.HttpClientChannel`; ``conn`` its HTTP/1.1 connections (h11)
and keep-alive pool; ``dispatch`` decides which exchange each message becomes; ``exchange`` runs
those exchanges; ``session`` is the client's view of a legacy session and ``standalone`` its
standalone GET stream; ``stream`` reads an event stream and remembers where to resume.

Import rule: ``channels._core``, ``channels._sockets``, ``channels._mcp`` and ``channels._http.sse``.
"""
