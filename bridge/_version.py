"""The version of mcp-bridge: written here once, read by the build and by the running bridge.

``pyproject.toml`` takes the distribution's version from this module (setuptools reads the
assignment without importing the package), so the bridge never asks ``importlib.metadata``: that
lookup loads the ``email``, ``zipfile`` and ``csv`` packages, 1.25 MiB of the daemon's memory for
the rest of its life, measured in a process that had imported the daemon already.
"""

__version__ = "0.1.0"
