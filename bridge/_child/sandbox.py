"""``--sandbox``'s settings: :class:`Sandbox`, a value fixed with the configuration.

What a sandboxed child sees and how the sandbox is made is :mod:`.bwrap`'s, which is imported only
where a child is sandboxed: a bridge that sandboxes nothing keeps none of it (docs/security.md,
"Sandboxing children").
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs


def _paths(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(items)


@attrs.frozen
class Sandbox:
    """How a child is sandboxed with bubblewrap. Fixed with the configuration.

    Attributes:
        network: keep the host's network (default: a network namespace with only loopback).
        read_write: absolute paths the child may write (bound read-write at the same place).
        read_only: absolute paths made visible read-only (useful under a hidden directory).
        hide: files made unreadable (a device node on a nodev mount: EACCES) and directories
            emptied: the bridge's own secrets.
        bwrap: the bwrap executable: a name looked up in ``PATH``, or a path.
    """

    network: bool = False
    read_write: tuple[str, ...] = attrs.field(default=(), converter=_paths)
    read_only: tuple[str, ...] = attrs.field(default=(), converter=_paths)
    hide: tuple[str, ...] = attrs.field(default=(), converter=_paths)
    bwrap: str = "bwrap"
