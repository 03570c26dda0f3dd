"""The per-tool scopes policy on its own, sans-IO: which scopes each tool needs, what a caller sees."""

from __future__ import annotations

import pytest

from bridge import INSUFFICIENT_SCOPE, ConfigError, ToolScopes
from channels import PeerInfo, Principal

POLICY = ToolScopes({"delete_*": ["mcp:admin"], "*_secret": ["vault:read"], "spawn_grandchild": ["ops"]})
NONE: frozenset[str] = frozenset()


def peer(*scopes: str) -> PeerInfo:
    principal = Principal("https://issuer.example", "alice", "client-1", frozenset(scopes))
    return PeerInfo("http", "127.0.0.1:5000", credential=principal.label, principal=principal)


def tools_call(tool: object, request_id: object = 7) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": tool}}


def test_a_tool_that_matches_no_pattern_needs_no_scope() -> None:
    assert POLICY.required("echo") == NONE
    assert POLICY.missing("echo", NONE) == NONE


def test_a_tool_that_matches_a_pattern_needs_its_scopes_and_the_match_is_on_the_whole_name() -> None:
    assert POLICY.required("delete_user") == {"mcp:admin"}
    assert POLICY.required("undelete_user") == NONE  # fnmatch anchors both ends
    assert POLICY.required("Delete_user") == NONE  # case-sensitive, as tool names are


def test_a_tool_that_matches_several_patterns_needs_the_scopes_of_all_of_them() -> None:
    assert POLICY.required("delete_secret") == {"mcp:admin", "vault:read"}
    assert POLICY.missing("delete_secret", frozenset({"mcp:admin"})) == {"vault:read"}
    # Order does not matter: a broad rule first cannot shadow a stricter one after it.
    broad_first = ToolScopes({"*": ["mcp:use"], "delete_*": ["mcp:admin"]})
    assert broad_first.required("delete_user") == {"mcp:use", "mcp:admin"}


def test_a_tool_name_that_is_not_a_string_needs_every_scope_any_rule_requires() -> None:
    # A JavaScript server would read ["delete_user"] as "delete_user": no way around a rule.
    assert POLICY.required(["delete_user"]) == {"mcp:admin", "vault:read", "ops"}
    assert POLICY.required(None) == {"mcp:admin", "vault:read", "ops"}


def test_the_scopes_supported_are_the_union_of_the_rules_sorted() -> None:
    assert POLICY.scopes_supported == ("mcp:admin", "ops", "vault:read")
    assert ToolScopes().scopes_supported == ()
    assert not ToolScopes() and POLICY


def test_a_call_the_peer_may_not_make_is_refused_with_31005_naming_the_tool_and_the_scope() -> None:
    refusal = POLICY.refuse_call(tools_call("delete_user", "req-1"), peer("mcp:use"))
    assert refusal is not None
    assert refusal["id"] == "req-1"
    assert refusal["error"]["code"] == INSUFFICIENT_SCOPE == -31005
    assert refusal["error"]["data"]["reason"] == "insufficient-scope"
    assert refusal["error"]["data"]["tool"] == "delete_user"
    assert refusal["error"]["data"]["scope"] == "mcp:admin"
    several = POLICY.refuse_call(tools_call("delete_secret"), peer())
    assert several is not None and several["error"]["data"]["scope"] == "mcp:admin vault:read"


def test_a_call_the_peer_may_make_and_any_other_method_pass() -> None:
    assert POLICY.refuse_call(tools_call("delete_user"), peer("mcp:admin")) is None
    assert POLICY.refuse_call(tools_call("echo"), peer()) is None
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert POLICY.refuse_call(listing, PeerInfo("unix")) is None


def test_a_peer_without_an_oauth_token_holds_no_scope_and_is_refused() -> None:
    static_token = PeerInfo("tcp", "127.0.0.1:5000", credential="token file /etc/t line 1")
    assert POLICY.refuse_call(tools_call("delete_user"), static_token) is not None
    assert POLICY.refuse_call(tools_call("delete_user"), PeerInfo("unix", uid=0)) is not None


def test_a_tools_list_page_keeps_only_the_tools_the_scopes_allow_and_its_cursor() -> None:
    page = {
        "tools": [{"name": "echo"}, {"name": "delete_user"}, {"name": "read_secret"}, "junk"],
        "nextCursor": "page-2",
    }
    reply = {"jsonrpc": "2.0", "id": 3, "result": page}
    seen = POLICY.filter_reply(reply, frozenset({"mcp:admin"}))
    assert seen == {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {"tools": [{"name": "echo"}, {"name": "delete_user"}], "nextCursor": "page-2"},
    }
    assert page["tools"][1] == {"name": "delete_user"}  # the child's reply is not changed in place


def test_a_tools_list_reply_with_nothing_to_hide_or_an_error_is_returned_as_it_is() -> None:
    reply = {"jsonrpc": "2.0", "id": 3, "result": {"tools": [{"name": "echo"}]}}
    assert POLICY.filter_reply(reply, NONE) is reply
    error = {"jsonrpc": "2.0", "id": 3, "error": {"code": -32603, "message": "boom"}}
    assert POLICY.filter_reply(error, NONE) is error


def test_a_2026_07_28_tools_list_that_a_shared_cache_could_reuse_is_marked_private_even_with_nothing_hidden() -> (
    None
):
    page = {"tools": [{"name": "echo"}], "ttlMs": 60000, "cacheScope": "public", "resultType": "complete"}
    for scopes in (NONE, frozenset({"mcp:admin", "vault:read", "ops"})):
        seen = POLICY.filter_tools(page, scopes)
        assert seen == {**page, "cacheScope": "private"}  # the list depends on the caller's token
    assert page["cacheScope"] == "public"  # the child's reply is not changed in place
    private = {**page, "cacheScope": "private"}
    assert POLICY.filter_tools(private, NONE) is private
    assert ToolScopes().filter_tools(page, NONE) is page  # no rules: every caller sees the same list


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ({"": ["a"]}, 'tool_scopes: a tool name pattern is empty; write one such as "delete_*"'),
        ({"delete_*": []}, "tool_scopes.delete_*: expected at least one scope"),
        ({"delete_*": "mcp:admin"}, 'tool_scopes.delete_*: expected a list of scopes, such as ["mcp:admin"]'),
        ({"delete_*": ["mcp admin"]}, "tool_scopes.delete_*: 'mcp admin' is not a scope"),
        ({"delete_*": ['say"hi']}, "tool_scopes.delete_*: 'say\"hi' is not a scope"),
    ],
)
def test_a_bad_rule_is_refused_naming_the_pattern_and_the_fix(rules: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        ToolScopes(rules)  # type: ignore[arg-type]
    assert str(caught.value).startswith(message)
