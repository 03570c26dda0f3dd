"""The daemon: listeners, children per connection or shared, graceful stop; and the embedding API.

``daemon`` runs it (listeners, the stop sequence), ``services`` starts and stops its shared child
and warm pool (eagerly, lazily or on demand, counting users with ``usage``), ``connection`` serves
each accepted connection, ``statistics`` counts, ``config`` says what to serve; ``api`` is the
embedding API.

Import rule: ``channels`` and every ``bridge`` room above ``_ops``: ``_errors``, ``_limits``,
``_child``, ``_relay`` and ``_shared``.
"""

from .api import open_bridge, stop_budget
from .config import ServeConfig
from .daemon import Daemon
from .statistics import DaemonStatistics

__all__ = ["Daemon", "DaemonStatistics", "ServeConfig", "open_bridge", "stop_budget"]
