"""Modules the daemon's libraries import for nothing, run only when something first uses them.

trio, websockets and the standard library import modules that a daemon never uses but that cost
it memory for its whole life (:data:`DEFERRED` says which and why; measured as ``VmRSS`` of a
process that imported trio and the daemon's modules with and without them):

- OpenSSL, about 5 MiB: trio imports :mod:`ssl` (for ``trio.SSLStream``) and :mod:`hmac` (for
  ``trio.DTLSEndpoint``'s cookies), websockets :mod:`secrets`, and each maps ``libcrypto``. A
  daemon that serves no TLS, checks no token and accepts no WebSocket handshake (a SHA-1, by
  :mod:`hashlib`) never uses it.
- :mod:`importlib.metadata`, 1.2 MiB: ``websockets/version.py`` imports it, and reads it only in
  a development checkout of the library; its code brings in ``email``, ``zipfile``, ``csv`` and
  their kin.
- :mod:`bz2` and :mod:`lzma`, 0.4 MiB: :mod:`shutil` imports them to know which archive formats
  it can write (``ctypes.util`` imports shutil, and trio ``ctypes.util`` to name its threads).
- ``idna``, 0.17 MiB of tables: trio imports it to encode a host name that is not ASCII, which a
  daemon listening on addresses or ASCII names never has.

:func:`defer_imports` registers each of them in :data:`sys.modules` as the module object an import
would make, its code not yet run; the first attribute anyone reads from it runs that code, in that
same object, so every user gets the whole module and the same one. An ``import`` binds it without
reading anything. :class:`importlib.util.LazyLoader` cannot do this: Python 3.11's ``import``
statement reads ``__spec__`` off a module already in :data:`sys.modules`, which makes a lazy
module load at once.

Only the command line calls it (:func:`.main.main`), before it imports trio: which modules a
process loads is the program's business, and a program that embeds the bridge imports trio, and
these with it, itself.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any

# Each module run on first use, and who imports it without using it (module docstring).
DEFERRED = (
    "ssl",  # trio (SSLStream): OpenSSL
    "hashlib",  # hmac, secrets: OpenSSL
    "hmac",  # trio (DTLS cookies): OpenSSL
    "secrets",  # websockets (client masks and keys): hmac, and OpenSSL
    "importlib.metadata",  # websockets' version module: email, zipfile, csv
    "bz2",  # shutil (archive formats), through ctypes.util and trio
    "lzma",  # likewise
    "idna",  # trio (host names that are not ASCII): its tables
)


def defer_imports(names: tuple[str, ...] = DEFERRED) -> None:
    """Register each of ``names`` to run on first use, unless it is imported already."""
    for name in names:
        if name not in sys.modules:
            defer_import(name)


def defer_import(name: str) -> None:
    """Register the module ``name`` (whose parent package is imported) to run on first use."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:  # not installed: an import will say so
        return
    loader = spec.loader
    module = importlib.util.module_from_spec(spec)  # __spec__, __path__...: its submodules import
    # Two threads may read it first (a child starts in a thread); its own code may read another
    # deferred module (secrets reads hmac): reentrant, and a read of this module's names by its
    # own code, in that thread, meets a module still running, as it would in any import.
    lock = threading.RLock()
    running = False

    def run_on_first_use(attribute: str) -> Any:
        nonlocal running
        with lock:
            if module.__dict__.get("__getattr__") is run_on_first_use:
                if running:  # its own code reads a name it has not defined yet
                    raise AttributeError(
                        f"partially initialized module {name!r} has no attribute {attribute!r}"
                    )
                running = True
                spec._initializing = True  # type: ignore[attr-defined]  # as the import system marks a running module
                try:
                    loader.exec_module(module)
                except BaseException:
                    running = False
                    sys.modules.pop(name, None)  # as a failed import: the next one starts afresh
                    raise
                finally:
                    spec._initializing = False  # type: ignore[attr-defined]
                if module.__dict__.get("__getattr__") is run_on_first_use:  # not its own (PEP 562)
                    del module.__getattr__
        return ModuleType.__getattribute__(module, attribute)

    module.__getattr__ = run_on_first_use  # type: ignore[method-assign]  # PEP 562: missing names only
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)  # as an import binds a submodule
