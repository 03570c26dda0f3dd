"""The ``mcp-bridge`` command line: the parser, the commands, and the configuration file.

``main`` is the entry point; ``config`` reads ``--config FILE``; ``connect`` runs
``mcp-bridge connect ADDRESS``.

Import rule: anything in ``channels`` and ``bridge``; nothing imports this room but
``bridge.__main__`` and the console script.
"""

__all__: list[str] = []  # nothing here is public
