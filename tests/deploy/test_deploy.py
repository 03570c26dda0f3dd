"""deploy/: the container image, the Kubernetes manifests and the reverse-proxy examples.

What can run here runs. nginx, Caddy and HAProxy (Debian packages, which .ci/run installs) serve
the shipped examples, with only their addresses and certificate paths replaced, in front of
bridges in this process, and the tests check on the wire that event streams pass event by event
(each checked event is one whose request cannot have been answered yet), that Host, Origin and
X-Forwarded-* reach the bridge as its checks and ``trust_proxy`` expect, and that HAProxy keeps
each legacy session on the replica that opened it. A proxy that is not installed skips its
tests, unless CI is set (then they fail).

No Docker engine runs here, and the base image could not be pulled: the Dockerfile's COPY
sources are checked against the build context its ignore file leaves and against what
pyproject.toml needs to build the package. The manifests are validated against Kubernetes'
schemas (kubernetes-validate, strict) and against each other, the image and the bridge's
configuration file.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tomllib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from bridge import Daemon, Limits
from bridge._cli import config as config_file
from channels import HttpOptions, ListenOptions
from channels._core.options import DEFAULT_SSE_KEEPALIVE

from conftest import REPO, call, example_server, poll, request, result_text, running_bridge
from rawhttp import POST_HEADERS, RawHttp, Response

DEPLOY = REPO / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
TIMEOUT = 20
PUBLIC_HOST = "mcp.example.com"  # the name the examples serve
LEGACY = "2025-06-18"
MODERN = "2026-07-28"
TOKEN = "deploy-test-token-Qm3xV8rLz2KpW7sN"
PROXIES = ["nginx", "caddy", "haproxy"]
# Caddy and HAProxy notice that a client left only when they next write to it: the bridge's
# keep-alive comments on idle event streams come this often here (15 s by default).
KEEPALIVE = 0.5
# A quick stop: the modern test leaves the shared child sleeping, and it does not read stdin.
QUICK_STOP = Limits(drain_timeout=2.0, stop_stdin_timeout=0.2, stop_term_timeout=2.0)


def needed(what: str, fix: str) -> None:
    """Skip the test for lack of ``what``; fail it if CI is set (.ci/run must provide it)."""
    message = f"{what} is not installed ({fix})"
    if os.environ.get("CI"):
        pytest.fail(f"{message}; CI is set, and .ci/run installs it")
    pytest.skip(message)


def installed(tool: str) -> str:
    """The path of a proxy's executable (Debian puts nginx and haproxy in /usr/sbin)."""
    path = shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")
    if path is None:
        needed(tool, f"apt-get install {tool}")
    assert path is not None
    return path


def module(name: str) -> Any:
    """A test dependency from pyproject.toml's test extra."""
    try:
        return importlib.import_module(name)
    except ImportError:
        needed(f"the Python module {name}", "pip install -e '.[test]'")


def replaced(text: str, *pairs: tuple[str, str]) -> str:
    """``text`` with each ``old`` replaced by ``new``; each must occur exactly once, so that a
    changed example fails here rather than being run half-substituted."""
    for old, new in pairs:
        assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in the example"
        text = text.replace(old, new)
    return text


