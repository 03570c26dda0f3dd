"""The daemon: listeners, children per connection or shared, graceful stop; and the embedding API.

Import rule: ``channels`` and every ``bridge`` room above ``_ops``: ``_errors``, ``_limits``,
``_child``, ``_relay`` and ``_shared``.
"""

from .api import open_bridge, stop_budget
from .daemon import Daemon, DaemonStatistics, ServeConfig

__all__ = ["Daemon", "DaemonStatistics", "ServeConfig", "open_bridge", "stop_budget"]
