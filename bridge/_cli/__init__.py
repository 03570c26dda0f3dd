"""The ``mcp-bridge`` command line: the parsers, the commands, and the configuration file.

``main`` is the entry point: it answers ``--version`` alone from ``version`` before anything heavy
is imported, and hands every other command line to ``commands``, which dispatches and turns
failures into ``exits`` codes. Each command
has its parser and its run: ``serve_parser`` and ``serve`` (which also holds ``check-config``),
``connect_parser`` and ``connect``; ``arguments`` holds what the parsers share. ``config`` reads
``--config FILE`` (its shape is ``schema``, a client's JSON form ``mcp_servers``) into the same
records the command line builds; ``loaders`` reads tokens, metadata documents and user and group
names for both.

Import rule: anything in ``channels`` and ``bridge``; nothing imports this room but
``bridge.__main__`` and the console script.
"""

__all__: list[str] = []  # nothing here is public
