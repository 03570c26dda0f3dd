"""The era probe for ``--child auto``: the sans-IO decision over a table of replies, then the probe
against real children (the example server in each of its eras, the official SDK's server, scripted
``python -c`` children), and the example server's era switches themselves.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest
import trio

from bridge import ChildSpec, ChildStartError, Limits, open_child
from bridge._child.process import ChildProcess
from bridge._daemon.config import PROBE_TIMEOUT
from bridge._shared.eras import (
    MODERN_ERROR_CODES,
    MODERN_VERSION,
    PROBE_ID,
    Era,
    ProbeResult,
    classify_discover_reply,
    discover_request,
    probe_era,
)

from conftest import REPO, example_server, request

TIMEOUT = 20  # seconds for one test: a few Python start-ups (the SDK's takes about a second)
LIMITS = Limits(stop_stdin_timeout=10, stop_term_timeout=10)
SDK_SERVER = (sys.executable, str(REPO / "tests" / "sdk_server.py"))
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "test_eras", "version": "1"},
}


def reply(result: dict[str, Any] | None = None, *, error: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": PROBE_ID}
    if error is not None:
        message["error"] = error
    else:
        message["result"] = result
    return message


def discover_result(*versions: str) -> dict[str, Any]:
    return {
        "resultType": "complete",
        "supportedVersions": list(versions),
        "capabilities": {},
        "ttlMs": 0,
        "cacheScope": "public",
    }


def python_child(script: str) -> tuple[str, ...]:
    return (sys.executable, "-c", script)


async def exchange(child: ChildProcess, message: dict[str, Any]) -> dict[str, Any]:
    await child.channel.send(message)
    return await child.channel.receive()


def modern(params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {**(params or {}), "_meta": MODERN_META}


# -- the constants and the request ----------------------------------------------------------------


def test_the_modern_error_codes_are_header_mismatch_missing_capability_and_unsupported_version() -> None:
    assert MODERN_ERROR_CODES == {-32020, -32021, -32022}
    assert MODERN_VERSION == "2026-07-28"
    assert PROBE_TIMEOUT == 5.0


def test_the_discover_request_carries_the_modern_meta_with_the_bridge_as_client() -> None:
    message = discover_request("probe-7")
    assert message["jsonrpc"] == "2.0"
    assert message["id"] == "probe-7"
    assert message["method"] == "server/discover"
    meta = message["params"]["_meta"]
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {}
    assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "mcp-bridge"
    assert isinstance(meta["io.modelcontextprotocol/clientInfo"]["version"], str)


# -- the decision, sans I/O -----------------------------------------------------------------------

CLASSIFY_TABLE = [
    pytest.param(
        reply(discover_result("2026-07-28")),
        Era.MODERN,
        ("2026-07-28",),
        "supported versions 2026-07-28",
        id="discover-result",
    ),
    pytest.param(
        reply(discover_result("2025-11-25", "2026-07-28")),
        Era.MODERN,
        ("2025-11-25", "2026-07-28"),
        "supported versions 2025-11-25, 2026-07-28",
        id="discover-result-dual-era",
    ),
    pytest.param(
        reply(discover_result("2027-01-01")),
        Era.MODERN,
        ("2027-01-01",),
        "2027-01-01",
        id="discover-result-later-modern-version",
    ),
    pytest.param(
        reply(discover_result("2025-11-25")),
        Era.LEGACY,
        ("2025-11-25",),
        "no modern version",
        id="discover-result-naming-only-legacy-versions",
    ),
    pytest.param(
        reply({"capabilities": {}}),
        Era.LEGACY,
        (),
        "without a supportedVersions list",
        id="result-without-supported-versions",
    ),
    pytest.param(
        reply(
            error={
                "code": -32022,
                "message": "Unsupported protocol version",
                "data": {"supported": ["2026-09-01"], "requested": "2026-07-28"},
            }
        ),
        Era.MODERN,
        ("2026-09-01",),
        "-32022",
        id="unsupported-version-with-supported",
    ),
    pytest.param(
        reply(error={"code": -32022, "message": "Unsupported protocol version"}),
        Era.MODERN,
        (),
        "-32022",
        id="unsupported-version-without-data",
    ),
    pytest.param(
        reply(error={"code": -32020, "message": "Header mismatch"}),
        Era.MODERN,
        (),
        "-32020",
        id="header-mismatch",
    ),
    pytest.param(
        reply(
            error={
                "code": -32021,
                "message": "Missing capability",
                "data": {"requiredCapabilities": {"elicitation": {}}},
            }
        ),
        Era.MODERN,
        (),
        "-32021",
        id="missing-client-capability",
    ),
    pytest.param(
        reply(error={"code": -32601, "message": "Method not found"}),
        Era.LEGACY,
        (),
        "server/discover failed with -32601 Method not found",
        id="method-not-found",
    ),
    pytest.param(
        reply(error={"code": -32602, "message": "Invalid params"}),
        Era.LEGACY,
        (),
        "-32602",
        id="invalid-params",
    ),
    pytest.param(
        reply(error={"code": -32600, "message": "Invalid Request"}),
        Era.LEGACY,
        (),
        "-32600",
        id="invalid-request",
    ),
    pytest.param(
        reply(error={"code": -32000, "message": "Server not initialized"}),
        Era.LEGACY,
        (),
        "-32000",
        id="implementation-defined-error",
    ),
]


@pytest.mark.parametrize(("message", "era", "versions", "reason_part"), CLASSIFY_TABLE)
def test_a_discover_reply_is_modern_only_on_a_discover_result_or_a_modern_error_code(
    message: dict[str, Any],
    era: Era,
    versions: tuple[str, ...],
    reason_part: str,
) -> None:
    result = classify_discover_reply(message)
    assert result.era is era
    assert result.supported_versions == versions
    assert reason_part in result.reason


def test_any_error_code_outside_the_modern_three_is_legacy_so_the_fallback_is_not_keyed_to_one_code() -> None:
    for code in (-32700, -32603, -32002, -32019, -32023, -32099, -1, 0, 1):
        result = classify_discover_reply(reply(error={"code": code, "message": "x"}))
        assert result.era is Era.LEGACY, code


# -- the probe against real children --------------------------------------------------------------


@pytest.mark.parametrize("era_flag", ["dual", "modern"])
async def test_a_dual_era_or_modern_example_server_probes_as_modern(era_flag: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(example_server("--era", era_flag)), LIMITS) as child:
            result = await probe_era(child, timeout=PROBE_TIMEOUT)
    assert result == ProbeResult(
        Era.MODERN, "server/discover answered: supported versions 2026-07-28", ("2026-07-28",)
    )


async def test_a_legacy_example_server_probes_as_legacy_from_its_method_not_found() -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(example_server("--era", "legacy")), LIMITS) as child:
            result = await probe_era(child, timeout=PROBE_TIMEOUT)
    assert result.era is Era.LEGACY
    assert result.reason == "server/discover failed with -32601 Method not found: server/discover"


async def test_a_server_that_never_answers_discover_probes_as_legacy_after_the_timeout() -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(example_server("--discover-hang")), LIMITS) as child:
            started = trio.current_time()
            result = await probe_era(child, timeout=0.3)
            assert trio.current_time() - started >= 0.3
            # The child is still usable: the next request is answered, not the probe.
            answer = await exchange(child, request(1, "ping"))
    assert result == ProbeResult(Era.LEGACY, "no answer to server/discover within 0.3s", timed_out=True)
    assert answer == {"jsonrpc": "2.0", "id": 1, "result": {}}


async def test_a_child_that_exits_at_once_raises_child_start_error_with_its_status() -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(python_child("raise SystemExit(7)")), LIMITS) as child:
            with pytest.raises(
                ChildStartError,
                match=r"child exited during the era probe: .*"
                r"exited with status 7",
            ):
                await probe_era(child, timeout=PROBE_TIMEOUT)


async def test_a_child_that_crashes_on_the_probe_raises_child_start_error() -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(example_server("--crash-after", "0")), LIMITS) as child:
            with pytest.raises(ChildStartError, match="exited with status 3"):
                await probe_era(child, timeout=PROBE_TIMEOUT)


async def test_junk_lines_before_the_reply_are_skipped_and_counted_as_garbage() -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(example_server("--junk-every", "1")), LIMITS) as child:
            result = await probe_era(child, timeout=PROBE_TIMEOUT)
            assert child.garbage_lines == 1
    assert result.era is Era.MODERN


# Writes a notification and a junk line, then, once the probe arrives, its reply and a notification
# after it in one write; then waits for stdin EOF.
SCRIPTED = """\
import json, sys
def write(*lines):
    sys.stdout.write("".join(lines))
    sys.stdout.flush()
