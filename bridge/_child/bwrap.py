"""``--sandbox``: a child run under bubblewrap (``bwrap``), and the check that it can be.

Imported only where a child is sandboxed: the settings are :class:`~.sandbox.Sandbox`, a value
the configuration holds whether or not it asks for a sandbox.

What the child sees (docs/security.md, "Sandboxing children"): the system read-only; a new
``/dev`` and ``/proc``; a private, empty ``/tmp``; ``/home``, ``/root``, its ``$HOME`` and ``/run``
hidden under empty tmpfs; its working directory and its command's installation (a venv and the
Python it was made from) read-only; the paths the operator listed, read-only or writable; the
bridge's own secret files (tokens, TLS key, configuration, tap) made unreadable. New
PID, IPC, UTS and (unless allowed) network namespaces; no capabilities; ``--die-with-parent``.

The stop order keeps holding because of how the process tree is made::

    env --ignore-signal=TERM bwrap ... -- env --default-signal=TERM -- COMMAND ...

The bridge starts ``bwrap`` (through ``env``, so no shell and no ``preexec_fn``) in its own
process group with SIGTERM ignored. bwrap forks the sandbox's PID 1 (its reaper), which forks the
server; none of them starts a session, so all three stay in the group the bridge signals. The inner
``env`` gives the server SIGTERM's default action back. So: closing stdin reaches the server (bwrap
passes the pipes through); SIGTERM to the group reaches the server, while bwrap (which would
otherwise die at once and have ``--die-with-parent`` SIGKILL the server) waits for it; SIGKILL to
the group kills bwrap and the sandbox's PID 1, and the kernel then kills every process left in the
PID namespace, including a grandchild that started a session of its own.

:func:`bwrap_argv` is sans-IO: a pure function from the settings, the facts about the host
(:class:`HostFacts`) and the command to bwrap's argv. :func:`host_facts` gathers those facts;
:func:`check_sandbox` runs ``true`` in a sandbox once at start-up, so that a missing bwrap or a
kernel that forbids its namespaces is a configuration error, never an unsandboxed start.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence

import attrs

from .._errors import ConfigError
from .sandbox import Sandbox

# Hidden under an empty tmpfs: people's files, and /run, where sockets that grant power live
# (docker.sock, the bridge's own, D-Bus, systemd's credentials). A read-only bind does not stop
# connect(2) on a Unix socket, so these must be hidden, not merely read-only.
HIDDEN_DIRS = ("/home", "/root", "/run")
# A check that hangs (a kernel waiting on something) must not hang start-up.
CHECK_TIMEOUT = 10.0
INSTALL_BWRAP = "install bubblewrap (apt-get install bubblewrap)"


@attrs.frozen
class HostFacts:
    """What :func:`bwrap_argv` needs to know about the host; :func:`host_facts` finds it.

    Attributes:
        bwrap: bwrap's absolute path.
        env: ``env``'s absolute path (GNU coreutils 8.31 or later, for ``--ignore-signal``).
        cwd: the child's working directory, absolute.
        hidden: the directories to hide that exist (:data:`HIDDEN_DIRS` and ``$HOME``).
        visible: paths the child needs read-only even under a hidden one (its command's
            installation, its working directory).
        hidden_files: which of :attr:`Sandbox.hide` exist, and whether each is a directory.
        resolv_conf: where ``/etc/resolv.conf`` really is, if that is under a hidden directory
            (systemd-resolved's stub under ``/run``): bound back when the network is allowed.
    """

    bwrap: str
    env: str
    cwd: str
    hidden: tuple[str, ...] = ()
    visible: tuple[str, ...] = ()
    hidden_files: tuple[tuple[str, bool], ...] = ()
    resolv_conf: str | None = None


def _under(path: str, directory: str) -> bool:
    return directory == "/" or path == directory or path.startswith(directory.rstrip("/") + "/")


def _depth(path: str) -> int:
    return len([part for part in path.split("/") if part])


def bwrap_argv(sandbox: Sandbox, facts: HostFacts, command: Sequence[str]) -> list[str]:
    """The argv that runs ``command`` sandboxed (module docstring). Pure: no I/O.

    Mounts are applied in order, so hiding comes first and what is made visible again after it,
    parents before the paths inside them; the bridge's secrets are hidden last, so that no listed
    path shows them again.

    Raises:
        ValueError: ``command`` is empty, or its first word holds ``=`` (``env`` would take it for
            a variable).
    """
    if not command:
        raise ValueError("bwrap_argv: expected a command")
    if "=" in command[0]:
        raise ValueError(f"command {command[0]!r}: a sandboxed command's path cannot hold '='")
    argv = [facts.env, "--ignore-signal=TERM", facts.bwrap]
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    hidden = sorted((path for path in dict.fromkeys(facts.hidden) if path not in ("/", "/tmp")), key=_depth)
    for directory in hidden:
        if not any(_under(directory, outer) for outer in hidden if outer != directory):
            argv += ["--tmpfs", directory]
    covered = (*hidden, "/tmp")
    binds: dict[str, str] = {}
    for path in facts.visible:
        if any(_under(path, directory) for directory in covered):
            binds[path] = "--ro-bind"
    if sandbox.network and facts.resolv_conf is not None:
        binds[facts.resolv_conf] = "--ro-bind"
    for path in sandbox.read_only:
        binds[path] = "--ro-bind"
    for path in sandbox.read_write:
        binds[path] = "--bind"
    for path in sorted(binds, key=_depth):
        argv += [binds[path], path, path]
    for path, is_dir in facts.hidden_files:
        argv += ["--tmpfs", path] if is_dir else ["--ro-bind", "/dev/null", path]
    argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not sandbox.network:
        argv.append("--unshare-net")
    argv += ["--cap-drop", "ALL", "--die-with-parent", "--chdir", facts.cwd]
    argv += ["--", facts.env, "--default-signal=TERM", "--", *command]
    return argv


# -- the facts, and the check: I/O ---------------------------------------------------------------


def find_bwrap(sandbox: Sandbox) -> str | None:
    """The absolute path of bwrap, or ``None`` if it is not there."""
    found = shutil.which(sandbox.bwrap)
    return os.path.abspath(found) if found is not None else None


def _installation(command: str) -> list[str]:
    """What running ``command`` reads beside itself: its venv, and the prefix of the real file.

    ``.venv/bin/python3`` needs the venv (``pyvenv.cfg``, ``site-packages``) and the Python it was
    made from; ``~/.pyenv/versions/3.11.7/bin/python3`` needs its prefix.
    """
    paths = []
    bin_dir = os.path.dirname(command)
    venv = os.path.dirname(bin_dir)
    config = os.path.join(venv, "pyvenv.cfg")
    if os.path.isfile(config):
        paths.append(venv)
        try:
            with open(config, encoding="utf-8") as file:
                for line in file:
                    key, _, value = line.partition("=")
                    if key.strip() == "home" and value.strip():
                        paths.append(os.path.dirname(os.path.realpath(value.strip())))
        except OSError:
            pass
    real = os.path.realpath(command)
    if os.path.basename(os.path.dirname(real)) == "bin":
        paths.append(os.path.dirname(os.path.dirname(real)))
    else:
        paths.append(os.path.dirname(real))
    return paths


def host_facts(sandbox: Sandbox, command: str, cwd: str, env: Mapping[str, str]) -> HostFacts:
    """The facts about this host that :func:`bwrap_argv` needs, for one launch.

    Args:
        sandbox: the settings.
        command: the command's absolute path.
        cwd: the child's working directory, absolute.
        env: the child's environment (its ``HOME`` is hidden too).

    Raises:
        ConfigError: bwrap or env is missing.
    """
    bwrap = find_bwrap(sandbox)
    if bwrap is None:
        raise ConfigError(f"sandbox: {sandbox.bwrap!r} not found; {INSTALL_BWRAP}")
    env_tool = shutil.which("env") or "/usr/bin/env"
    home = env.get("HOME")
    candidates = [*HIDDEN_DIRS, *([os.path.realpath(home)] if home else [])]
    hidden = tuple(dict.fromkeys(path for path in candidates if path != "/" and os.path.isdir(path)))
    visible = tuple(dict.fromkeys(p for p in (*_installation(command), cwd) if os.path.exists(p)))
    resolv = os.path.realpath("/etc/resolv.conf")
    resolv_conf = resolv if os.path.exists(resolv) and any(_under(resolv, d) for d in hidden) else None
    hidden_files = tuple((path, os.path.isdir(path)) for path in sandbox.hide if os.path.exists(path))
    return HostFacts(
        bwrap=bwrap,
        env=env_tool,
        cwd=cwd,
        hidden=hidden,
        visible=visible,
        hidden_files=hidden_files,
        resolv_conf=resolv_conf,
    )


def sandboxed(sandbox: Sandbox, argv: Sequence[str], cwd: str | None, env: Mapping[str, str]) -> list[str]:
    """``argv`` wrapped in bwrap for this host: :func:`host_facts`, then :func:`bwrap_argv`.

    ``argv[0]`` is looked up in the child's ``PATH`` here, once, so that the sandbox runs exactly
    the file whose installation it made visible.

    Raises:
        ConfigError: bwrap, env or the command is missing.
    """
    command = shutil.which(argv[0], path=env.get("PATH")) if os.sep not in argv[0] else argv[0]
    if command is None:
        raise ConfigError(f"command {argv[0]!r} not found in PATH")
    directory = os.path.abspath(cwd or os.getcwd())
    command = os.path.join(directory, command)  # a relative path is the child's cwd's
    facts = host_facts(sandbox, command, directory, env)
    try:
        return bwrap_argv(sandbox, facts, [command, *argv[1:]])
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


_checked: set[tuple[str, bool]] = set()


def check_sandbox(sandbox: Sandbox, where: str = "--sandbox", bwrap_option: str = "--sandbox-bwrap") -> None:
    """Refuse, at start-up, a sandbox that cannot work: bwrap missing, or unable to sandbox.

    Runs ``true`` in the same sandbox (once per bwrap and network setting in a process).

    Args:
        sandbox: the settings.
        where: the option or configuration key that asked for the sandbox, for the message.
        bwrap_option: the option or key that names bwrap's path there, for the message's fix.

    Raises:
        ConfigError: naming ``where`` and the fix.
    """
    bwrap = find_bwrap(sandbox)
    if bwrap is None:
        raise ConfigError(
            f"{where}: bubblewrap's {sandbox.bwrap!r} was not found, and a sandboxed server is never "
            f"started without it; {INSTALL_BWRAP}, or name its path with {bwrap_option}"
        )
    if (bwrap, sandbox.network) in _checked:
        return
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    argv = sandboxed(attrs.evolve(sandbox, read_only=(), read_write=(), hide=()), ["true"], "/", env)
    try:
        result = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=CHECK_TIMEOUT,
            env=env,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConfigError(f"{where}: {bwrap} could not be run: {exc}") from None
    if result.returncode != 0:
        said = result.stderr.decode(errors="replace").strip().splitlines()
        raise ConfigError(
            f"{where}: {bwrap} cannot create a sandbox here ({said[-1] if said else result.returncode}); "
            "it needs user, mount and PID namespaces: allow them (sysctl kernel.unprivileged_userns_clone=1 "
            "or user.max_user_namespaces > 0; no RestrictNamespaces=yes in a systemd unit; in a container, a "
            "seccomp profile that allows unshare and clone with namespace flags), and env from GNU coreutils "
            "8.31 or later; see docs/security.md, 'Sandboxing children'"
        )
    _checked.add((bwrap, sandbox.network))
