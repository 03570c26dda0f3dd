"""OpenSSL is loaded by the command line's first use of TLS, a hash or a token, not by trio's import.

The checks that need a fresh interpreter (this one has long loaded OpenSSL) run in one with
``python_output``; a daemon's own process is checked in test_cli_imports.py.
"""

from __future__ import annotations

import json
import sys

import pytest
import trio

from bridge._cli.lazy_imports import DEFERRED, Deferred, load

from conftest import python_output

TIMEOUT = 30  # seconds: one interpreter start-up, on a loaded CI machine

# Whether OpenSSL's libcrypto is mapped into the interpreter running the script.
MAPPED = 'def mapped(): return "libcrypto" in open("/proc/self/maps").read()\n'


async def script_result(source: str) -> object:
    """What a fresh interpreter running ``source`` printed last, as JSON."""
    with trio.fail_after(TIMEOUT):
        output = await python_output("import json, sys\n" + MAPPED + source)
    return json.loads(output.splitlines()[-1])


async def test_trio_and_the_daemon_import_and_mint_http_session_ids_without_loading_openssl() -> None:
    source = (
        "from bridge._cli.lazy_imports import defer_openssl\n"
        "defer_openssl()\n"
        "import trio, bridge._cli.commands, channels._ws.upgrade\n"
        "from channels._http.server.session import new_session_id\n"
        "assert len(new_session_id()) == 32\n"
        "print(json.dumps([mapped(), sorted(n for n in sys.modules if type(sys.modules[n]).__name__ == 'Deferred')]))\n"
    )
    mapped, deferred = await script_result(source)
    assert mapped is False
    assert deferred == sorted(DEFERRED)


async def test_each_deferred_module_works_on_first_use_and_what_bound_it_sees_the_real_module() -> None:
    source = (
        "from bridge._cli.lazy_imports import defer_openssl\n"
        "defer_openssl()\n"
        "import trio._ssl, ssl, hashlib, hmac, secrets\n"
        "before = mapped()\n"
        "context = ssl.create_default_context()\n"
        "digest = hmac.new(b'key', b'message', hashlib.sha256).hexdigest()\n"
        "token = secrets.token_hex(16)\n"
        "print(json.dumps([before, mapped(), digest, len(token),\n"
        "    trio._ssl._stdlib_ssl.SSLContext is sys.modules['ssl'].SSLContext is type(context),\n"
        "    [type(sys.modules[name]).__name__ for name in ('ssl', 'hashlib', 'hmac', 'secrets')]]))\n"
    )
    before, after, digest, token_length, same_class, kinds = await script_result(source)
    assert (before, after) == (False, True)
    # HMAC-SHA256 of b"message" under b"key", as `openssl dgst -sha256 -hmac key` gives it.
    assert digest == "6e9ef29b75fffc5b7abae527d58fdadb2fe42e7219011976917343065f58ed4a"
    assert token_length == 32
    assert same_class is True
    assert kinds == ["module"] * 4


async def test_a_deferred_module_whose_import_uses_another_deferred_one_loads_both() -> None:
    source = (
        "from bridge._cli.lazy_imports import defer_openssl\n"
        "defer_openssl()\n"
        "import secrets\n"  # secrets imports compare_digest from hmac, itself deferred
        "token = secrets.token_hex(16)\n"
        "print(json.dumps([len(token), type(sys.modules['hmac']).__name__, mapped()]))\n"
    )
    assert await script_result(source) == [32, "module", True]


async def test_a_module_imported_before_openssl_is_deferred_stays_the_real_one() -> None:
    source = (
        "import ssl\n"
        "from bridge._cli.lazy_imports import defer_openssl\n"
        "defer_openssl()\n"
        "print(json.dumps([sys.modules['ssl'] is ssl, type(sys.modules['hmac']).__name__]))\n"
    )
    assert await script_result(source) == [True, "Deferred"]


def test_a_deferred_module_that_cannot_be_imported_says_so_on_each_use_and_stays_deferred(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = "bridge_tests_no_such_module"
    stand_in = Deferred(name)
    monkeypatch.setitem(sys.modules, name, stand_in)
    for _ in range(2):
        with pytest.raises(ModuleNotFoundError, match=name):
            stand_in.anything  # noqa: B018 -- the read is the use
        assert sys.modules[name] is stand_in


def test_loading_a_stand_in_another_thread_loaded_already_returns_the_module_in_its_place() -> None:
    stand_in = Deferred("json")  # sys.modules holds the real json, as after another thread's load
    assert load(stand_in) is json
    assert sys.modules["json"] is json
