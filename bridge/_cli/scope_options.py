"""``--tool-scope PATTERN=SCOPE[,SCOPE...]``: per-tool scopes on the command line, to :class:`ToolScopes`.

The configuration file's form is ``tool_scopes = { "delete_*" = ["mcp:admin"] }`` per server
(:mod:`.config`); both end in :func:`~bridge._relay.scopes.tool_rules`, which checks the rules.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from .._errors import ConfigError
from .._relay.scopes import ToolScopes, tool_rules


def add_tool_scopes(group: argparse._ArgumentGroup) -> None:
    """The ``--tool-scope`` option (docs/security.md, "Per-tool scopes")."""
    group.add_argument(
        "--tool-scope",
        action="append",
        default=[],
        metavar="PATTERN=SCOPE[,SCOPE...]",
        help="tools whose name matches PATTERN (fnmatch: *, ?, [...]) need these OAuth scopes; "
        "others do not see them in tools/list, and their calls are refused with -31005 "
        "(repeatable; a tool matching several patterns needs all their scopes; callers without "
        "an OAuth token hold no scope), e.g. 'delete_*=mcp:admin'",
    )


def build_tool_scopes(items: Sequence[str]) -> ToolScopes:
    """The command line's per-tool scopes (empty without ``--tool-scope``).

    Raises:
        ConfigError: an item without ``=``, an empty pattern or scope, or a bad scope.
    """
    rules: dict[str, list[str]] = {}
    for item in items:
        pattern, equals, scopes = item.partition("=")
        if not equals or not pattern or not scopes:
            raise ConfigError(
                f"--tool-scope {item!r}: expected PATTERN=SCOPE[,SCOPE...], e.g. 'delete_*=mcp:admin'"
            )
        listed = [scope.strip() for scope in scopes.split(",")]
        if not all(listed):
            raise ConfigError(f"--tool-scope {item!r}: an empty scope; separate scopes with single commas")
        rules.setdefault(pattern, []).extend(listed)
    return ToolScopes(tool_rules(rules, "--tool-scope"))