def free_port() -> int:
    """A loopback port that was free a moment ago, for a proxy that must be told its port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def port_of(daemon: Daemon) -> int:
    return int(daemon.addresses[0].rsplit(":", 1)[1].split("/")[0])


# -- messages ---------------------------------------------------------------------------------


def initialize() -> dict[str, Any]:
    return request(
        1,
        "initialize",
        {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    )


def modern_call(request_id: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    return request(request_id, "tools/call", {"name": tool, "arguments": arguments, "_meta": meta})


def modern_headers(message: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        ("mcp-protocol-version", MODERN),
        ("mcp-method", message["method"]),
        ("mcp-name", message["params"]["name"]),
    ]


# How long the first event of a stream may take through a proxy before the test says it is held.
FIRST_EVENT_WAIT = 10


@attrs.define
class Events:
    """The JSON messages of one response's event stream, in order (keep-alives and priming
    events, which carry no data, skipped)."""

    client: RawHttp
    pending: bytes = b""
    ready: list[dict[str, Any]] = attrs.field(factory=list)

    async def next_message(self) -> dict[str, Any]:
        while not self.ready:
            events, self.pending = await self.client.next_events(self.pending)
            assert events, "the event stream ended"
            self.ready += [json.loads(event["data"]) for event in events if event.get("data")]
        return self.ready.pop(0)

    async def first_message(self) -> dict[str, Any]:
        """The first message, which the proxy must pass on before the response is complete."""
        with trio.move_on_after(FIRST_EVENT_WAIT):
            return await self.next_message()
        raise AssertionError(f"no event within {FIRST_EVENT_WAIT} s: the proxy holds the event stream back")


# -- the proxies, as shipped but for addresses and certificates -------------------------------------


@attrs.frozen
class PublicTls:
    """A CA and a certificate for PUBLIC_HOST, made at test time (trustme)."""

    ca: Any
    cert: str
    key: str
    combined: str  # certificate and key in one file, as HAProxy reads them

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        return context


@pytest.fixture(scope="module")
def public_tls(tmp_path_factory: pytest.TempPathFactory) -> PublicTls:
    trustme = module("trustme")
    directory = tmp_path_factory.mktemp("public-tls")
    ca = trustme.CA()
    issued = ca.issue_cert(PUBLIC_HOST)
    cert, key, combined = directory / "cert.pem", directory / "key.pem", directory / "combined.pem"
    cert.write_bytes(issued.cert_chain_pems[0].bytes())
    key.write_bytes(issued.private_key_pem.bytes())
    combined.write_bytes(cert.read_bytes() + key.read_bytes())
    for path in (cert, key, combined):
        path.chmod(0o600)
    return PublicTls(ca, str(cert), str(key), str(combined))


def nginx_wrapper(directory: Path, site: str) -> Path:
    """An nginx.conf that includes ``site`` (an example's server block), with every path nginx
    writes in ``directory``: no privilege needed, and no other nginx disturbed."""
    (directory / "site.conf").write_text(site)
    conf = directory / "nginx.conf"
    conf.write_text(
        f"""
daemon off;
master_process off;
worker_processes 1;
pid {directory}/nginx.pid;
error_log {directory}/error.log;
events {{
    worker_connections 64;
}}
http {{
    access_log {directory}/access.log;
    client_body_temp_path {directory}/client_body;
    proxy_temp_path {directory}/proxy;
    fastcgi_temp_path {directory}/fastcgi;
    uwsgi_temp_path {directory}/uwsgi;
    scgi_temp_path {directory}/scgi;
    include {directory}/site.conf;
}}
"""
    )
    return conf


def nginx_site(tls: PublicTls, port: int | None = None, upstreams: Sequence[int] = ()) -> str:
    """deploy/nginx/mcp-bridge.conf with test certificates, and with ``port`` and ``upstreams``
    for its listen and upstream addresses if given."""
    pairs = [
        ("/etc/letsencrypt/live/mcp.example.com/fullchain.pem", tls.cert),
        ("/etc/letsencrypt/live/mcp.example.com/privkey.pem", tls.key),
    ]
    if port is not None:
        pairs += [
            ("listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;"),
            ("    listen [::]:443 ssl;\n", ""),
            ("server 127.0.0.1:8080;", " ".join(f"server 127.0.0.1:{each};" for each in upstreams)),
        ]
    return replaced((DEPLOY / "nginx" / "mcp-bridge.conf").read_text(), *pairs)


def nginx_command(
    directory: Path, port: int, upstreams: Sequence[int], tls: PublicTls
) -> tuple[list[str], dict[str, str]]:
    conf = nginx_wrapper(directory, nginx_site(tls, port, upstreams))
    argv = [installed("nginx"), "-p", str(directory), "-e", f"{directory}/error.log", "-c", str(conf)]
    return argv, dict(os.environ)


def caddy_command(
    directory: Path, port: int, upstreams: Sequence[int], tls: PublicTls
) -> tuple[list[str], dict[str, str]]:
    site = replaced(
        (DEPLOY / "caddy" / "Caddyfile").read_text(),
        (f"{PUBLIC_HOST} {{", f"{PUBLIC_HOST}:{port} {{\n\tbind 127.0.0.1\n\ttls {tls.cert} {tls.key}"),
        (
            "reverse_proxy 127.0.0.1:8080 {",
            f"reverse_proxy {' '.join(f'127.0.0.1:{p}' for p in upstreams)} {{",
        ),
    )
    # No admin API, no port 80 redirect listener, and Caddy's storage in the test's directory.
    options = f"{{\n\tadmin off\n\tgrace_period 1s\n\tauto_https disable_redirects\n\tstorage file_system {directory}/data\n}}\n"
    caddyfile = directory / "Caddyfile"
    caddyfile.write_text(options + site)
    home = str(directory / "home")
    env = {**os.environ, "HOME": home, "XDG_DATA_HOME": home, "XDG_CONFIG_HOME": home}
    return [installed("caddy"), "run", "--adapter", "caddyfile", "--config", str(caddyfile)], env


HAPROXY_SERVERS = "    server replica1 192.0.2.11:8080 check\n    server replica2 192.0.2.12:8080 check\n"


def haproxy_config(tls: PublicTls, port: int | None = None, upstreams: Sequence[int] = ()) -> str:
    """deploy/haproxy/haproxy.cfg with a test certificate, and with ``port`` and ``upstreams``
    for its bind and server addresses if given."""
    bind = "bind :443" if port is None else f"bind 127.0.0.1:{port}"
    pairs = [("bind :443 ssl crt /etc/haproxy/certs/mcp.example.com.pem", f"{bind} ssl crt {tls.combined}")]
    if port is not None:
        servers = "".join(
            f"    server replica{number} 127.0.0.1:{each} check\n" for number, each in enumerate(upstreams, 1)
        )
        pairs.append((HAPROXY_SERVERS, servers))
    return replaced((DEPLOY / "haproxy" / "haproxy.cfg").read_text(), *pairs)


def haproxy_command(
    directory: Path, port: int, upstreams: Sequence[int], tls: PublicTls
) -> tuple[list[str], dict[str, str]]:
    config = directory / "haproxy.cfg"
    config.write_text(haproxy_config(tls, port, upstreams))
    return [installed("haproxy"), "-db", "-f", str(config)], dict(os.environ)


COMMANDS: dict[str, Callable[..., tuple[list[str], dict[str, str]]]] = {
    "nginx": nginx_command,
    "caddy": caddy_command,
    "haproxy": haproxy_command,
}


@attrs.frozen
class Proxy:
    """A running proxy: HTTPS on 127.0.0.1:``port`` for PUBLIC_HOST."""

    port: int
    tls: PublicTls

    async def client(self, host: str = PUBLIC_HOST) -> RawHttp:
        """A new connection, TLS verified for PUBLIC_HOST, sending ``Host: host``."""
        stream = await trio.open_tcp_stream("127.0.0.1", self.port)
        secure = trio.SSLStream(stream, self.tls.client_context(), server_hostname=PUBLIC_HOST)
        await secure.do_handshake()
        return RawHttp(secure, host)  # type: ignore[arg-type]

    async def post(
        self, message: Any, headers: Sequence[tuple[str, str]] = (), *, host: str = PUBLIC_HOST
    ) -> Response:
        client = await self.client(host)
        try:
            return await client.request("POST", "/mcp", [*POST_HEADERS, *headers], message)
        finally:
            await client.aclose()

    async def open_session(self) -> list[tuple[str, str]]:
        """Open a legacy session; return the headers its requests carry."""
        opened = await self.post(initialize())
        assert opened.status == 200, opened
        session_id = opened.header("mcp-session-id")
        assert session_id, opened
        headers = [("mcp-session-id", session_id), ("mcp-protocol-version", LEGACY)]
        initialized = await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
        assert initialized.status == 202, initialized
        return headers


@asynccontextmanager
async def running_proxy(
    kind: str, directory: Path, upstreams: Sequence[int], tls: PublicTls
) -> AsyncIterator[Proxy]:
    """Run ``kind`` with its example configuration until the block ends; yield once it accepts."""
    port = free_port()
    argv, env = COMMANDS[kind](directory, port, upstreams, tls)
    log = directory / f"{kind}.log"
    with open(log, "wb") as output:
        process = await trio.lowlevel.open_process(
            argv, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, env=env, cwd=directory
        )
    try:
        while True:  # until it accepts: a proxy tells no one when it is ready
            if process.poll() is not None:
                raise AssertionError(f"{kind} exited with status {process.returncode}:\n{log.read_text()}")
            try:
                probe = await trio.open_tcp_stream("127.0.0.1", port)
            except OSError:
                await trio.sleep(0.02)
                continue
            await probe.aclose()
            break
        yield Proxy(port, tls)
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                with trio.move_on_after(5):
                    await process.wait()
            if process.returncode is None:
                process.kill()
            await process.wait()


@asynccontextmanager
async def bridge_behind_proxy() -> AsyncIterator[tuple[int, Daemon]]:
    """The bridge as the examples run it: on loopback, trusting the proxy's X-Forwarded-* headers
    (``--trust-proxy``), accepting the public name (``--allow-host``); child mode auto."""
    options = ListenOptions(
        allow_hosts=frozenset({PUBLIC_HOST}), http=HttpOptions(trust_proxy=True, sse_keepalive=KEEPALIVE)
    )
    async with running_bridge(
        example_server(),
        ["http://127.0.0.1:0/mcp"],
        listen_options=options,
        child_mode="auto",
        limits=QUICK_STOP,
    ) as daemon:
        yield port_of(daemon), daemon


# -- event streams through each proxy ----------------------------------------------------------------


@pytest.mark.parametrize("kind", PROXIES)
async def test_a_legacy_sessions_event_passes_the_proxy_before_the_reply_it_precedes_exists(
    kind: str, tmp_path: Path, public_tls: PublicTls
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            bridge_behind_proxy() as (port, _),
            running_proxy(kind, tmp_path, [port], public_tls) as proxy,
        ):
            session = await proxy.open_session()
            client = await proxy.client()
            asking = call(3, "ask_client", method="roots/list")
            await client.send_request("POST", "/mcp", [*POST_HEADERS, *session], json.dumps(asking).encode())
            status, headers = await client.read_head()
            assert status == 200
            assert dict(headers)["content-type"].startswith("text/event-stream")
            events = Events(client)
            # The server now waits for the client's answer: the reply to request 3 cannot exist
            # until the answer is posted below, so a proxy that held the response back until it
            # was complete would never let this event through.
            asked = await events.first_message()
            assert asked["method"] == "roots/list"
            answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"roots": []}}
            answered = await proxy.post(answer, session)
            assert answered.status == 202
            reply = await events.next_message()
            assert reply["id"] == 3
            assert json.loads(result_text(reply)) == {"roots": []}
            await client.aclose()


@pytest.mark.parametrize("kind", PROXIES)
async def test_a_modern_requests_progress_passes_the_proxy_while_the_tool_still_runs(
    kind: str, tmp_path: Path, public_tls: PublicTls
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            bridge_behind_proxy() as (port, daemon),
            running_proxy(kind, tmp_path, [port], public_tls) as proxy,
        ):
            message = modern_call("slow", "sleep", seconds=3600)
            message["params"]["_meta"]["progressToken"] = "p"
            client = await proxy.client()
            headers = [*POST_HEADERS, *modern_headers(message)]
            await client.send_request("POST", "/mcp", headers, json.dumps(message).encode())
            status, response_headers = await client.read_head()
            assert status == 200
            assert dict(response_headers)["content-type"].startswith("text/event-stream")
            # The tool answers in an hour; its progress notification is sent at once.
            progress = await Events(client).first_message()
            assert progress["method"] == "notifications/progress"
            assert progress["params"] == {"progressToken": "p", "progress": 0}
            assert daemon.statistics().requests_in_flight == 1
            # 2026-07-28 cancels a request by closing its response: the proxy must pass that on
            # (nginx does at once; Caddy and HAProxy when they next write to the client).
            await client.aclose()
            await poll(lambda: daemon.statistics().requests_in_flight == 0)


@pytest.mark.parametrize("kind", PROXIES)
async def test_through_the_proxy_the_bridge_refuses_a_foreign_origin_and_logs_the_real_client(
    kind: str, tmp_path: Path, public_tls: PublicTls, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="channels.http")
    with trio.fail_after(TIMEOUT):
        async with (
            bridge_behind_proxy() as (port, _),
            running_proxy(kind, tmp_path, [port], public_tls) as proxy,
        ):
            # Origin reaches the bridge unchanged (a proxy that dropped it would let a foreign
            # page in), and X-Forwarded-For is the proxy's word, not the client's.
            refused = await proxy.post(
                initialize(), [("origin", "https://evil.example"), ("x-forwarded-for", "203.0.113.9")]
            )
            assert refused.status == 403, refused
            assert refused.json()["error"]["data"]["reason"] == "origin-not-allowed"
            logged = [record.getMessage() for record in caplog.records if "refused" in record.getMessage()]
            assert logged, caplog.text
            assert logged[-1].startswith("http 127.0.0.1"), logged
            assert "203.0.113.9" not in caplog.text


@pytest.mark.parametrize("kind", PROXIES)
async def test_through_the_proxy_only_the_proxys_forwarded_host_counts_and_a_rebinding_host_opens_no_session(
    kind: str, tmp_path: Path, public_tls: PublicTls
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            bridge_behind_proxy() as (port, _),
            running_proxy(kind, tmp_path, [port], public_tls) as proxy,
        ):
            # The proxy's X-Forwarded-Host replaces the one a client sends.
            claimed = await proxy.post(initialize(), [("x-forwarded-host", "evil.example")])
            assert claimed.status == 200, claimed
            # A page on evil.example whose name now resolves to the proxy: its requests carry
            # Host: evil.example, and it may add any X-Forwarded-Host it likes.
            rebound = await proxy.post(initialize(), [("x-forwarded-host", PUBLIC_HOST)], host="evil.example")
            assert rebound.header("mcp-session-id") is None, rebound
            if kind == "caddy":  # its site answers to its own name only: nothing reaches the bridge
                assert (rebound.status, rebound.body) == (200, b""), rebound
            else:  # the proxy set X-Forwarded-Host from Host, and the bridge refused it
                assert rebound.status == 403, rebound
                assert rebound.json()["error"]["data"]["reason"] == "host-not-allowed"


# -- session affinity ----------------------------------------------------------------------------


async def test_haproxy_keeps_each_legacy_session_on_the_replica_that_opened_it(
    tmp_path: Path, public_tls: PublicTls
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            bridge_behind_proxy() as (first_port, first),
            bridge_behind_proxy() as (second_port, second),
            running_proxy("haproxy", tmp_path, [first_port, second_port], public_tls) as proxy,
        ):
            sessions = [await proxy.open_session(), await proxy.open_session()]
            # Round robin opened them on different replicas, each with a child of its own (and
            # each replica has its shared child for modern clients)...
            assert first.statistics().children == 2
            assert second.statistics().children == 2
            # ... and every request of a session, balanced alone, would reach the other
            # replica every other time and get 404.
            for number in range(4):
                for index, session in enumerate(sessions):
                    text = f"session {index} request {number}"
                    response = await proxy.post(call(number, "echo", text=text), session)
                    assert response.status == 200, response
                    assert result_text(response.messages()[0]) == text


# -- the examples, as shipped, pass their own tools' checks -----------------------------------------


def test_the_nginx_example_passes_nginx_t_with_only_its_certificate_paths_replaced(
    tmp_path: Path, public_tls: PublicTls
) -> None:
    nginx = installed("nginx")
    conf = nginx_wrapper(tmp_path, nginx_site(public_tls))
    result = subprocess.run(
        [nginx, "-t", "-p", str(tmp_path), "-e", f"{tmp_path}/error.log", "-c", str(conf)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_the_caddyfile_as_shipped_passes_caddy_validate(tmp_path: Path) -> None:
    caddy = installed("caddy")
    home = str(tmp_path)
    result = subprocess.run(
        [caddy, "validate", "--adapter", "caddyfile", "--config", str(DEPLOY / "caddy" / "Caddyfile")],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        env={**os.environ, "HOME": home, "XDG_DATA_HOME": home, "XDG_CONFIG_HOME": home},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    formatted = subprocess.run(
        [caddy, "fmt", str(DEPLOY / "caddy" / "Caddyfile")],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=True,
    )
    assert formatted.stdout == (DEPLOY / "caddy" / "Caddyfile").read_text(), "run: caddy fmt --overwrite"


def test_the_haproxy_example_passes_haproxy_c_with_only_its_certificate_path_replaced(
    tmp_path: Path, public_tls: PublicTls
) -> None:
    haproxy = installed("haproxy")
    config = tmp_path / "haproxy.cfg"
    config.write_text(haproxy_config(public_tls))
    result = subprocess.run(
        [haproxy, "-c", "-f", str(config)], capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def seconds(text: str) -> float:
    value, unit = re.fullmatch(r"(\d+)(ms|s|m|h)?", text).groups()  # type: ignore[union-attr]
    return int(value) * {"ms": 0.001, "s": 1, None: 1, "m": 60, "h": 3600}[unit]


def test_every_proxy_example_waits_longer_for_the_bridge_than_its_event_stream_keep_alive() -> None:
    nginx = (DEPLOY / "nginx" / "mcp-bridge.conf").read_text()
    haproxy = (DEPLOY / "haproxy" / "haproxy.cfg").read_text()
    waits = {
        "nginx proxy_read_timeout": re.findall(r"^\s*proxy_read_timeout (\S+);", nginx, re.M),
        "haproxy timeout server": re.findall(r"^\s*timeout server (\S+)", haproxy, re.M),
        "haproxy timeout client": re.findall(r"^\s*timeout client (\S+)", haproxy, re.M),
    }
    for name, found in waits.items():
        assert len(found) == 1, f"{name}: {found}"
        assert seconds(found[0]) > 2 * DEFAULT_SSE_KEEPALIVE, f"{name} {found[0]}"
    # Caddy has no read timeout on a proxied response unless one is set.
    assert "read_timeout" not in (DEPLOY / "caddy" / "Caddyfile").read_text()


# -- the container image -----------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` of deploy/Dockerfile, continuation lines joined and runs of
    white space made one space."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    instructions = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            instructions.append((word.upper(), " ".join(rest.split())))
    return instructions


def build_context_excludes(relative: str) -> bool:
    """Whether deploy/Dockerfile.dockerignore leaves ``relative`` out of the build context.

    Docker's rules, as far as this file uses them: patterns in order, the last one matching the
    path or one of its parent directories decides, ``!`` re-includes, ``*`` stays within one
    path segment and ``**`` spans any number.
    """
    patterns = [
        line.strip()
        for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    parts = relative.split("/")
    prefixes = ["/".join(parts[: length + 1]) for length in range(len(parts))]
    excluded = False
    for pattern in patterns:
        include = pattern.startswith("!")
        glob = pattern.removeprefix("!").strip("/")
        regex = "".join(
            ".*" if token == "**" else "[^/]*" if token == "*" else re.escape(token)
            for token in re.split(r"(\*\*|\*)", glob)
        )
        if any(re.fullmatch(regex, prefix) for prefix in prefixes):
            excluded = not include
    return excluded


def copied_sources() -> list[str]:
    sources = []
    for instruction, arguments in dockerfile_instructions():
        if instruction == "COPY" and "--from=" not in arguments:
            *paths, _ = arguments.split()
            sources += [path for path in paths if not path.startswith("--")]
    return sources


def test_every_file_the_dockerfile_copies_exists_in_the_build_context_its_ignore_file_leaves() -> None:
    sources = copied_sources()
    assert sources, "no COPY in deploy/Dockerfile"
    for source in sources:
        path = REPO / source
        assert path.exists(), f"COPY {source}: no such file in the build context (the repository's root)"
        files = [path] if path.is_file() else [file for file in path.rglob("*") if file.is_file()]
        kept = [file for file in files if not build_context_excludes(str(file.relative_to(REPO)))]
        assert kept, f"COPY {source}: Dockerfile.dockerignore leaves it out of the build context"
        if path.is_dir():
            expected = [file for file in files if "__pycache__" not in file.parts]
            assert kept == expected, f"COPY {source}: the ignore file drops some of it"
    assert build_context_excludes(".git/HEAD")
    assert build_context_excludes("tests/conftest.py")
    assert build_context_excludes("bridge/__pycache__/_cli.cpython-312.pyc")


def test_the_dockerfile_copies_all_that_pyproject_needs_to_build_the_package() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    sources = {source.rstrip("/") for source in copied_sources()}
    # The packages are found by pattern (`bridge*`, `channels*`: each top folder and its rooms).
    patterns = project["tool"]["setuptools"]["packages"]["find"]["include"]
    needed_paths = {"pyproject.toml", project["project"]["readme"], *(p.rstrip("*") for p in patterns)}
    assert needed_paths <= sources, f"missing from the image: {sorted(needed_paths - sources)}"
    instructions = dockerfile_instructions()
    assert ("RUN", "pip install --no-cache-dir . && rm -rf /tmp/mcp-bridge") in instructions
    # The image's configuration runs the example server from the installed package.
    assert (REPO / "bridge" / "example_server" / "__main__.py").is_file()
    config = tomllib.loads((DEPLOY / "config.toml").read_text())
    assert config["servers"]["example"]["command"] == ["python3", "-m", "bridge.example_server"]


def test_the_image_runs_as_a_numeric_non_root_user_and_checks_health_on_its_admin_address() -> None:
    instructions = dict(dockerfile_instructions())  # the last of each kind
    user = instructions["USER"].split(":")
    assert all(part.isdigit() and int(part) != 0 for part in user), instructions["USER"]
    command = json.loads(instructions["CMD"])
    admin = command[command.index("--admin") + 1]
    assert admin.startswith("tcp:127.0.0.1:")
    assert f"http://127.0.0.1:{admin.rsplit(':', 1)[1]}/readyz" in instructions["HEALTHCHECK"]
    assert command[command.index("--config") + 1] == "/etc/mcp-bridge/config.toml"
    assert instructions["EXPOSE"] == str(listener_port(tomllib.loads((DEPLOY / "config.toml").read_text())))
    assert json.loads(instructions["ENTRYPOINT"])[-1] == "mcp-bridge"


def listener_port(config: dict[str, Any]) -> int:
    ((server,),) = [list(config["servers"].values())]
    (listener,) = server["listeners"]
    return int(listener["address"].rsplit(":", 1)[1])


def configmap_toml() -> str:
    yaml = module("yaml")
    configmap = yaml.safe_load((KUBERNETES / "configmap.yaml").read_text())
    text: str = configmap["data"]["config.toml"]
    return text


@pytest.mark.parametrize("source", ["image", "configmap"])
def test_the_shipped_configuration_files_pass_check_config(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if "http" not in config_file.LISTENER_KINDS:
        pytest.xfail(
            "the configuration file has no http listener kind yet (bridge/_cli/config.py LISTENER_KINDS); "
            "the examples are written for it"
        )
    text = (DEPLOY / "config.toml").read_text() if source == "image" else configmap_toml()
    token_file = tmp_path / "tokens"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    monkeypatch.setenv("MCP_BRIDGE_TOKEN", TOKEN)
    text = text.replace("/run/secrets/mcp-bridge/tokens", str(token_file))
    path = tmp_path / "config.toml"
    path.write_text(text)
    configs = config_file.serve_configs(config_file.read(str(path)))
    assert list(configs) == ["example"]


# -- Kubernetes ---------------------------------------------------------------------------------------


def manifests() -> dict[str, dict[str, Any]]:
    """Every document under deploy/kubernetes, by kind (one of each)."""
    yaml = module("yaml")
    documents: dict[str, dict[str, Any]] = {}
    for path in sorted(KUBERNETES.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            assert document["kind"] not in documents, f"two {document['kind']}s"
            documents[document["kind"]] = document
    return documents


def test_the_kubernetes_manifests_pass_strict_schema_validation_from_1_25_to_the_newest() -> None:
    validate = module("kubernetes_validate")
    documents = manifests()
    assert set(documents) == {"ConfigMap", "Deployment", "Service", "Kustomization"}
    for version in ("1.25.0", validate.latest_version()):
        for kind, document in documents.items():
            if kind != "Kustomization":  # kustomize's own file, not a cluster resource
                validate.validate(document, version, strict=True)


def test_the_kubernetes_manifests_agree_with_each_other_the_image_and_the_configuration() -> None:
    documents = manifests()
    configmap, deployment, service = documents["ConfigMap"], documents["Deployment"], documents["Service"]
    kustomization = documents["Kustomization"]
    assert sorted(kustomization["resources"]) == sorted(
        path.name for path in KUBERNETES.glob("*.yaml") if path.name != "kustomization.yaml"
    )
    pod = deployment["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["selector"].items() <= labels.items()
    (container,) = pod["spec"]["containers"]
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    (service_port,) = service["spec"]["ports"]
    config = tomllib.loads(configmap["data"]["config.toml"])
    assert ports[service_port["targetPort"]] == listener_port(config)

    # The configuration file is where --config says, and the token file where it names it.
    args = container["args"]
    mounts = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in pod["spec"]["volumes"]}
    config_volume = next(name for name, volume in volumes.items() if "configMap" in volume)
    assert volumes[config_volume]["configMap"]["name"] == configmap["metadata"]["name"]
    assert f"{mounts[config_volume]}/config.toml" == args[args.index("--config") + 1]
    secret_volume = next(name for name, volume in volumes.items() if "secret" in volume)
    (listener,) = next(iter(config["servers"].values()))["listeners"]
    (token_file,) = listener["token_file"]
    assert token_file.startswith(mounts[secret_volume] + "/")
    assert volumes[secret_volume]["secret"]["defaultMode"] & 0o007 == 0  # the bridge refuses those

    # The probes ask the admin endpoint that --admin serves.
    admin_port = args[args.index("--admin") + 1].rsplit(":", 1)[1]
    for probe, path in (
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ):
        assert f"http://127.0.0.1:{admin_port}{path}" in " ".join(container[probe]["exec"]["command"])

    # The image's user, and time for the bridge to stop on its own before SIGKILL.
    image_user = dict(dockerfile_instructions())["USER"].split(":")
    security = pod["spec"]["securityContext"]
    assert [str(security["runAsUser"]), str(security["runAsGroup"])] == image_user
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    pre_stop = int(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    limits = next(iter(config["servers"].values())).get("limits", {})
    drain = seconds(limits.get("drain_timeout", "10s"))
    child_stop = Limits().stop_stdin_timeout + Limits().stop_term_timeout
    assert pod["spec"]["terminationGracePeriodSeconds"] > pre_stop + drain + child_stop
    # HOME (npm and uv caches) and /tmp are writable despite the read-only root.
    writable = {mounts[name] for name, volume in volumes.items() if "emptyDir" in volume}
    assert writable == {"/home/mcp", "/tmp"}
