"""What the whole-daemon fuzz tests share: the clients' scripts, what each line is owed, the check.

Hypothesis writes a :class:`Script` per client (:data:`scripts`); :func:`lines_of` turns it into
the client's JSON-RPC lines and fills an :class:`Expected` with what they are owed; :func:`check`
holds what the client received against it, whatever carried it (a stream's lines, HTTP bodies and
events). Each example runs under one of :data:`SETTINGS`. The tests are
tests/e2e/test_fuzz_daemon.py (newline streams) and tests/e2e/test_fuzz_daemon_http.py (Streamable
HTTP sessions); what they check is in docs/design.md §8.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import attrs
import pytest
from hypothesis import strategies as st

from bridge import Daemon, Limits
from bridge._child.supervisor import RestartPolicy
from bridge._errors import CONNECTION_CLOSED, REQUEST_TIMEOUT, TOO_MANY_REQUESTS

from conftest import MODERN_META, call, example_server, initialize, request, result_text, running_bridge

# Seconds one example may take: a daemon and its child started, a few dozen messages, each client's
# end; the child answers one request at a time, and its sleeps add up to at most a second.
EXAMPLE_DEADLINE = 30
# Ids every client draws from, so that they collide between clients: a number and the string of
# it, zero and a negative, one past what a double holds exactly, a colon (a tag splitter's
# trap), the empty string and non-ASCII text.
IDS: tuple[Any, ...] = (1, 2, 0, -1, 2**53 + 1, "1", "2", "a:1", "", "é ✓")
# Progress tokens, colliding between clients the same way (a client never reuses its own).
TOKENS: tuple[Any, ...] = (1, 2, "1", "t", "t:1")
# Lines that are not one valid JSON-RPC message, and the error each gets; ``{id}`` is replaced by a
# string id of the bad line's own, which the error carries where the line lets it be read.
BAD_LINES = (
    (b"not json", -32700),
    (b'{"jsonrpc":"2.0","id":"{id}","method":"x","params":NaN}', -32700),
    (b"\xff\xfe{}", -32700),
    (b'[{"jsonrpc":"2.0","id":"{id}","method":"ping"}]', -32600),
    (b'{"jsonrpc":"1.0","id":"{id}","method":"ping"}', -32600),
    (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', -32600),
    (b'{"jsonrpc":"2.0","method":7}', -32600),
)
# What each kind of request is answered with, when it names a tool: its result's text.
RESULTS = {"progress": "done", "sleep": "slept"}

# Requests of the 2026-07-28 era (a legacy HTTP session leaves them out: its subscriptions'
# notifications belong on the session's GET stream, which a session of these tests does not open).
MODERN_KINDS = ("modern", "discover", "listen")
# What a client's line may be; echo twice, so that plain calls are the commonest.
KINDS = (
    *("echo", "echo", "progress", "sleep", "ping", "unknown", "initialize"),  # requests
    *MODERN_KINDS,
    *("cancel", "again", "notify", "stray", "bad"),
)
# The tag a 2026-07-28 subscription's notifications carry.
SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"
# What the example server sends for a ``subscriptions/listen`` before its result: an
# acknowledgement and one update, each tagged with the request's id.
SUBSCRIPTION_NOTIFICATIONS = ("notifications/subscriptions/acknowledged", "notifications/resources/updated")


@attrs.frozen
class Setting:
    """How the daemon runs an example: its limits, its child's fault switch and restart policy,
    and the errors a call may get instead of its result (with fewer progress notifications)."""

    name: str
    limits: Limits = Limits()
    child_flags: tuple[str, ...] = ()
    restart_policy: RestartPolicy | None = None
    errors: frozenset[int] = frozenset()


# A request timeout shorter than a sleep call, so that calls queued behind one time out too, and
# three requests in flight, so that a burst of calls has some refused.
TIGHT_LIMITS = Limits(request_timeout=0.005, max_in_flight=3)
TIGHT_ERRORS = frozenset({REQUEST_TIMEOUT, TOO_MANY_REQUESTS})
# A shared child that crashes on every fifth request it reads (the bridge's replayed handshake
# included), restarted at once as often as it takes: what it had in flight gets -32000.
CRASHING = ("--crash-after", "4")
AT_ONCE = RestartPolicy(floor=0.01, cap=0.05, crash_limit=10_000, crash_window=60)
SETTINGS = (
    Setting("default-limits"),
    Setting("tight-limits", TIGHT_LIMITS, errors=TIGHT_ERRORS),
    Setting(
        "crashing-child", child_flags=CRASHING, restart_policy=AT_ONCE, errors=frozenset({CONNECTION_CLOSED})
    ),
    # Both: timeouts and refusals of requests whose child may have gone meanwhile.
    Setting(
        "crashing-child-tight-limits", TIGHT_LIMITS, CRASHING, AT_ONCE, TIGHT_ERRORS | {CONNECTION_CLOSED}
    ),
)
MODES = [
    pytest.param(mode, setting, id=f"{mode}-{setting.name}")
    for mode in ("shared", "per-connection")
    for setting in SETTINGS
]


def cut_short(child_mode: str, setting: Setting) -> bool:
    """Whether a client's requests may go unanswered: per connection, a child's exit ends its
    connection, and what the client writes after that may be dropped (docs/design.md §5.1)."""
    return child_mode == "per-connection" and bool(setting.child_flags)


def fuzzed_daemon(
    setting: Setting, child_mode: str, address: str, limits: Limits | None = None
) -> AbstractAsyncContextManager[Daemon]:
    """A daemon on ``address`` serving the example server as ``setting`` runs it (``limits``, if
    given, in place of the setting's), in this process, for the block."""
    return running_bridge(
        example_server(*setting.child_flags),
        [address],
        child_mode=child_mode,
        limits=limits or setting.limits,
        restart_policy=setting.restart_policy,
    )


def check_left_clean(daemon: Daemon, setting: Setting) -> None:
    """Once every client has gone: no request in flight, no child wrote junk, and the shared child
    restarted only if ``setting`` makes it crash."""
    statistics = daemon.statistics()
    assert statistics.requests_in_flight == 0
    assert statistics.child_garbage_lines == 0
    if not setting.child_flags:
        assert statistics.child_restarts == 0


# A client's bad lines stay below the run that ends its connection (the relay's own test covers it).
MAX_BAD_LINES = Limits().max_consecutive_errors - 1


@attrs.define
class Script:
    """What one client sends, in order, and how it ends (``vanish``: closes without reading)."""

    kinds: list[str]
    vanish: bool
    steps: list[int]  # a progress call's notifications, one per progress kind
    ids: list[Any]  # a permutation of IDS: the requests take them in turn
    tokens: list[Any]  # a permutation of TOKENS


@attrs.define
class Expected:
    """What a client that stayed must get, built as its lines are written."""

    sends: Counter[str] = attrs.field(factory=Counter)  # by the id's key (:func:`key`)
    results: dict[str, str] = attrs.field(factory=dict)  # a tool call's text, by id key
    cancelled: set[str] = attrs.field(factory=set)
    bad: list[int] = attrs.field(factory=list)  # the error code of each bad line
    progress: dict[str, tuple[int, str]] = attrs.field(factory=dict)  # by token key: count, request id key
    listens: set[str] = attrs.field(factory=set)  # ids of subscriptions/listen requests


def key(value: Any) -> str:
    """An id or token as its type and value: ``1`` and ``"1"`` (and ``True``) stay apart."""
    return f"{type(value).__name__}:{value!r}"


def request_of(
    kind: str, request_id: Any, text: str, tokens: Iterator[Any], steps: Iterator[int], expected: Expected
) -> dict[str, Any]:
    """A request of ``kind`` with ``request_id`` (a call echoes ``text``), noting its result."""
    if kind == "echo":
        expected.results[key(request_id)] = text
        return call(request_id, "echo", text=text)
    if kind == "progress":
        token, count = next(tokens, None), next(steps)
        params: dict[str, Any] = {"name": "progress", "arguments": {"steps": count}}
        if token is not None:
            params["_meta"] = {"progressToken": token}
            expected.progress[key(token)] = (count, key(request_id))
        expected.results[key(request_id)] = RESULTS["progress"]
        return request(request_id, "tools/call", params)
    if kind == "sleep":
        expected.results[key(request_id)] = RESULTS["sleep"]
        return call(request_id, "sleep", seconds=0.01)
    if kind == "ping":
        return request(request_id, "ping")
    if kind == "unknown":
        return request(request_id, "no/such/method")
    if kind == "initialize":
        return initialize(request_id)
    if kind == "modern":
        expected.results[key(request_id)] = text
        return request(
            request_id, "tools/call", {"name": "echo", "arguments": {"text": text}, "_meta": MODERN_META}
        )
    if kind == "discover":
        return request(request_id, "server/discover", {"_meta": MODERN_META})
    assert kind == "listen", kind
    expected.listens.add(key(request_id))
    notifications = {"resourceSubscriptions": ["example://updated"]}
    return request(request_id, "subscriptions/listen", {"notifications": notifications, "_meta": MODERN_META})


def lines_of(number: int, script: Script, expected: Expected) -> list[bytes]:
    """The lines client ``number`` sends for ``script``, noting in ``expected`` what each is owed."""
    lines: list[bytes] = []
    ids, tokens, steps = iter(script.ids), iter(script.tokens), iter(script.steps)
    sent: list[Any] = []  # ids of requests sent once so far (what "cancel" and "again" pick from)

    def send(message: dict[str, Any]) -> None:
        lines.append(json.dumps(message, ensure_ascii=False).encode())

    for index, kind in enumerate(script.kinds):
        if kind == "cancel":
            # Its own oldest request still open to it, or, with none, an id it never sent (which
            # another client may well have in flight: that one must still be answered).
            open_ids = [i for i in sent if key(i) not in expected.cancelled and expected.sends[key(i)] == 1]
            target = open_ids[0] if open_ids else next(ids, None)
            if target is None:
                continue
            if open_ids:
                expected.cancelled.add(key(target))
            send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": target}})
        elif kind == "again":  # an id it sent before, with a new text: maybe still in flight
            again = [i for i in sent if key(i) not in expected.cancelled and key(i) in expected.results]
            if not again:
                continue
            expected.sends[key(again[-1])] += 1
            expected.results.pop(key(again[-1]))  # either text may come back, or a refusal
            send(call(again[-1], "echo", text=f"client {number} line {index} again"))
        elif kind == "notify":
            send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
        elif kind == "stray":  # a reply to a request the child never sent
            send({"jsonrpc": "2.0", "id": f"stray-{number}-{index}", "result": {}})
        elif kind == "bad":
            if len(expected.bad) == MAX_BAD_LINES:
                continue
            line, code = BAD_LINES[index % len(BAD_LINES)]
            lines.append(line.replace(b"{id}", f"bad-{number}-{index}".encode()))
            expected.bad.append(code)
        else:
            request_id = next(ids, None)
            if request_id is None:
                continue
            sent.append(request_id)
            expected.sends[key(request_id)] += 1
            send(request_of(kind, request_id, f"client {number} line {index}", tokens, steps, expected))
    return [line + b"\n" for line in lines]


def check(
    number: int,
    expected: Expected,
    messages: list[dict[str, Any]],
    errors: frozenset[int],
    *,
    bad_line_codes: bool = True,
    cut_short: bool = False,
) -> None:
    """What client ``number`` received against what it was owed, where a call may get one of
    ``errors`` instead of its result, and so fewer notifications (as may one whose id was sent
    again: on HTTP the later copy may arrive first, and the call be the one refused).

    ``bad_line_codes``: each bad line's error has the code :data:`BAD_LINES` gives it; if False,
    only one error per bad line (a 2026-07-28 POST's headers are checked before its body: a batch
    under a 2026-07-28 header is refused for its version).

    ``cut_short``: the daemon stopped while the client wrote, so what it wrote once the bridge
    stopped reading may be unanswered (docs/design.md §5.1 and §5.6): everything is at most once,
    and a call may get ``-32000`` (``shutting-down``).
    """
    if cut_short:
        errors |= {CONNECTION_CLOSED}
    replies: dict[str, list[dict[str, Any]]] = {}
    bad_errors: list[int] = []
    progress: Counter[str] = Counter()
    subscriptions: Counter[str] = Counter()
    for message in messages:
        where = f"client {number} got {message!r}"
        if message.get("method") in SUBSCRIPTION_NOTIFICATIONS:
            tag = key(message["params"]["_meta"][SUBSCRIPTION])
            assert tag in expected.listens, where
            subscriptions[tag] += 1
        elif "method" in message:
            assert message["method"] == "notifications/progress", where
            token = key(message["params"]["progressToken"])
            assert token in expected.progress, where
            progress[token] += 1
        elif message["id"] is None or (isinstance(message["id"], str) and message["id"].startswith("bad-")):
            assert "error" in message, where
            bad_errors.append(message["error"]["code"])
        else:
            assert key(message["id"]) in expected.sends, where
            replies.setdefault(key(message["id"]), []).append(message)
    if cut_short:  # a connection the stop refused is told so once, with id null
        bad_errors = [code for code in bad_errors if code != CONNECTION_CLOSED]
        assert len(bad_errors) <= len(expected.bad), f"client {number}: errors for bad lines"
    elif bad_line_codes:
        assert sorted(bad_errors) == sorted(expected.bad), f"client {number}: errors for bad lines"
    else:
        assert len(bad_errors) == len(expected.bad), f"client {number}: errors for bad lines"
    for token, (count, request_id) in expected.progress.items():
        if errors or request_id in expected.cancelled or expected.sends[request_id] > 1:
            assert progress[token] <= count, f"client {number}: progress on {token}"
        else:
            assert progress[token] == count, f"client {number}: progress on {token}"
    for request_id in expected.listens:
        count = subscriptions[request_id]
        if errors or request_id in expected.cancelled or expected.sends[request_id] > 1:
            assert count <= len(SUBSCRIPTION_NOTIFICATIONS), f"client {number}: subscription {request_id}"
        else:
            assert count == len(SUBSCRIPTION_NOTIFICATIONS), f"client {number}: subscription {request_id}"
    for request_id, sends in expected.sends.items():
        got = replies.get(request_id, [])
        if request_id in expected.cancelled or cut_short:
            assert len(got) <= sends, (
                f"client {number}: {len(got)} replies to {request_id}, sent {sends}: {got}"
            )
            if request_id in expected.cancelled or not got:
                continue
        else:
            assert len(got) == sends, (
                f"client {number}: {len(got)} replies to {request_id}, sent {sends}: {got}"
            )
        if request_id in expected.results:
            (reply,) = got
            if errors and "error" in reply:
                assert reply["error"]["code"] in errors, reply
            else:
                assert result_text(reply) == expected.results[request_id], reply


scripts = st.builds(
    Script,
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=12),
    vanish=st.booleans(),
    steps=st.lists(st.integers(0, 3), min_size=12, max_size=12),
    ids=st.permutations(IDS),
    tokens=st.permutations(TOKENS),
)
