"""Per-tool scopes: which OAuth scopes a caller needs for each tool, and what it may see (sans-IO).

A server's configuration may require scopes per tool name pattern (``tool_scopes`` in the
configuration file, ``--tool-scope`` on the command line; docs/security.md, "Per-tool scopes").
:class:`ToolScopes` is that policy as a value. Both child modes ask it, with the scopes of the
caller's channel (``peer.scopes``: those of its OAuth access token, none for a peer without one):
the per-connection relay (:mod:`.to_child`, :mod:`.to_client`) and shared mode
(:mod:`bridge._shared.admission`, :mod:`bridge._shared.link`), so that

* a ``tools/call`` of a tool the caller may not call is answered with ``-31005``
  (``insufficient-scope``, naming the tool and the scopes it lacks) and never reaches the child;
* each ``tools/list`` reply (every page) lists only the tools the caller may call, and is marked
  ``cacheScope: "private"`` (2026-07-28): what it lists depends on the caller.

A tool that matches several patterns needs the scopes of all of them, so the order of the rules
never weakens one: a broad rule cannot shadow a stricter one. A caller with no OAuth token (a
static token, a Unix peer, no authentication) holds no scope: the tools that need one are hidden
from it and refused (secure by default).
"""

from __future__ import annotations

import fnmatch
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from channels import JSONObject, PeerInfo

from .._errors import ConfigError, insufficient_scope

logger = logging.getLogger("bridge.scopes")

# A scope as RFC 6749 §3.3 defines it: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ), that is
# printable ASCII but space, '"' and '\'. The scopes of a token are space-separated.
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
# A 2026-07-28 result's cacheScope that forbids shared caches (the schema's CacheableResult:
# "private" or "public", as HTTP's Cache-Control).
PRIVATE = "private"


@attrs.frozen
class ToolRule:
    """One rule: tools whose name matches ``pattern`` need every scope in ``scopes``.

    Patterns are ``fnmatch``'s (``*``, ``?``, ``[...]``), matched case-sensitively against the
    whole name.
    """

    pattern: str
    scopes: frozenset[str]
    _regex: re.Pattern[str] = attrs.field(init=False, eq=False, repr=False)

    @_regex.default
    def _compile(self) -> re.Pattern[str]:
        return re.compile(fnmatch.translate(self.pattern))

    def matches(self, tool: str) -> bool:
        return self._regex.match(tool) is not None


def tool_rules(rules: Mapping[str, Iterable[str]], where: str) -> tuple[ToolRule, ...]:
    """Checked rules from ``{pattern: [scope, ...]}``, in the mapping's order.

    Raises:
        ConfigError: an empty pattern, no scope, or a scope that is not an RFC 6749 scope token;
            naming ``where`` (a file's field, ``servers.NAME.tool_scopes``, or an option,
            ``--tool-scope``) and the fix.
    """
    checked = []
    for pattern, scopes in rules.items():
        if not isinstance(pattern, str) or not pattern:
            raise ConfigError(f'{where}: a tool name pattern is empty; write one such as "delete_*"')
        at = f"{where} {pattern!r}" if where.startswith("--") else f"{where}.{pattern}"
        if isinstance(scopes, str):
            raise ConfigError(f'{at}: expected a list of scopes, such as ["mcp:admin"]')
        scopes = list(scopes)
        if not scopes:
            raise ConfigError(
                f"{at}: expected at least one scope (a tool that matches no "
                "pattern needs none: remove the rule)"
            )
        for scope in scopes:
            if not isinstance(scope, str) or not _SCOPE_TOKEN.fullmatch(scope):
                raise ConfigError(
                    f"{at}: {scope!r} is not a scope (printable ASCII without "
                    "spaces, quotes or backslashes, as in OAuth tokens: RFC 6749 §3.3)"
                )
        checked.append(ToolRule(pattern, frozenset(scopes)))
    return tuple(checked)


def _rules(value: Iterable[ToolRule] | Mapping[str, Iterable[str]]) -> tuple[ToolRule, ...]:
    if isinstance(value, Mapping):
        return tool_rules(value, "tool_scopes")
    return tuple(value)


@attrs.frozen
class ToolScopes:
    """The scopes each tool needs: a plain value, it owns nothing. Empty (the default): none.

    Args:
        rules: :class:`ToolRule` values, or a mapping ``{"delete_*": ["mcp:admin"]}`` (checked:
            :class:`~bridge.ConfigError` names the bad rule).
    """

    rules: tuple[ToolRule, ...] = attrs.field(default=(), converter=_rules)

    def __bool__(self) -> bool:
        return bool(self.rules)

    @property
    def scopes_supported(self) -> tuple[str, ...]:
        """Every scope some rule requires, sorted: for protected-resource metadata (RFC 9728)."""
        return tuple(sorted({scope for rule in self.rules for scope in rule.scopes}))

    def required(self, tool: object) -> frozenset[str]:
        """The scopes calling ``tool`` needs: those of every rule whose pattern it matches.

        A name that is not a string cannot be matched, and a server might still read it as one
        (JavaScript turns ``["delete_all"]`` into ``"delete_all"`` as a property key): it needs
        every scope any rule requires.
        """
        if not isinstance(tool, str):
            return frozenset(self.scopes_supported)
        needed: frozenset[str] = frozenset()
        for rule in self.rules:
            if rule.matches(tool):
                needed |= rule.scopes
        return needed

    def missing(self, tool: object, scopes: frozenset[str]) -> frozenset[str]:
        """The scopes calling ``tool`` needs that ``scopes`` lacks; empty when it may call it."""
        return self.required(tool) - scopes

    def refuse_call(self, message: JSONObject, peer: PeerInfo) -> JSONObject | None:
        """The ``-31005`` answer to a ``tools/call`` request ``peer`` may not make, else ``None``.

        A refusal is logged (INFO: the client's doing, not the bridge's fault).
        """
        if message.get("method") != "tools/call":
            return None
        params = message.get("params")
        tool: Any = params.get("name") if isinstance(params, dict) else None
        lacking = self.missing(tool, peer.scopes)
        if not lacking:
            return None
        scope = " ".join(sorted(lacking))
        logger.info("%s: tools/call of %r refused: needs scope %s", peer, tool, scope)
        return insufficient_scope(message["id"], tool, scope)

    def filter_tools(self, result: object, scopes: frozenset[str]) -> object:
        """A ``tools/list`` result (one page) as a caller with ``scopes`` may see it.

        The tools it may not call are left out; and a 2026-07-28 result's ``cacheScope``
        ``"public"`` becomes ``"private"``: with rules, the list depends on the caller's token,
        so no shared cache may serve one caller's list to another (the server could not know).
        ``result`` is returned as it is when nothing changes (or it is not a ``tools/list``
        result); otherwise a copy (``nextCursor``, ``ttlMs`` and the rest kept).
        """
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return result
        tools = result["tools"]
        kept = [
            tool
            for tool in tools
            if not self.missing(tool.get("name") if isinstance(tool, dict) else None, scopes)
        ]
        changes: dict[str, object] = {}
        if len(kept) != len(tools):
            changes["tools"] = kept
        if self.rules and "cacheScope" in result and result["cacheScope"] != PRIVATE:
            changes["cacheScope"] = PRIVATE
        return {**result, **changes} if changes else result

    def filter_reply(self, reply: JSONObject, scopes: frozenset[str]) -> JSONObject:
        """A reply to ``tools/list`` as a caller with ``scopes`` may see it (errors unchanged)."""
        if "result" not in reply:
            return reply
        result = self.filter_tools(reply["result"], scopes)
        return reply if result is reply["result"] else {**reply, "result": result}
