"""Shared mode: one supervised child serves every client, and the era probe that picks the mode.

``router`` is the sans-IO routing core (ids, progress tokens, cancellations, subscriptions);
``mux`` runs it over real channels, wiring ``clients`` (each client's queue, writer and reader),
``admission`` (what a client message becomes at the child; request timeouts), ``handshake`` (the
legacy ``initialize`` the bridge owns) and ``link`` (the child: writing to it, reading it, routing
its messages back); ``eras`` probes a child with ``server/discover``.

Import rule: ``channels``, ``bridge._errors``, ``bridge._limits``, ``bridge._child`` and
``bridge._relay``.
"""

__all__: list[str] = []  # nothing here is public
