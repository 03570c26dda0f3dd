"""Public names that live in private modules: make them say so in reprs and tracebacks."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import Any


def fixup_module_metadata(package: str, names: Iterable[str], namespace: Mapping[str, Any]) -> None:
    """Give each public class and function of ``package`` the module name users import it from.

    A class defined in ``channels._core.stream`` and exported as ``channels.StreamChannel`` then
    shows as ``channels.StreamChannel`` in reprs, tracebacks and the docs, as trio's
    ``fixup_module_metadata`` does for its own names. Constants and aliases are left alone.
    """
    for name in names:
        value = namespace[name]
        module = getattr(value, "__module__", None)
        if isinstance(module, str) and module.startswith(f"{package}._") and hasattr(value, "__qualname__"):
            if value.__qualname__ == name:
                value.__module__ = package


def import_on_first_use(
    package: str, deferred: Mapping[str, str], namespace: MutableMapping[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) for ``package`` that imports names on first use.

    Each name in ``deferred`` is imported from its module (``deferred[name]``, relative to
    ``package``) when first asked for, then kept in ``namespace`` (the package's globals) so that
    the next lookup does not come here.
    """

    def __getattr__(name: str) -> Any:
        module = deferred.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return __getattr__