write(json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"n": "before"}}) + "\\n",
      "not json\\n")
probe = json.loads(sys.stdin.readline())
write(json.dumps({"jsonrpc": "2.0", "id": probe["id"],
                  "result": {"supportedVersions": ["2026-07-28"], "capabilities": {}}}) + "\\n",
      json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"n": "after"}}) + "\\n")
sys.stdin.read()
"""


async def test_messages_before_the_reply_are_dropped_and_those_after_it_stay_in_the_channel() -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(python_child(SCRIPTED)), LIMITS) as child:
            result = await probe_era(child, timeout=PROBE_TIMEOUT)
            after = await child.channel.receive()
            assert child.garbage_lines == 1
    assert result.era is Era.MODERN
    assert after["params"] == {"n": "after"}


INVALID_REPLY = """\
import json, sys
probe = json.loads(sys.stdin.readline())
sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": probe["id"],
                             "error": {"code": "-32601", "message": "no"}}) + "\\n")
sys.stdout.flush()
sys.stdin.read()
"""


async def test_a_reply_to_the_probe_that_is_not_valid_json_rpc_is_legacy_at_once() -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(python_child(INVALID_REPLY)), LIMITS) as child:
            result = await probe_era(child, timeout=PROBE_TIMEOUT)
    assert result.era is Era.LEGACY
    assert "cannot accept" in result.reason


async def test_the_verdict_is_logged_with_the_childs_name_and_pid(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bridge.eras")
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(example_server("--era", "legacy"), name="tools"), LIMITS) as child:
            await probe_era(child, timeout=PROBE_TIMEOUT)
            pid = child.pid
    assert f"[tools pid {pid}] legacy era: server/discover failed with -32601" in caplog.text


# -- the official SDK's server ---------------------------------------------------------------------


async def test_the_sdk_server_probes_as_modern_and_then_serves_a_modern_tools_list() -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(SDK_SERVER), LIMITS) as child:
            result = await probe_era(child, timeout=PROBE_TIMEOUT)
            tools = await exchange(child, request(2, "tools/list", modern()))
            called = await exchange(
                child, request(3, "tools/call", modern({"name": "add", "arguments": {"a": 2, "b": 3}}))
            )
    assert result.era is Era.MODERN
    assert MODERN_VERSION in result.supported_versions
    assert {tool["name"] for tool in tools["result"]["tools"]} == {"echo", "add"}
    assert called["result"]["content"][0]["text"] == "5"


async def test_after_the_probe_the_sdk_server_refuses_a_legacy_initialize_with_unsupported_version() -> None:
    """The SDK's dual-era stdio loop locks the connection's era on the first request, and the
    probe's server/discover is modern: a legacy client sharing that child is refused."""
    initialize = request(
        4,
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "legacy", "version": "1"},
        },
    )
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(SDK_SERVER), LIMITS) as child:
            assert (await probe_era(child, timeout=PROBE_TIMEOUT)).era is Era.MODERN
            refused = await exchange(child, initialize)
            still_modern = await exchange(child, request(5, "tools/list", modern()))
    assert refused["error"]["code"] == -32022
    assert MODERN_VERSION in refused["error"]["data"]["supported"]
    assert "tools" in still_modern["result"]


