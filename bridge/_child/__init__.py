"""Child processes: launching an MCP server, its stderr, its supervision and a warm pool.

``process`` launches argv in its own process group and stops it in MCP order; ``bwrap`` wraps
that argv in bubblewrap (``--sandbox``; ``sandbox`` holds its settings); ``stderr`` turns its
stderr into log lines; ``supervisor`` keeps a shared child alive with backoff (``restarts``
holds its policy); ``pool`` starts per-connection children ahead of their connection.

Import rule: ``channels``, ``bridge._errors`` and ``bridge._limits``.
"""

from .process import ChildProcess, ChildSpec, describe_exit, open_child
from .restarts import CrashLoop, RestartPolicy
from .sandbox import Sandbox

__all__ = [
    "ChildProcess",
    "ChildSpec",
    "CrashLoop",
    "RestartPolicy",
    "Sandbox",
    "describe_exit",
    "open_child",
]
