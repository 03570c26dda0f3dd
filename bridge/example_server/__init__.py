"""A small MCP server on stdio, standard library only: the Quickstart's child, and the tests'.

By default it serves both protocol eras: the legacy ``initialize`` handshake (2024-11-05 to
2025-11-25) and the modern stateless era (2026-07-28, ``server/discover`` and per-request ``_meta``).
It exists so that the README's quickstart has something to bridge, and so that the tests and the
benchmark have a real child process whose faults can be switched on from the command line::

    python3 -m bridge.example_server [--crash-after N] [--junk-every N] [--stderr-flood N]
                                     [--ignore-stdin-eof] [--ignore-sigterm] [--close-stdout-after N]
                                     [--crash-once-file PATH] [--era {dual,legacy,modern}]
                                     [--discover-hang]

``python3 bridge/example_server ...`` (the directory, from any working directory) runs the same
server from the tree it lives in; the tests and the benchmark start it so.

``--era`` picks which eras it serves, for testing the bridge's era probe (``bridge/_shared/eras.py``):
``dual`` (the default) serves both, as above; ``legacy`` is a 2025-11-25 server: it does not know
``server/discover`` (``-32601`` Method not found, as for any unknown method) and ignores ``_meta``
(no ``resultType`` in its results); ``modern`` is a 2026-07-28-only server: it answers
``initialize`` with ``-32022`` UnsupportedProtocolVersion naming its versions in
``data.supported`` (and the client's in ``data.requested``), and serves everything else as ``dual``
does. ``--discover-hang`` never answers ``server/discover`` (a legacy server that drops unknown
requests, for the probe's timeout) but goes on answering the requests that follow it.

Tools: ``echo`` (``text`` → the same text), ``add`` (``a`` + ``b``), ``sleep`` (``seconds``, then
"slept"; with a ``progressToken`` it first sends one progress notification, so a client knows the
request has arrived), ``blob`` (``size`` → a text of that many bytes), ``progress`` (``steps`` progress
notifications on the request's ``progressToken``, then "done"), ``ask_client`` (sends the client a
request such as ``roots/list`` and answers with the client's answer), ``notify`` (sends a
notification that belongs to no request, such as ``notifications/tools/list_changed``),
``stats`` (what this process has seen: ``initialize`` requests, cancelled ids, tools called),
``spawn_grandchild`` (starts a ``sleep`` in the server's process group and answers with its pid).
``subscriptions/listen`` (2026-07-28) is acknowledged, sends one tagged update and ends at once.

Requests are answered one at a time, in order.

Modules: ``tools`` (the tools' list and the result helpers), ``server`` (the server's state and one
handler per JSON-RPC method), ``__main__`` (the command line and the stdin loop).

Import rule: the standard library only (and this package's own modules). It is run, never imported
by the bridge, and must stay runnable on a bare Python 3.11 without the project's dependencies
(importing ``bridge`` on the way loads nothing: its names are imported on first use).
"""
