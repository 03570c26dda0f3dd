"""OAuth's packages are imported only where OAuth is used (the package docstring of channels/_oauth).

joserfc and httpx2 bring cryptography, cffi, anyio and httpcore2: about 150 modules and 12 MiB,
which every ``mcp-bridge`` process paid when they were imported at module level, although
OAuth is off unless a listener asks for it. Each check runs in a fresh interpreter (this one has
long imported them) and reads its ``sys.modules``.
"""

from __future__ import annotations

import json
import time

import trio
from joserfc import jwt
from joserfc.jwk import ECKey

from conftest import python_output

TIMEOUT = 30  # seconds: one interpreter start-up and the bridge's imports, on a loaded CI machine

# The packages OAuth needs and nothing else in the bridge does.
OAUTH_PACKAGES = ("anyio", "cryptography", "httpcore2", "httpx2", "joserfc")

# Prints which of OAUTH_PACKAGES the interpreter has loaded, as a JSON list.
LOADED = f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({OAUTH_PACKAGES!r}))))"

IMPORT_BRIDGE = f"import json, sys\nimport bridge, channels\n{LOADED}"

# `python -m bridge --version`, as runpy runs it, then the modules it loaded.
BRIDGE_VERSION = f"""
import json, runpy, sys
sys.argv = ["mcp-bridge", "--version"]
try:
    runpy.run_module("bridge", run_name="__main__", alter_sys=True)
except SystemExit as exit:
    assert exit.code in (None, 0), exit.code
{LOADED}
"""

# A verifier created, then run (its HTTP client made) until started. Its issuer is a loopback
# port where nothing listens: a key fetch that starts meanwhile fails at once, and is cancelled.
VERIFIER = f"""
import json, sys
import trio
from channels import OAuthSettings, TokenVerifier
{LOADED}
verifier = TokenVerifier(OAuthSettings(issuers=["http://127.0.0.1:9/"]), ("http://127.0.0.1:7302/mcp",))
{LOADED}
async def main():
    async with trio.open_nursery() as nursery:
        await nursery.start(verifier.run)
        nursery.cancel_scope.cancel()
trio.run(main)
{LOADED}
"""

# A token read and checked as a verifier does, after one was created: prints the modules of joserfc
# and httpx2 the check imported (cryptography loads its OpenSSL backend, ~2 ms, on the first key
# it reads, as it always did). The token and the issuer's key are made by the test: signing
# imports joserfc.
CHECK = """
import json, sys, time
from channels import OAuthSettings, TokenVerifier
from channels._oauth import discovery, token
settings = OAuthSettings(issuers=[ISSUER])
verifier = TokenVerifier(settings, (AUDIENCE,))
before = set(sys.modules)
keys = discovery.signing_keys({"keys": [PUBLIC_KEY]}, ISSUER)
verdict = token.check(token.read(SIGNED, settings), keys, settings, (AUDIENCE,), time.time())
assert verdict.outcome == "accepted", verdict
print(json.dumps(sorted(m for m in set(sys.modules) - before if m.split(".")[0] in ("joserfc", "httpx2"))))
"""


async def loaded_after(script: str) -> list[list[str]]:
    """Run ``script`` in a fresh interpreter; each line it printed, decoded (a list of package names)."""
    with trio.fail_after(TIMEOUT):
        output = await python_output(script)
    return [json.loads(line) for line in output.splitlines() if line.startswith("[")]


async def test_importing_bridge_and_channels_loads_none_of_the_oauth_packages() -> None:
    assert await loaded_after(IMPORT_BRIDGE) == [[]]


async def test_mcp_bridge_version_loads_none_of_the_oauth_packages() -> None:
    assert await loaded_after(BRIDGE_VERSION) == [[]]


async def test_creating_a_token_verifier_loads_joserfc_and_httpx2_and_running_it_loads_the_rest() -> None:
    before, created, ran = await loaded_after(VERIFIER)
    assert before == []
    assert created == ["cryptography", "httpx2", "joserfc"]  # before any request: none waits for them
    assert ran == sorted(OAUTH_PACKAGES)


async def test_a_token_checked_once_a_verifier_exists_imports_no_more_of_joserfc() -> None:
    issuer, audience = "https://as.example", "https://mcp.example/mcp"
    key = ECKey.generate_key("P-256", parameters={"kid": "k"}, private=True)
    claims = {"iss": issuer, "aud": audience, "exp": int(time.time()) + 600}
    signed = jwt.encode({"alg": "ES256", "kid": "k"}, claims, key)
    values = {
        "ISSUER": issuer,
        "AUDIENCE": audience,
        "SIGNED": signed,
        "PUBLIC_KEY": key.as_dict(private=False),
    }
    constants = "".join(f"{name} = {value!r}\n" for name, value in values.items())
    assert await loaded_after(constants + CHECK) == [[]]  # verifier.DEPENDENCIES names all it needs