async def test_without_a_probe_the_sdk_server_accepts_a_legacy_initialize() -> None:
    """The control for the test above: the refusal is the probe's doing, not the server's."""
    initialize = request(
        4,
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "legacy", "version": "1"},
        },
    )
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(SDK_SERVER), LIMITS) as child:
            accepted = await exchange(child, initialize)
    assert accepted["result"]["protocolVersion"] == "2025-11-25"


# -- the example server's era switches --------------------------------------------------------------

INITIALIZE = request(
    1,
    "initialize",
    {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
)


async def test_the_legacy_example_server_answers_discover_with_method_not_found_and_ignores_meta() -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(example_server("--era", "legacy")), LIMITS) as child:
            discover = await exchange(child, discover_request(1))
            initialized = await exchange(child, INITIALIZE)
            tools = await exchange(child, request(2, "tools/list", modern()))
    assert discover["error"]["code"] == -32601
    assert initialized["result"]["protocolVersion"] == "2025-06-18"
    assert "resultType" not in tools["result"]


async def test_the_modern_example_server_refuses_initialize_naming_its_versions() -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(example_server("--era", "modern")), LIMITS) as child:
            refused = await exchange(child, INITIALIZE)
            discover = await exchange(child, discover_request(2))
            tools = await exchange(child, request(3, "tools/list", modern()))
    assert refused == {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2026-07-28"], "requested": "2025-06-18"},
        },
    }
    assert discover["result"]["supportedVersions"] == ["2026-07-28"]
    assert tools["result"]["resultType"] == "complete"


async def test_the_dual_era_example_server_is_the_default_and_serves_both_eras() -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(example_server()), LIMITS) as child:
            initialized = await exchange(child, INITIALIZE)
            discover = await exchange(child, discover_request(2))
            tools = await exchange(child, request(3, "tools/list", modern()))
    assert initialized["result"]["protocolVersion"] == "2025-06-18"
    assert discover["result"]["supportedVersions"] == ["2026-07-28"]
    assert tools["result"]["resultType"] == "complete"


async def test_the_discover_hang_switch_skips_discover_and_answers_the_next_request() -> None:
    with trio.fail_after(TIMEOUT):
        async with open_child(ChildSpec(example_server("--discover-hang")), LIMITS) as child:
            await child.channel.send(discover_request(1))
            answer = await exchange(child, request(2, "ping"))
    assert answer == {"jsonrpc": "2.0", "id": 2, "result": {}}
