"""OpenSSL loaded when something first uses it, not because trio was imported.

trio imports :mod:`ssl` (for ``trio.SSLStream``) and :mod:`hmac` (for ``trio.DTLSEndpoint``'s
cookies) as it is imported, and both load OpenSSL's ``libcrypto``: measured in this daemon,
importing trio and the daemon's modules takes 28.9 MiB of RSS with them and 23.9 without, the
library's pages and the two modules' objects. trio uses neither until a TLS stream or a DTLS
endpoint is made, and a bridge that serves Unix sockets, TCP, WebSocket or HTTP without TLS or
bearer tokens never does.

:func:`defer_openssl` puts a :class:`Deferred` stand-in in :data:`sys.modules` for each of
:data:`DEFERRED`; an ``import`` of one then binds the stand-in, and the first attribute read off it
imports the real module, which replaces the stand-in in :data:`sys.modules` and whose namespace the
stand-in takes, so that a module that bound it sees the real module's names from then on.
:class:`importlib.util.LazyLoader` would do the same but for Python 3.11's ``import`` statement,
which reads ``__spec__`` off a module already in :data:`sys.modules` and so loads it at once.

Only the command line calls it, before anything imports trio (:func:`.main.main`); a program
that embeds the bridge imports trio, and OpenSSL with it, itself.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from typing import Any

# The modules whose import loads libcrypto, imported by trio or websockets without being used:
# ssl (_ssl), hashlib (_hashlib), hmac (which imports _hashlib) and secrets (which imports hmac).
DEFERRED = ("ssl", "hashlib", "hmac", "secrets")

# A child's start runs in a thread (bridge._child.process): two threads may read a stand-in first.
# Reentrant: a real module's import may read another stand-in (secrets imports from hmac).
_LOADING = threading.RLock()


class Deferred(types.ModuleType):
    """Stands in :data:`sys.modules` for a module not imported yet; imports it on first use."""

    def __getattr__(self, name: str) -> Any:
        # Only names the stand-in lacks come here: once loaded it has them all.
        return getattr(load(self), name)


def defer_openssl() -> None:
    """Put a stand-in in :data:`sys.modules` for each of :data:`DEFERRED` not imported yet."""
    for name in DEFERRED:
        if name in sys.modules:
            continue
        stand_in = Deferred(name)
        # The real spec, so that importlib sees a module that is neither missing nor initialising;
        # finding it reads a directory listing and imports nothing.
        stand_in.__spec__ = importlib.util.find_spec(name)
        sys.modules[name] = stand_in


def load(stand_in: Deferred) -> types.ModuleType:
    """Import the module ``stand_in`` stands for, in its place, and give ``stand_in`` its names."""
    name = stand_in.__name__
    with _LOADING:
        if sys.modules.get(name) is stand_in:
            del sys.modules[name]
            try:
                real = importlib.import_module(name)
            except BaseException:
                sys.modules[name] = stand_in
                raise
            stand_in.__dict__.update(real.__dict__)
        else:
            real = sys.modules[name]
    return real
