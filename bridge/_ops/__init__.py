"""Operating daemons: the fleet one process runs, the admin endpoint, metrics, systemd, logs.

Import rule: ``channels`` and every ``bridge`` room but ``_cli``.
"""

__all__: list[str] = []  # nothing here is public
