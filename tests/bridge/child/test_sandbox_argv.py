"""bwrap's argv, built sans-IO from the sandbox settings, the host's facts and the command."""

from __future__ import annotations

import pytest

from bridge import Sandbox
from bridge._child.bwrap import HostFacts, bwrap_argv

FACTS = HostFacts(
    bwrap="/usr/bin/bwrap",
    env="/usr/bin/env",
    cwd="/srv/app",
    hidden=("/home", "/root", "/run", "/home/alice"),
    visible=("/home/alice/.venv", "/usr/lib/python3", "/srv/app"),
    hidden_files=(("/etc/mcp-bridge/tokens", False), ("/etc/mcp-bridge/keys", True)),
    resolv_conf="/run/systemd/resolve/stub-resolv.conf",
)
COMMAND = ["/home/alice/.venv/bin/python", "-m", "server", "--flag=$HOME; rm -rf /"]


def pairs(argv: list[str], option: str) -> list[str]:
    return [argv[i + 1] for i, word in enumerate(argv) if word == option]


def test_the_command_runs_last_verbatim_behind_env_restoring_sigterm() -> None:
    argv = bwrap_argv(Sandbox(), FACTS, COMMAND)
    assert argv[:3] == ["/usr/bin/env", "--ignore-signal=TERM", "/usr/bin/bwrap"]
    tail = argv[argv.index("--") :]
    assert tail == ["--", "/usr/bin/env", "--default-signal=TERM", "--", *COMMAND]


def test_the_system_is_read_only_with_new_dev_proc_and_a_private_tmp() -> None:
    argv = bwrap_argv(Sandbox(), FACTS, COMMAND)
    assert argv[3:12] == ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]


def test_home_root_and_run_are_hidden_once_each_and_before_anything_is_bound() -> None:
    argv = bwrap_argv(Sandbox(), FACTS, COMMAND)
    assert pairs(argv, "--tmpfs") == ["/tmp", "/home", "/root", "/run", "/etc/mcp-bridge/keys"]
    first_bind = min(i for i, word in enumerate(argv) if word in ("--bind", "--ro-bind") and i > 4)
    assert max(i for i, word in enumerate(argv[:first_bind]) if word == "--tmpfs") < first_bind


def test_only_what_is_needed_under_a_hidden_directory_is_bound_back_read_only() -> None:
    argv = bwrap_argv(Sandbox(), FACTS, COMMAND)
    bound = pairs(argv, "--ro-bind")
    assert "/home/alice/.venv" in bound
    assert "/usr/lib/python3" not in bound and "/srv/app" not in bound  # visible anyway


def test_listed_paths_are_bound_parents_first_and_secrets_are_hidden_after_them() -> None:
    sandbox = Sandbox(read_write=("/srv/data/out",), read_only=("/srv/data", "/etc/mcp-bridge"))
    argv = bwrap_argv(sandbox, FACTS, COMMAND)
    assert argv.index("/srv/data") < argv.index("/srv/data/out")
    assert pairs(argv, "--bind") == ["/srv/data/out"]
    assert argv.index("/etc/mcp-bridge") < argv.index("/etc/mcp-bridge/tokens")
    assert argv[argv.index("/etc/mcp-bridge/tokens") - 2 :][:3] == [
        "--ro-bind",
        "/dev/null",
        "/etc/mcp-bridge/tokens",
    ]


def test_the_network_is_unshared_unless_allowed_and_resolv_conf_follows_it() -> None:
    closed = bwrap_argv(Sandbox(), FACTS, COMMAND)
    assert "--unshare-net" in closed and FACTS.resolv_conf not in closed
    open_ = bwrap_argv(Sandbox(network=True), FACTS, COMMAND)
    assert "--unshare-net" not in open_ and FACTS.resolv_conf in pairs(open_, "--ro-bind")


def test_pid_namespace_no_capabilities_die_with_parent_and_no_new_session() -> None:
    argv = bwrap_argv(Sandbox(), FACTS, COMMAND)
    for flag in ("--unshare-pid", "--unshare-ipc", "--die-with-parent"):
        assert flag in argv
    assert pairs(argv, "--cap-drop") == ["ALL"]
    assert pairs(argv, "--chdir") == ["/srv/app"]
    assert "--new-session" not in argv  # it would take the server out of the group the stop signals
    assert "--clearenv" not in argv and "--setenv" not in argv  # the environment is bwrap's own


def test_a_command_env_would_misread_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot hold '='"):
        bwrap_argv(Sandbox(), FACTS, ["/opt/a=b/server"])
    with pytest.raises(ValueError):
        bwrap_argv(Sandbox(), FACTS, [])
