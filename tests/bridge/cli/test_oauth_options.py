"""``--oauth-issuer`` and its options, and the ``oauth_*`` keys of the configuration file.

Each bad value is a :class:`ConfigError` naming the option (or the field's path) and the fix;
good ones reach :attr:`ListenOptions.oauth`. The exit code and message of a real process are
checked once, for ``check-config``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bridge._cli.config import read, serve_configs
from bridge._cli.serve import build_serve_config
from bridge._cli.serve_parser import serve_parser
from bridge._errors import ConfigError
from channels import OAuthSettings

from conftest import REPO

COMMAND = [sys.executable]
ISSUER = "https://auth.example.com"
EXIT_CONFIG = 78


def command_line(*argv: str) -> OAuthSettings | None:
    config = build_serve_config(serve_parser().parse_args(list(argv)), COMMAND)
    return config.listen_options.oauth


def client_file(
    directory: Path, text: str = "bridge-client\nsecret-of-the-bridge\n", mode: int = 0o600
) -> str:
    path = directory / "oauth-client"
    path.write_text(text)
    os.chmod(path, mode)
    return str(path)


def test_the_oauth_options_on_the_command_line_reach_the_listen_options(tmp_path: Path) -> None:
    settings = command_line(
        "--listen", "http://127.0.0.1:7302/mcp",
        "--oauth-issuer", ISSUER, "--oauth-issuer", "http://127.0.0.1:9000/realm",
        "--oauth-audience", "https://mcp.example.com/mcp",
        "--oauth-scope", "mcp:tools", "--oauth-scope", "mcp:read",
        "--oauth-introspection", "https://auth.example.com/introspect",
        "--oauth-client-file", client_file(tmp_path),
    )  # fmt: skip
    assert settings is not None
    assert settings.issuers == (ISSUER, "http://127.0.0.1:9000/realm")
    assert settings.audiences == ("https://mcp.example.com/mcp",)
    assert settings.scopes == ("mcp:tools", "mcp:read")
    assert settings.introspection == "https://auth.example.com/introspect"
    assert (settings.client_id, settings.client_secret) == ("bridge-client", "secret-of-the-bridge")
    assert "secret-of-the-bridge" not in repr(settings)


def test_without_oauth_options_the_listen_options_have_no_oauth_settings() -> None:
    assert command_line("--listen", "http://127.0.0.1:7302/mcp") is None


def test_the_audience_is_left_empty_for_the_listener_to_fill_in_with_its_own_uri() -> None:
    settings = command_line("--listen", "http://127.0.0.1:7302/mcp", "--oauth-issuer", ISSUER)
    assert settings is not None and settings.audiences == ()


@pytest.mark.parametrize(
    ("extra", "fragments"),
    [
        (["--oauth-issuer", "http://auth.example.com"], ["--oauth-issuer", "loopback", "https://"]),
        (["--oauth-issuer", "ftp://auth.example.com"], ["--oauth-issuer", "https://HOST"]),
        (["--oauth-issuer", "https://auth.example.com/?x=1"], ["--oauth-issuer", "no query"]),
        (["--oauth-issuer", ISSUER, "--oauth-audience", "mcp"], ["--oauth-audience", "absolute URI"]),
        (
            ["--oauth-issuer", ISSUER, "--oauth-audience", "https://mcp.example.com/mcp#x"],
            ["--oauth-audience", "without a fragment"],
        ),
        (["--oauth-issuer", ISSUER, "--oauth-scope", "a b"], ["--oauth-scope", "one scope"]),
        (["--oauth-audience", "https://mcp.example.com/mcp"], ["--oauth-audience", "add --oauth-issuer"]),
        (["--oauth-scope", "mcp"], ["--oauth-scope", "add --oauth-issuer"]),
        (
            ["--oauth-issuer", ISSUER, "--oauth-introspection", "https://auth.example.com/introspect"],
            ["--oauth-introspection", "add --oauth-client-file"],
        ),
        (
            ["--oauth-issuer", ISSUER, "--oauth-introspection", "http://auth.example.com/introspect"],
            ["--oauth-introspection", "loopback"],
        ),
    ],
)
def test_a_bad_oauth_option_is_a_configuration_error_naming_it_and_the_fix(
    extra: list[str], fragments: list[str]
) -> None:
    with pytest.raises(ConfigError) as raised:
        command_line("--listen", "http://127.0.0.1:7302/mcp", *extra)
    for fragment in fragments:
        assert fragment in str(raised.value)


def test_a_client_file_without_introspection_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--oauth-client-file is for the introspection endpoint"):
        command_line(
            "--listen", "http://127.0.0.1:7302/mcp", "--oauth-issuer", ISSUER,
            "--oauth-client-file", client_file(tmp_path),
        )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "mode", "fragment"),
    [
        ("id\nS3cr3tValue\n", 0o644, "readable by other users; run: chmod o-rwx"),
        ("S3cr3tValue\n", 0o600, "expected two lines"),
        ("# the bridge\nid\nS3cr3tValue\nmore\n", 0o600, "found 3"),
    ],
)
def test_an_unusable_client_file_is_refused_without_showing_its_secret(
    tmp_path: Path, text: str, mode: int, fragment: str
) -> None:
    path = client_file(tmp_path, text, mode)
    with pytest.raises(ConfigError) as raised:
        command_line(
            "--listen", "http://127.0.0.1:7302/mcp", "--oauth-issuer", ISSUER,
            "--oauth-introspection", "https://auth.example.com/introspect", "--oauth-client-file", path,
        )  # fmt: skip
    message = str(raised.value)
    assert fragment in message and "--oauth-client-file" in message
    assert "S3cr3tValue" not in message


def test_a_missing_client_file_is_named() -> None:
    with pytest.raises(ConfigError, match="--oauth-client-file /nonexistent/client: No such file"):
        command_line(
            "--listen", "http://127.0.0.1:7302/mcp", "--oauth-issuer", ISSUER,
            "--oauth-introspection", "https://auth.example.com/introspect",
            "--oauth-client-file", "/nonexistent/client",
        )  # fmt: skip


def test_oauth_options_without_an_http_or_websocket_listener_are_refused() -> None:
    with pytest.raises(ConfigError, match="--oauth-issuer is for ws://, wss://, http:// and https://"):
        command_line("--listen", "tcp:127.0.0.1:7300", "--oauth-issuer", ISSUER)


@pytest.mark.parametrize("host", ["0.0.0.0", "[::]"])
def test_a_wildcard_bind_without_an_audience_is_refused_with_an_example(host: str) -> None:
    with pytest.raises(ConfigError) as raised:
        command_line("--listen", f"http://{host}:7302/mcp", "--oauth-issuer", ISSUER)
    message = str(raised.value)
    assert "--oauth-audience" in message and "https://mcp.example.com/mcp" in message
    audience = ("--oauth-audience", "https://mcp.example.com/mcp")
    settings = command_line("--listen", f"http://{host}:7302/mcp", "--oauth-issuer", ISSUER, *audience)
    assert settings is not None and settings.audiences == (audience[1],)


def test_a_socket_activated_http_listener_needs_an_explicit_audience() -> None:
    with pytest.raises(ConfigError, match="--oauth-audience"):
        command_line("--listen", "http+fd:web/mcp", "--oauth-issuer", ISSUER)


def test_a_non_loopback_bind_with_oauth_needs_no_insecure_no_auth_flag() -> None:
    settings = command_line(
        "--listen", "http://192.0.2.1:7302/mcp", "--oauth-issuer", ISSUER,
        "--oauth-audience", "https://mcp.example.com/mcp",
    )  # fmt: skip
    assert settings is not None  # the listener's own loopback rule is tested in tests/channels/http


# -- the configuration file ---------------------------------------------------------------------


def config(directory: Path, listener: str, kind: str = "http") -> Path:
    path = directory / "bridge.toml"
    address = 'address = "127.0.0.1:7302"\npath = "/mcp"\n' if kind != "fd" else 'name = "web"\n'
    path.write_text(
        f'[servers.a]\ncommand = ["x"]\n[[servers.a.listeners]]\nkind = "{kind}"\n{address}{listener}'
    )
    return path


def test_the_oauth_keys_of_a_listener_reach_its_listen_options(tmp_path: Path) -> None:
    path = config(
        tmp_path,
        f'oauth_issuer = ["{ISSUER}"]\noauth_audience = ["https://mcp.example.com/mcp"]\n'
        'oauth_scope = ["mcp:tools"]\noauth_introspection = "https://auth.example.com/introspect"\n'
        f'oauth_client_file = "{client_file(tmp_path)}"\n',
    )
    settings = serve_configs(read(str(path)))["a"].listener_options[0].oauth
    assert settings is not None
    assert settings.issuers == (ISSUER,) and settings.scopes == ("mcp:tools",)
    assert settings.client_id == "bridge-client"


@pytest.mark.parametrize(
    ("listener", "kind", "fragments"),
    [
        ('oauth_issuer = ["http://auth.example.com"]\n', "http", ["listeners[0].oauth_issuer", "loopback"]),
        (
            'oauth_issuer = "https://auth.example.com"\n',
            "http",
            ["listeners[0].oauth_issuer: expected a list"],
        ),
        (
            'oauth_scope = ["mcp"]\n',
            "http",
            ["listeners[0].oauth_scope", "add servers.a.listeners[0].oauth_issuer"],
        ),
        (f'oauth_issuer = ["{ISSUER}"]\n', "tcp", ["listeners[0].oauth_issuer: not used by kind = 'tcp'"]),
        (
            f'oauth_issuer = ["{ISSUER}"]\noauth_introspection = "https://auth.example.com/i"\n',
            "http",
            ["listeners[0].oauth_introspection needs", "oauth_client_file"],
        ),
        (
            f'oauth_issuer = ["{ISSUER}"]\nprotocol = "http"\n',
            "fd",
            ["listeners[0].oauth_audience: required"],
        ),
        (f'oauth_issuer = ["{ISSUER}"]\n', "fd", ['OAuth is for protocol = "http"']),
    ],
)
def test_a_bad_oauth_key_in_the_file_is_an_error_naming_its_path(
    tmp_path: Path, listener: str, kind: str, fragments: list[str]
) -> None:
    path = config(tmp_path, listener, kind)
    if kind == "tcp":
        path.write_text(path.read_text().replace('path = "/mcp"\n', ""))
    with pytest.raises(ConfigError) as raised:
        serve_configs(read(str(path)))
    for fragment in fragments:
        assert fragment in str(raised.value)


def test_check_config_reports_a_wildcard_bind_without_an_audience_as_a_configuration_error(
    tmp_path: Path,
) -> None:
    path = config(tmp_path, f'oauth_issuer = ["{ISSUER}"]\n')
    path.write_text(
        path.read_text().replace("127.0.0.1", "0.0.0.0").replace('["x"]', f'["{sys.executable}"]')
    )
    result = subprocess.run(
        [sys.executable, "-m", "bridge", "check-config", str(path)],
        capture_output=True,
        cwd=REPO,
        timeout=20,
        check=False,
    )
    stderr = result.stderr.decode()
    assert result.returncode == EXIT_CONFIG, stderr
    assert "servers.a.listeners[0]" in stderr and "--oauth-audience" in stderr
    assert "Traceback" not in stderr
