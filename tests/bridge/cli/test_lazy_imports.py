"""What the command line's libraries import for nothing runs only on first use: OpenSSL is loaded
by the first TLS, hash or token, ``importlib.metadata``'s code by the first read of it.

The checks that need a fresh interpreter (this one has long imported everything) run in one with
``python_output``; a daemon's own process is checked in test_cli_imports.py.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from bridge._cli.lazy_imports import DEFERRED, defer_import

from conftest import python_output

TIMEOUT = 30  # seconds: one interpreter start-up, on a loaded CI machine

# A fresh interpreter's prelude: whether OpenSSL's libcrypto is mapped, and which of the deferred
# modules have not run yet (they still carry the stand-in's __getattr__).
PRELUDE = f"""
import json, sys
def mapped(): return "libcrypto" in open("/proc/self/maps").read()
def waiting(): return sorted(n for n in {DEFERRED!r} if "__getattr__" in vars(sys.modules.get(n, sys)))
"""

DEFER = "from bridge._cli.lazy_imports import defer_imports\ndefer_imports()\n"

# What importlib.metadata's code brings in that nothing else of the daemon needs.
METADATA_ONLY = ("zipfile", "csv", "importlib.metadata._meta", "importlib.metadata._adapters")


async def script_result(source: str) -> object:
    """What a fresh interpreter running ``source`` printed last, as JSON."""
    with trio.fail_after(TIMEOUT):
        output = await python_output(PRELUDE + source)
    return json.loads(output.splitlines()[-1])


async def test_trio_and_the_daemon_import_and_mint_http_session_ids_without_running_a_deferred_module() -> (
    None
):
    source = DEFER + (
        "import trio, bridge._cli.commands, channels._ws.upgrade, channels._ws.channel\n"
        "from channels._http.server.session import new_session_id\n"
        "assert len(new_session_id()) == 32\n"
        f"print(json.dumps([mapped(), waiting(), sorted(m for m in {METADATA_ONLY!r} if m in sys.modules)]))\n"
    )
    mapped, waiting, metadata_modules = await script_result(source)
    assert mapped is False
    assert waiting == sorted(DEFERRED)
    assert metadata_modules == []


async def test_each_deferred_module_works_on_first_use_and_is_the_one_object_its_importers_bound() -> None:
    source = DEFER + (
        "import trio._ssl, trio._socket, ssl, hashlib, hmac, secrets, bz2, lzma, idna\n"
        "before = mapped()\n"
        "context = ssl.create_default_context()\n"
        "digest = hmac.new(b'key', b'message', hashlib.sha256).hexdigest()\n"
        "token = secrets.token_hex(16)\n"
        "packed = [bz2.decompress(bz2.compress(b'abc')), lzma.decompress(lzma.compress(b'abc')),\n"
        "    trio._socket.encode_hostname('bücher.example')]\n"
        "print(json.dumps([before, mapped(), digest, len(token), [p.decode() for p in packed],\n"
        "    trio._ssl._stdlib_ssl is sys.modules['ssl'] and type(context) is ssl.SSLContext, waiting()]))\n"
    )
    before, after, digest, token_length, unpacked, same, waiting = await script_result(source)
    assert (before, after) == (False, True)
    # HMAC-SHA256 of b"message" under b"key", as `openssl dgst -sha256 -hmac key` gives it.
    assert digest == "6e9ef29b75fffc5b7abae527d58fdadb2fe42e7219011976917343065f58ed4a"
    assert token_length == 32
    assert unpacked == ["abc", "abc", "xn--bcher-kva.example"]
    assert same is True
    assert waiting == ["importlib.metadata"]


async def test_a_deferred_module_whose_code_uses_another_deferred_one_runs_both() -> None:
    source = DEFER + (
        "import secrets\n"  # secrets imports compare_digest from hmac, itself deferred
        "token = secrets.token_hex(16)\n"
        "print(json.dumps([len(token), 'hmac' in waiting(), mapped()]))\n"
    )
    assert await script_result(source) == [32, False, True]


async def test_importlib_metadata_runs_on_first_use_in_the_object_first_registered() -> None:
    source = DEFER + (
        "import websockets, importlib.metadata\n"
        "registered = sys.modules['importlib.metadata']\n"
        "from importlib.metadata import version\n"
        f"print(json.dumps([importlib.metadata.version('websockets') == websockets.__version__,"
        f" version('trio'), importlib.metadata is registered, 'importlib.metadata' in waiting(),"
        f" sorted(m for m in {METADATA_ONLY!r} if m in sys.modules)]))\n"
    )
    same_version, trio_version, same_module, still_waiting, loaded = await script_result(source)
    assert same_version is True
    assert trio_version == trio.__version__
    assert (same_module, still_waiting) == (True, False)
    assert loaded == sorted(METADATA_ONLY)


async def test_a_module_imported_before_its_deferral_stays_the_one_imported() -> None:
    source = (
        "import ssl\n"
        + DEFER
        + ("print(json.dumps([sys.modules['ssl'] is ssl, 'ssl' in waiting(), 'hmac' in waiting()]))\n")
    )
    assert await script_result(source) == [True, False, True]


@pytest.fixture
def module_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory on ``sys.path`` for this test's modules, which leave ``sys.modules`` after it."""
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        del sys.modules[name]


def test_a_deferred_module_reading_its_own_names_while_it_runs_meets_a_module_still_running(
    module_dir: Path,
) -> None:
    (module_dir / "bridge_test_self_reader.py").write_text(
        "import sys\n"
        "try:\n"
        "    sys.modules[__name__].LATER\n"
        "    EARLY_READ = 'found'\n"
        "except AttributeError:\n"
        "    EARLY_READ = 'missing'\n"
        "LATER = 1\n"
    )
    defer_import("bridge_test_self_reader")
    module = sys.modules["bridge_test_self_reader"]
    assert (module.EARLY_READ, module.LATER) == ("missing", 1)
    assert "__getattr__" not in vars(module)


def test_a_deferred_module_whose_code_fails_raises_and_the_next_import_starts_afresh(
    module_dir: Path,
) -> None:
    source = module_dir / "bridge_test_failing.py"
    source.write_text("raise RuntimeError('cannot start')\n")
    defer_import("bridge_test_failing")
    deferred = sys.modules["bridge_test_failing"]
    with pytest.raises(RuntimeError, match="cannot start"):
        deferred.anything  # noqa: B018 -- the read is the use
    assert "bridge_test_failing" not in sys.modules
    source.write_text("VALUE = 2\n")
    import bridge_test_failing  # type: ignore[import-not-found]

    assert bridge_test_failing.VALUE == 2


def test_a_module_that_is_not_installed_is_not_registered() -> None:
    defer_import("bridge_tests_no_such_module")
    assert "bridge_tests_no_such_module" not in sys.modules
