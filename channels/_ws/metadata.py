"""``importlib.metadata`` loaded on first use: the websockets library imports it for nothing.

``websockets/version.py`` begins with ``import importlib.metadata``, which it reads only in a
development checkout of the library (``released = False``); a release never touches it. The
import alone brings in ``email``, ``zipfile``, ``csv``, ``calendar`` and their kin, 31 modules:
1.2 MiB of a WebSocket daemon's RSS for its whole life (``VmRSS`` before and after importing it
over a serving daemon's modules). :func:`defer_importlib_metadata` registers the module first,
its code not yet run: the first attribute anyone reads from it runs that code, in that same
module object, so every user still gets the whole module.

:class:`importlib.util.LazyLoader` cannot do this: an ``import`` statement of a module already in
``sys.modules`` reads its ``__spec__``, which makes a lazy module load at once.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from types import ModuleType

NAME = "importlib.metadata"


def defer_importlib_metadata() -> None:
    """Register ``importlib.metadata`` to run when first used, unless it is imported already."""
    if NAME in sys.modules:
        return
    spec = importlib.util.find_spec(NAME)
    if spec is None or spec.loader is None:  # pragma: no cover - the standard library has it
        return
    loader = spec.loader
    module = importlib.util.module_from_spec(spec)  # __spec__, __path__...: its submodules import
    lock = threading.Lock()  # two threads reading it first run its code once

    def load(attribute: str) -> object:
        with lock:
            if module.__dict__.get("__getattr__") is load:
                del module.__getattr__
                spec._initializing = True  # type: ignore[attr-defined]  # as the import system marks a running module
                try:
                    loader.exec_module(module)
                finally:
                    spec._initializing = False  # type: ignore[attr-defined]
        return ModuleType.__getattribute__(module, attribute)

    module.__getattr__ = load  # type: ignore[method-assign]  # PEP 562: missing attributes only
    sys.modules[NAME] = module
    importlib.metadata = module  # as an import binds a submodule
