"""Public names that live in private modules: make them say so in reprs and tracebacks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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
